//! What a new user meets: finding the store from anywhere in a project, files made under
//! the user's umask, hints that name the right command, completions, the man page, and
//! docs whose links stay inside the repository.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::*;

fn run_in(s: &Session, dir: &Path, args: &[&str]) -> Run {
    outcome(s.cmd(args).current_dir(dir))
}

fn store_of(r: &Run) -> String {
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    v["store"].as_str().unwrap().to_string()
}

#[test]
fn the_store_is_found_from_a_subdirectory_and_store_flag_overrides_it() {
    let s = Session::new();
    s.ok(&["init"]);
    let deep = s.path("src/app/deeper");
    std::fs::create_dir_all(&deep).unwrap();
    let root_store = s.path(".scion").canonicalize().unwrap();
    let r = run_in(&s, &deep, &["--json", "status"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(PathBuf::from(store_of(&r)), root_store);
    // `init` from a subdirectory makes a store there, as `git init` does; the nearest wins.
    let app = s.path("src/app");
    assert_eq!(run_in(&s, &app, &["init"]).code, 0);
    let r = run_in(&s, &deep, &["--json", "status"]);
    assert_eq!(
        PathBuf::from(store_of(&r)),
        app.join(".scion").canonicalize().unwrap()
    );
    // --store and SCION_STORE still name a store explicitly.
    let r = run_in(
        &s,
        &deep,
        &[
            "--json",
            "--store",
            &root_store.display().to_string(),
            "status",
        ],
    );
    assert_eq!(PathBuf::from(store_of(&r)), root_store);
    let r = outcome(
        s.cmd(&["--json", "status"])
            .current_dir(&deep)
            .env("SCION_STORE", &root_store),
    );
    assert_eq!(PathBuf::from(store_of(&r)), root_store);
    // Outside any store, the error says where it looked.
    let elsewhere = tempfile::tempdir().unwrap();
    let r = outcome(
        s.cmd(&["status"])
            .current_dir(elsewhere.path())
            .env("HOME", elsewhere.path()),
    );
    assert_eq!(r.code, 3);
    assert!(
        r.stderr.contains("nor in any directory above it up to"),
        "{}",
        r.stderr
    );
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn exports_and_checkouts_respect_the_umask() {
    let s = Session::new();
    seed(&s.path("shop.db"), 20);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    for (umask, want) in [("022", 0o644), ("027", 0o640), ("077", 0o600)] {
        let script = format!(
            "umask {umask} && rm -f out-{umask}.db && \"$0\" export shop out-{umask}.db && \"$0\" checkout shop --force >/dev/null && rm -f .scion/checkouts/shop/main.db* && \"$0\" checkout shop"
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .arg(bin())
            .current_dir(s.dir.path())
            .env("HOME", s.dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        let checkout = PathBuf::from(stdout.lines().last().unwrap().trim());
        assert_eq!(
            mode(&s.path(&format!("out-{umask}.db"))),
            want,
            "export, umask {umask}"
        );
        assert_eq!(mode(&checkout), want, "checkout, umask {umask}");
    }
    s.ok(&["checkpoint", "shop", "c1"]);
    let ro = s.ok(&["checkout", "shop@main@c1", "--read-only"]);
    assert_eq!(
        mode(Path::new(ro.trim())),
        0o444,
        "read-only checkouts stay 0444"
    );
}

#[test]
fn export_into_a_missing_directory_is_refused_like_cp() {
    let s = Session::new();
    seed(&s.path("shop.db"), 5);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    let r = s.run(&["export", "shop", "no/such/dir/x.db"]);
    assert_eq!(r.code, 8, "{}", r.stderr);
    assert!(!s.path("no").exists(), "no directory was created");
}

#[test]
fn hints_name_the_command_that_refused() {
    let s = Session::new();
    seed(&s.path("shop.db"), 50);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "try"]);
    s.ok(&["checkpoint", "shop@try", "c1"]);
    let p = s.ok(&["checkout", "shop@try"]);
    sqlite(Path::new(p.trim()), "DELETE FROM items WHERE id < 5");
    let mut transcript = String::new();
    for args in [
        &["checkout", "shop@try@c1"][..],
        &["rollback", "shop@try", "--to", "c1"],
        &["promote", "shop@try", "--onto", "main"],
        &["destroy", "shop@try"],
        &["checkout", "shop@try", "--force"],
        &["checkpoints", "shop@try"],
    ] {
        let r = s.run(args);
        transcript.push_str(&format!("$ scion {}\n[exit {}]\n", args.join(" "), r.code));
        transcript.push_str(&s.scrub(&r.stdout));
        transcript.push_str(&s.scrub(&r.stderr));
        transcript.push('\n');
    }
    insta::assert_snapshot!(transcript);
}

/// A checkout both stale and dirty (changes written on a head the branch has left): every
/// command that refuses it gives a hint that works in that state, and following the hints
/// keeps the changes and brings the head.
#[test]
fn the_hints_for_a_stale_and_dirty_checkout_lead_somewhere() {
    let s = Session::new();
    seed(&s.path("shop.db"), 50);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "try"]);
    s.ok(&["fork", "shop", "next"]);
    let next = s.ok(&["checkout", "shop@next"]);
    sqlite(Path::new(next.trim()), "DELETE FROM items WHERE id <= 10");
    s.ok(&["checkpoint", "shop@next", "smaller"]);
    let path = s.ok(&["checkout", "shop@try"]).trim().to_string();
    // An app holds the file open while the head moves (so it is left stale), then writes.
    let app = rusqlite::Connection::open(&path).unwrap();
    app.query_row("SELECT count(*) FROM items", [], |r| r.get::<_, i64>(0))
        .unwrap();
    s.ok(&["promote", "shop@next", "--onto", "try", "--force"]);
    app.execute("INSERT INTO items(name, price) VALUES ('kept', 1)", [])
        .unwrap();
    drop(app);
    let hint = |args: &[&str], code: &str| -> String {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let r = s.run(&all);
        assert_eq!(r.code, 6, "{args:?}: {}", r.stderr);
        let v: serde_json::Value = serde_json::from_str(r.stderr.trim()).unwrap();
        assert_eq!(v["error"]["code"], code, "{args:?}: {}", r.stderr);
        v["error"]["hint"].as_str().unwrap().to_string()
    };
    for (args, then) in [
        (
            &["checkout", "shop@try"][..],
            "`scion checkout shop@try --force`",
        ),
        (
            &["checkpoint", "shop@try", "x"],
            "`scion checkout shop@try --force`",
        ),
        (
            &["destroy", "shop@try"],
            "repeat `scion destroy` with --force",
        ),
        (
            &["rollback", "shop@try", "--to", "fork"],
            "repeat `scion rollback` with --force",
        ),
    ] {
        let h = hint(args, "stale_checkout");
        assert!(
            h.contains(".backup kept.db") && h.contains(then),
            "{args:?}: {h}"
        );
    }
    // The hint, followed: the changes are kept, then the head comes.
    let out = std::process::Command::new("sqlite3")
        .arg(&path)
        .arg(format!(".backup {}", s.path("kept.db").display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    s.ok(&[
        "create",
        "kept",
        "--from",
        s.path("kept.db").to_str().unwrap(),
    ]);
    assert_eq!(
        s.ok(&[
            "sql",
            "kept",
            "SELECT count(*) FROM items WHERE name = 'kept'"
        ]),
        "1\n"
    );
    s.ok(&["checkout", "shop@try", "--force"]);
    assert_eq!(
        s.ok(&["sql", "shop@try", "SELECT count(*) FROM items"]),
        "40\n"
    );
}

#[test]
fn promote_force_onto_an_open_branch_moves_the_head_and_leaves_the_file_stale() {
    let s = Session::new();
    seed(&s.path("shop.db"), 50);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "next"]);
    let next = s.ok(&["checkout", "shop@next"]);
    sqlite(Path::new(next.trim()), "DELETE FROM items WHERE id <= 10");
    s.ok(&["checkpoint", "shop@next", "smaller"]);
    // An app keeps main open (a WAL connection holds its locks while open).
    let main = s.ok(&["checkout", "shop"]);
    let app = rusqlite::Connection::open(main.trim()).unwrap();
    let rows = |c: &rusqlite::Connection| -> i64 {
        c.query_row("SELECT count(*) FROM items", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(rows(&app), 50);
    let refused = s.run(&["promote", "shop@next", "--onto", "main"]);
    assert_eq!(refused.code, 6, "{}", refused.stderr);
    let r = s.run(&["promote", "shop@next", "--onto", "main", "--force"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("open in another connection"),
        "{}",
        r.stderr
    );
    assert_eq!(
        rows(&app),
        50,
        "the open file was not rewritten under the app"
    );
    let status = s.ok(&["--json", "branches", "shop"]);
    assert!(status.contains("\"stale\""), "{status}");
    drop(app);
    let main = s.ok(&["checkout", "shop"]);
    let c = rusqlite::Connection::open(main.trim()).unwrap();
    assert_eq!(rows(&c), 40, "the next checkout brings the promoted head");
}

#[test]
fn completions_and_man_page_are_generated_from_the_cli() {
    let s = Session::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = s.ok(&["completions", shell]);
        for word in ["checkout", "rollback", "read-only"] {
            assert!(out.contains(word), "{shell} completion lacks {word}");
        }
    }
    let bash = s.ok(&["completions", "bash"]);
    let path = s.path("scion.bash");
    std::fs::write(&path, &bash).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&path)
        .status()
        .expect("bash runs");
    assert!(check.success(), "the bash completion parses");
    let man = s.ok(&["man"]);
    assert!(
        man.contains(".TH scion 1"),
        "{}",
        &man[..200.min(man.len())]
    );
    assert!(man.contains("checkpoint"));
}

/// Markdown links `[text](target)` in a file, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((n + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn docs_links_stay_inside_the_repository() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap();
    let mut docs = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    for dir in ["docs", "docs/decisions"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "md") {
                docs.push(e.path());
            }
        }
    }
    let mut bad = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        let name = doc.strip_prefix(&root).unwrap().display().to_string();
        for (line, word) in text.lines().enumerate() {
            if word.contains("../shared") {
                bad.push(format!(
                    "{name}:{}: names a path outside the repository",
                    line + 1
                ));
            }
        }
        for (line, target) in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let path = target.split('#').next().unwrap();
            if path.is_empty() {
                continue;
            }
            let resolved = doc.parent().unwrap().join(path);
            match resolved.canonicalize() {
                Ok(p) if p.starts_with(&root) => {}
                Ok(_) => bad.push(format!("{name}:{line}: {target} leaves the repository")),
                Err(_) => bad.push(format!("{name}:{line}: {target} does not exist")),
            }
        }
    }
    assert!(bad.is_empty(), "broken doc links:\n{}", bad.join("\n"));
}

