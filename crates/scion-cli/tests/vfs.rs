//! `scion sql` and `scion shell` through the scion VFS, from real processes: the stock
//! `sqlite3` CLI with the loadable extension, a writer killed with SIGKILL while it commits,
//! and two processes writing one branch.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;

#[test]
fn sql_reads_and_commits_without_a_checkout() {
    let s = Session::new();
    seed(&s.path("shop.db"), 500);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "try"]);
    let out = s.ok(&[
        "sql",
        "shop@try",
        "DELETE FROM items WHERE id > 100; SELECT count(*) AS n FROM items",
    ]);
    assert_eq!(out, "100\n");
    // A write says what it committed (stderr); a read says nothing.
    let w = s.run(&["sql", "shop@try", "UPDATE items SET price = 0 WHERE id = 1"]);
    assert_eq!(w.code, 0, "{}", w.stderr);
    assert_eq!(
        w.stderr, "committed to shop@try: version 2 -> 3 (1 commit)\n",
        "{}",
        w.stderr
    );
    let r = s.run(&["sql", "shop@try", "SELECT 1"]);
    assert_eq!(r.stderr, "");
    // Parent untouched, no file materialized for either branch.
    assert_eq!(
        s.ok(&["sql", "shop", "SELECT count(*) FROM items"]),
        "500\n"
    );
    let status = s.ok(&["--json", "branches", "shop"]);
    assert!(!status.contains("\"checkout\": \"clean\""), "{status}");
    // A fresh process reads what the last one committed; so does an export (no VFS).
    s.ok(&["checkpoint", "shop@try", "cut"]);
    s.ok(&["export", "shop@try@cut", "cut.db"]);
    assert_eq!(
        sqlite(&s.path("cut.db"), "SELECT count(*) FROM items"),
        "Integer(100)"
    );
    let json = s.ok(&[
        "--json",
        "sql",
        "shop@try",
        "SELECT id FROM items ORDER BY id LIMIT 2",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["results"][0]["rows"], serde_json::json!([[1], [2]]));
    assert!(v["version"].as_u64().unwrap() >= 2);
}

#[test]
fn checkpoint_of_a_branch_written_through_the_vfs_names_its_head_in_o1() {
    let s = Session::new();
    seed(&s.path("shop.db"), 2000);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["sql", "shop", "DELETE FROM items WHERE id % 2 = 0"]);
    let out = s.ok(&["--json", "--stats", "checkpoint", "shop", "halved"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["committed"], false,
        "the head is named, nothing is read or written: {out}"
    );
    assert_eq!(v["pages_changed"], 0);
    assert_eq!(
        s.ok(&["sql", "shop@main@halved", "SELECT count(*) FROM items"]),
        "1000\n"
    );
}

#[test]
fn sql_errors_say_what_to_do() {
    let s = Session::new();
    seed(&s.path("shop.db"), 10);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["checkpoint", "shop", "one"]);
    let missing = s.run(&["sql", "shop@ghost", "SELECT 1"]);
    assert_ne!(missing.code, 0);
    assert!(missing.stderr.contains("shop@ghost"), "{}", missing.stderr);
    let ro = s.run(&["sql", "shop@main@one", "DELETE FROM items"]);
    assert_ne!(ro.code, 0);
    assert!(
        ro.stderr.contains("read-only") || ro.stderr.contains("readonly"),
        "{}",
        ro.stderr
    );
    let wal = s.run(&["sql", "shop", "PRAGMA journal_mode=WAL"]);
    assert_ne!(wal.code, 0);
    assert!(wal.stderr.contains("journal_mode=WAL"), "{}", wal.stderr);
}

/// Every way a `scion sql` statement fails ends in the exit code (and `--json` code) of
/// its cause, as the rest of the CLI reports it, not a generic 1.
#[test]
fn sql_failures_exit_with_the_documented_codes() {
    let s = Session::new();
    seed(&s.path("shop.db"), 200);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["checkpoint", "shop", "one"]);
    s.ok(&["fork", "shop", "leased"]);
    s.ok(&["fork", "shop", "dirty"]);
    s.ok(&["fork", "shop", "broken"]);
    let failed = |args: &[&str], exit: i32, code: &str| {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let r = s.run(&all);
        assert_eq!(r.code, exit, "scion {args:?}: {}", r.stderr);
        let v: serde_json::Value =
            serde_json::from_str(r.stderr.trim()).unwrap_or_else(|e| panic!("{e}: {}", r.stderr));
        assert_eq!(v["error"]["code"], code, "{}", r.stderr);
        assert_eq!(v["error"]["exit_code"], exit);
        v["error"]["message"].as_str().unwrap().to_string()
    };
    failed(&["sql", "shop@ghost", "SELECT 1"], 3, "branch_not_found");
    failed(
        &["sql", "shop@main@nope", "SELECT 1"],
        3,
        "checkpoint_not_found",
    );
    let ro = failed(
        &["sql", "shop@main@one", "DELETE FROM items"],
        8,
        "invalid_input",
    );
    assert!(ro.contains("read-only"), "{ro}");
    // Another holder's lease: refused, naming the holder.
    s.ok(&[
        "--holder",
        "agent-7",
        "lease",
        "acquire",
        "shop@leased",
        "--ttl",
        "10m",
    ]);
    let leased = failed(
        &["sql", "shop@leased", "DELETE FROM items"],
        6,
        "lease_held",
    );
    assert!(leased.contains("agent-7"), "{leased}");
    // A branch with a checkout is written through its file: one way of writing a branch
    // at a time. Released, it takes VFS writes again.
    let path = std::path::PathBuf::from(s.ok(&["checkout", "shop@dirty"]).trim());
    sqlite(&path, "DELETE FROM items WHERE id = 1");
    let why = failed(
        &["sql", "shop@dirty", "DELETE FROM items"],
        6,
        "checked_out",
    );
    assert!(why.contains(&path.display().to_string()), "{why}");
    failed(
        &["checkout", "shop@dirty", "--release"],
        6,
        "dirty_checkout",
    );
    s.ok(&["checkpoint", "shop@dirty", "kept"]);
    s.ok(&["checkout", "shop@dirty", "--release"]);
    assert!(!path.exists());
    s.ok(&["sql", "shop@dirty", "DELETE FROM items WHERE id = 2"]);
    // A damaged segment under the branch: corrupt, nothing changed.
    for entry in std::fs::read_dir(s.path(".scion/segments")).unwrap() {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(entry.unwrap().path())
            .unwrap();
        f.set_len(64).unwrap();
    }
    let corrupt = s.run(&[
        "--json",
        "sql",
        "shop@broken",
        "SELECT sum(price) FROM items",
    ]);
    assert_eq!(corrupt.code, 7, "{}", corrupt.stderr);
}

#[test]
fn shell_runs_the_stock_sqlite3_with_the_extension() {
    let s = Session::new();
    seed(&s.path("shop.db"), 50);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    let ext = bin().with_file_name("libscion_vfs.so");
    assert!(
        ext.is_file(),
        "{} is missing: build it with `cargo build -p scion-vfs-ext` (scripts/test does)",
        ext.display()
    );
    let out = s.ok(&["shell", "shop", "--", "INSERT INTO items(name, price) VALUES ('shell', 7); SELECT count(*) FROM items; PRAGMA scion_version;"]);
    assert_eq!(out, "51\n2\n");
    assert_eq!(
        s.ok(&[
            "sql",
            "shop",
            "SELECT price FROM items WHERE name = 'shell'"
        ]),
        "7.0\n"
    );
}

/// sqlite3 alone would say "unable to open database file" and go on with an in-memory
/// database; `scion shell` fails with the engine's error, and shows the VFS's reasons for
/// refusing a statement.
#[test]
fn shell_errors_say_what_to_do() {
    let s = Session::new();
    seed(&s.path("shop.db"), 5);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    for target in ["ghost", "shop@nobranch", "shop@main@nocheckpoint"] {
        let out = s.run(&["shell", target, "--", "SELECT 1"]);
        assert_ne!(out.code, 0, "{target}: {}", out.stdout);
        assert!(out.stdout.is_empty(), "{target} ran SQL: {}", out.stdout);
        assert!(out.stderr.contains("does not exist"), "{}", out.stderr);
    }
    let missing = s.run(&[
        "shell",
        "shop",
        "--sqlite3",
        "/nonexistent/sqlite3",
        "--",
        "SELECT 1",
    ]);
    assert_ne!(missing.code, 0);
    assert!(
        missing.stderr.contains("install the sqlite3 shell"),
        "{}",
        missing.stderr
    );
    for target in ["ghost", "shop@nobranch"] {
        assert_eq!(
            s.run(&["shell", target, "--", "SELECT 1"]).code,
            3,
            "{target}"
        );
    }
    assert_eq!(missing.code, 1);
    // A plain SQL error is sqlite3's own failure (1); the VFS's refusals exit with their
    // cause's code, as from `scion sql`, with its hint.
    let bad_sql = s.run(&["shell", "shop", "--", "SELEC 1"]);
    assert_eq!(bad_sql.code, 1, "{}", bad_sql.stderr);
    s.ok(&["--holder", "agent-7", "lease", "acquire", "shop"]);
    let leased = s.run(&["shell", "shop", "--", "DELETE FROM items"]);
    assert_eq!(leased.code, 6, "{}", leased.stderr);
    assert!(
        leased.stderr.contains("is leased by agent-7"),
        "{}",
        leased.stderr
    );
    let json = s.run(&["--json", "shell", "shop", "--", "DELETE FROM items"]);
    let last = json.stderr.lines().last().unwrap_or_default();
    let v: serde_json::Value =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {}", json.stderr));
    assert_eq!(v["error"]["code"], "lease_held");
    assert!(v["error"]["hint"].as_str().is_some(), "{v}");
    // Reads work while another holds the lease, and exit 0.
    assert_eq!(
        s.run(&["shell", "shop", "--", "SELECT count(*) FROM items"])
            .code,
        0
    );
}