#[test]
fn diff_rows_gives_the_rows_as_data() {
    let s = Session::new();
    s.ok(&["init"]);
    let src = s.path("shop.db");
    sqlite(
        &src,
        "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL);
         INSERT INTO items(name, price) VALUES ('apple', 1.0), ('pear', 2.5);",
    );
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "try-1"]);
    let p = s.ok(&["checkout", "shop@try-1"]);
    sqlite(
        Path::new(p.trim()),
        "UPDATE items SET price = price * 2 WHERE name = 'pear';
         INSERT INTO items(name, price) VALUES ('fig', 3.5); DELETE FROM items WHERE name = 'apple';",
    );
    s.ok(&["checkpoint", "shop@try-1", "doubled"]);
    let json = s.ok(&["--json", "diff", "shop", "shop@try-1@doubled", "--rows"]);
    let human = s.ok(&[
        "diff",
        "shop",
        "shop@try-1@doubled",
        "--rows",
        "--limit",
        "2",
    ]);
    insta::assert_snapshot!(format!("{json}\n{human}"));
    let r = s.run(&["diff", "shop", "shop@try-1", "--rows", "--sql"]);
    assert_eq!(r.code, 2, "--rows and --sql do not go together");
}

/// `diff` compares committed versions; a checkout holding changes not checkpointed says so
/// instead of an unqualified "no differences".
#[test]
fn diff_says_what_a_dirty_checkout_holds_that_it_leaves_out() {
    let s = Session::new();
    seed(&s.path("shop.db"), 20);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "dd"]);
    let p = s.ok(&["checkout", "shop@dd"]);
    sqlite(Path::new(p.trim()), "DELETE FROM items");
    let r = s.run(&["diff", "shop", "shop@dd"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("no differences between the committed versions"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr
            .contains("the checkout of shop@dd holds changes not checkpointed")
            && r.stderr.contains("scion checkpoint shop@dd <name>"),
        "{}",
        r.stderr
    );
    let v = s.json(&["diff", "shop", "shop@dd"]);
    assert_eq!(v["unsaved_checkouts"], serde_json::json!(["shop@dd"]));
    // --working takes the file as it is, as `git diff` takes the working tree.
    let w = s.json(&["diff", "shop", "shop@dd", "--working", "--rows"]);
    assert_eq!(w["working_files"], serde_json::json!(["shop@dd"]));
    assert_eq!(w["tables"][0]["removed"], 20, "{w}");
    let r = s.run(&["diff", "shop@dd", "shop", "--working"]);
    assert!(r.stdout.contains("20 added"), "{}", r.stdout);
    assert!(
        r.stderr.contains("shop@dd is read from its checkout file"),
        "{}",
        r.stderr
    );
    // The same on a side without changes: an ordinary diff.
    let plain = s.json(&["diff", "shop", "shop@main", "--working"]);
    assert!(plain.get("working_files").is_none(), "{plain}");
    s.ok(&["checkpoint", "shop@dd", "emptied"]);
    let v = s.json(&["diff", "shop", "shop@dd"]);
    assert!(v.get("unsaved_checkouts").is_none(), "{v}");
    assert_eq!(v["tables"][0]["removed"], 20);
}

/// An az:// store that cannot be configured names the Azure variables, not the S3 ones.
#[test]
fn an_azure_store_without_an_account_names_the_azure_variables() {
    let s = Session::new();
    let mut c = s.cmd(&["--store", "az://container/prefix", "status"]);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("AZURE")) {
        c.env_remove(k);
    }
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("AZURE_STORAGE_"), "{stderr}");
    assert!(!stderr.contains("SCION_S3_"), "{stderr}");
}