#[test]
fn two_processes_write_one_branch_in_turn() {
    let s = Session::new();
    seed(&s.path("shop.db"), 10);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    let spawn = |i: usize| {
        // A write transaction that lasts: the other process's arrives while it holds the
        // branch, and waits its turn (SQLite's busy handler retries the lock).
        let sql = format!(
            "BEGIN IMMEDIATE; INSERT INTO items(name, price) VALUES ('p{i}', {i}); \
             SELECT count(*) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000) SELECT i FROM n); \
             COMMIT"
        );
        s.cmd(&["sql", "shop", &sql])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Two writers at once: one may be told the branch is busy (clearly), and is retried.
    let mut busy = 0;
    for pair in 0..8 {
        let children = [spawn(pair * 2), spawn(pair * 2 + 1)];
        for (k, child) in children.into_iter().enumerate() {
            let out = child.wait_with_output().unwrap();
            if out.status.success() {
                continue;
            }
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("busy") || err.contains("locked") || err.contains("moved"),
                "{err}"
            );
            busy += 1;
            let retry = spawn(pair * 2 + k).wait_with_output().unwrap();
            assert!(
                retry.status.success(),
                "{}",
                String::from_utf8_lossy(&retry.stderr)
            );
        }
    }
    eprintln!("{busy} of 16 writers found the branch busy and retried");
    let n: u64 = s
        .ok(&["sql", "shop", "SELECT count(*) FROM items"])
        .trim()
        .parse()
        .unwrap();
    assert_eq!(n, 26, "every writer's row is in the branch, none twice");
}

const STATE: &str = "SELECT count(*) || ':' || total(price) AS state FROM items";

fn state_of(path: &std::path::Path) -> String {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row(STATE, [], |r| r.get(0))
        .unwrap()
}

#[test]
fn kill_9_during_a_vfs_commit_leaves_the_old_or_the_new_version() {
    let s = Session::new();
    seed(&s.path("shop.db"), 20_000);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    let seed_value = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill -9 seed {seed_value}");
    let mut x = seed_value;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // The branch's state read without the VFS: exported, then read by plain SQLite.
    let exported = |s: &Session| {
        s.ok(&["export", "shop", "head.db", "--force"]);
        state_of(&s.path("head.db"))
    };
    let started = std::time::Instant::now();
    s.ok(&["sql", "shop", "UPDATE items SET price = price + 1"]);
    let span_us = (started.elapsed().as_micros() as u64 * 3).max(50_000);
    let mut killed = 0;
    for round in 1..16u64 {
        let sql = format!(
            "UPDATE items SET price = price + {round} WHERE id % {} = 0",
            2 + round % 5
        );
        let before = exported(&s);
        // What the statement makes of the head, on a plain copy.
        s.ok(&["export", "shop", "expected.db", "--force"]);
        sqlite(&s.path("expected.db"), &sql);
        let expected = state_of(&s.path("expected.db"));
        let mut child = s
            .cmd(&["sql", "shop", &sql])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rand() % span_us));
        let _ = child.kill();
        let finished = child.wait().unwrap().success();
        if !finished {
            killed += 1;
        }
        let now = exported(&s);
        assert!(
            now == before || now == expected,
            "round {round}: neither the old nor the new state"
        );
        if finished {
            assert_eq!(now, expected, "round {round}: a reported commit is lost");
        }
        // It opens cleanly through the VFS, the store verifies, and the next writer is
        // not kept out by the dead one (its writing turn died with it).
        let through_vfs = s.ok(&["sql", "shop", STATE]);
        assert_eq!(through_vfs.trim(), now, "round {round}");
        let verify = s.run(&["verify"]);
        assert_eq!(verify.code, 0, "round {round}: {}", verify.stdout);
        s.ok(&["sql", "shop", "UPDATE items SET name = name WHERE id = 1"]);
    }
    eprintln!("{killed} of 15 VFS writers were killed before they finished");
}

/// `--attach NAME=TARGET` reads other branches and checkpoints beside the target in the
/// same statements, read-only, up to SQLite's maximum of 125 attached databases.
#[test]
fn sql_attaches_other_versions_read_only() {
    let s = Session::new();
    seed(&s.path("shop.db"), 50);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["checkpoint", "shop", "v1"]);
    s.ok(&["fork", "shop", "try"]);
    s.ok(&[
        "sql",
        "shop@try",
        "UPDATE items SET price = 999 WHERE id IN (3, 7)",
    ]);
    s.ok(&["sql", "shop", "DELETE FROM items WHERE id = 50"]);
    // The branch beside its parent's head and the parent's checkpoint, in one join.
    let out = s.ok(&[
        "sql",
        "shop@try",
        "--attach",
        "base=shop@main",
        "--attach",
        "before=shop@main@v1",
        "SELECT t.id, t.price FROM items t JOIN base.items b USING (id) WHERE t.price <> b.price ORDER BY t.id; \
         SELECT (SELECT count(*) FROM before.items) - (SELECT count(*) FROM base.items) AS gone",
    ]);
    assert_eq!(out, "3|999.0\n7|999.0\n1\n");
    // An attached version is read-only: nothing is written to it, clearly.
    let failed = |args: &[&str], exit: i32, code: &str| -> String {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let r = s.run(&all);
        assert_eq!(r.code, exit, "{args:?}: {}", r.stderr);
        let v: serde_json::Value = serde_json::from_str(r.stderr.trim()).unwrap();
        assert_eq!(v["error"]["code"], code, "{}", r.stderr);
        v["error"]["message"].as_str().unwrap().to_string()
    };
    let why = failed(
        &[
            "sql",
            "shop@try",
            "--attach",
            "base=shop@main",
            "DELETE FROM base.items",
        ],
        8,
        "invalid_input",
    );
    assert!(why.contains("--attach"), "{why}");
    assert_eq!(s.ok(&["sql", "shop", "SELECT count(*) FROM items"]), "49\n");
    // Bad names, unknown versions and repeated names are refused before anything runs.
    for bad in [
        "main=shop@main",
        "1x=shop@main",
        "no-dash=shop@main",
        "shop@main",
    ] {
        failed(
            &["sql", "shop@try", "--attach", bad, "SELECT 1"],
            8,
            "invalid_input",
        );
    }
    failed(
        &["sql", "shop@try", "--attach", "g=shop@ghost", "SELECT 1"],
        3,
        "branch_not_found",
    );
    failed(
        &[
            "sql", "shop@try", "--attach", "a=shop", "--attach", "A=shop", "SELECT 1",
        ],
        8,
        "invalid_input",
    );
    // SQLite's maximum of attached databases, and one more.
    let mut args: Vec<String> = vec!["sql".into(), "shop@try".into()];
    for i in 1..=125 {
        args.push("--attach".into());
        args.push(format!("v{i}=shop@main"));
    }
    args.push("SELECT count(*) AS n FROM v125.items".into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(s.ok(&refs), "49\n");
    let mut more = refs.clone();
    more.insert(2, "--attach");
    more.insert(3, "v126=shop@main");
    let why = failed(&more, 8, "invalid_input");
    assert!(why.contains("at most 125"), "{why}");
}

/// `scion sql` prints what sqlite3 prints in a pipe: rows alone unless `--header`; `--csv`
/// quotes as RFC 4180 does; `--line` names each cell.
#[test]
fn sql_output_modes_are_sqlite3_s() {
    let s = Session::new();
    s.ok(&["init"]);
    let db = s.path("m.db");
    sqlite(&db, "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO t VALUES (1, 'a,b'), (2, 'x\"y')");
    s.ok(&["create", "m", "--from", db.to_str().unwrap()]);
    let q = "SELECT id, name FROM t ORDER BY id";
    assert_eq!(s.ok(&["sql", "m", q]), "1|a,b\n2|x\"y\n");
    assert_eq!(
        s.ok(&["sql", "m", q, "--header"]),
        "id|name\n1|a,b\n2|x\"y\n"
    );
    assert_eq!(
        s.ok(&["sql", "m", q, "--csv", "--header"]),
        "id,name\n1,\"a,b\"\n2,\"x\"\"y\"\n"
    );
    assert_eq!(
        s.ok(&["sql", "m", q, "--line"]),
        "  id = 1\nname = a,b\n\n  id = 2\nname = x\"y\n"
    );
}
