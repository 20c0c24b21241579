//! The real CLI, end to end: transcripts of human and `--json` output pinned as snapshots,
//! exit codes, and the refusal paths.

mod common;

use common::*;

fn transcript(s: &Session, steps: &[&[&str]]) -> String {
    let mut out = String::new();
    for args in steps {
        let r = s.run(args);
        out.push_str(&format!("$ scion {}\n[exit {}]\n", args.join(" "), r.code));
        if !r.stdout.is_empty() {
            out.push_str(&s.scrub(&r.stdout));
        }
        if !r.stderr.is_empty() {
            out.push_str("stderr:\n");
            out.push_str(&s.scrub(&r.stderr));
        }
        out.push('\n');
    }
    out
}

fn prepared(rows: usize) -> Session {
    let s = Session::new();
    seed(&s.path("shop.db"), rows);
    s
}

#[test]
fn human_session() {
    let s = prepared(500);
    let mut t = transcript(
        &s,
        &[
            &["status"],
            &["init"],
            &["init"],
            &["create", "shop", "--from", "shop.db"],
            &["create", "shop", "--from", "shop.db"],
            &["create", "scratch"],
            &["fork", "shop", "try-1"],
            &["fork", "shop", "try-1"],
            &["checkout", "shop@try-1"],
            &["path", "shop@try-2"],
        ],
    );
    let path = s.ok(&["checkout", "shop@try-1"]);
    sqlite(
        std::path::Path::new(path.trim()),
        "UPDATE items SET price = price * 2 WHERE id <= 10",
    );
    t.push_str(&transcript(
        &s,
        &[
            &["checkout", "shop@try-1"],
            &["status"],
            &["checkpoint", "shop@try-1", "doubled"],
            &["checkpoint", "shop@try-1", "doubled"],
            &["checkpoint", "shop@try-1", "again"],
            &["checkpoint", "shop@try-1", "fork"],
            &["checkpoints", "shop@try-1"],
            &["fork", "shop@try-1", "try-2", "--at", "doubled"],
            &["fork", "shop@try-1", "try-3", "--at", "nope"],
            &["branches", "shop"],
            &["export", "shop@try-1@doubled", "out.db"],
            &["export", "shop@try-1@doubled", "out.db"],
            &["export", "shop@try-1@fork", "out.db", "--force"],
            &["checkout", "Shop"],
            &["checkout", "shop@a@b@c"],
            &["checkout", "nosuch"],
            &["checkout", "shop@nosuch"],
            &["status"],
        ],
    ));
    insta::assert_snapshot!("human_session", t);
    assert_eq!(
        sqlite(&s.path("out.db"), "SELECT count(*), sum(price) FROM items"),
        "Integer(500)|Real(156562.5)"
    );
}

#[test]
fn json_session() {
    let s = prepared(200);
    s.ok(&["init"]);
    let path = {
        let t = transcript(
            &s,
            &[
                &["--json", "create", "shop", "--from", "shop.db"],
                &["--json", "fork", "shop", "exp"],
                &["--json", "checkout", "shop@exp"],
            ],
        );
        insta::assert_snapshot!("json_session_1", t);
        s.path(".scion/checkouts/shop/exp.db")
    };
    sqlite(&path, "DELETE FROM items WHERE id > 100");
    let t = transcript(
        &s,
        &[
            &["--json", "checkpoint", "shop@exp", "half"],
            &["--json", "checkpoints", "shop@exp"],
            &["--json", "branches", "shop"],
            &["--json", "export", "shop@exp@half", "half.db"],
            &["--json", "checkout", "shop@nosuch"],
            &["--json", "path", "shop@exp"],
        ],
    );
    insta::assert_snapshot!("json_session_2", t);
    // Every stdout above is valid JSON; check one parse for real.
    let out = s.ok(&["--json", "status"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["databases"][0]["branches"].as_array().unwrap().len(), 2);
    assert!(
        v.get("segment_cache").is_none(),
        "a local store has no segment cache: {v}"
    );
}

#[test]
fn exit_codes_are_stable() {
    let s = prepared(50);
    assert_eq!(s.run(&["status"]).code, 3, "no store");
    s.ok(&["init"]);
    assert_eq!(s.run(&["init"]).code, 4);
    assert_eq!(s.run(&["create", "BAD"]).code, 8);
    assert_eq!(s.run(&["create", "x", "--from", "missing.db"]).code, 8);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    assert_eq!(s.run(&["fork", "shop", "main"]).code, 4);
    assert_eq!(s.run(&["checkout", "shop@none"]).code, 3);
    let p = s.ok(&["checkout", "shop"]);
    sqlite(std::path::Path::new(p.trim()), "DELETE FROM items");
    assert_eq!(s.ok(&["checkout", "shop"]), p, "the working copy again");
    s.ok(&["fork", "shop", "f"]);
    let f = s.ok(&["checkout", "shop@f"]);
    sqlite(std::path::Path::new(f.trim()), "DELETE FROM items");
    assert_eq!(
        s.run(&["destroy", "shop@f"]).code,
        6,
        "dirty checkout refused"
    );
    assert_eq!(s.run(&["checkout", "shop", "--force"]).code, 0);
    assert_eq!(s.run(&["nonsense"]).code, 2, "usage error");
    let unreachable = outcome(
        s.cmd(&["--store", "s3://bucket/x", "status"])
            .env("SCION_S3_ENDPOINT", "http://127.0.0.1:9")
            .env("AWS_ACCESS_KEY_ID", "x")
            .env("AWS_SECRET_ACCESS_KEY", "x")
            .env("SCION_S3_TIMEOUT", "2s"),
    );
    assert_eq!(
        unreachable.code, 9,
        "an unreachable store is a transient failure: {}",
        unreachable.stderr
    );
}

#[test]
fn help_explains_every_command_with_an_example() {
    let s = Session::new();
    for cmd in [
        "init",
        "create",
        "checkout",
        "path",
        "checkpoint",
        "fork",
        "checkpoints",
        "branches",
        "export",
    ] {
        let out = s.ok(&[cmd, "--help"]);
        assert!(
            out.contains("Example"),
            "{cmd} --help has an example:\n{out}"
        );
    }
    let top = s.ok(&["--help"]);
    for word in [
        "checkout",
        "checkpoint",
        "fork",
        "export",
        "--store",
        "--json",
    ] {
        assert!(top.contains(word), "{word} in top-level help");
    }
}

#[test]
fn sqlite3_cli_opens_a_checkout_path() {
    let s = prepared(20);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    let path = s.ok(&["checkout", "shop"]);
    let out = std::process::Command::new("sqlite3")
        .args([
            path.trim(),
            "PRAGMA journal_mode; SELECT count(*) FROM items;",
        ])
        .output()
        .expect("the sqlite3 CLI is installed by ./scripts/test");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "wal\n20\n");
}

#[test]
fn lifecycle_session() {
    let s = prepared(300);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "try", "--ttl", "2h"]);
    let path = s.ok(&["checkout", "shop@try"]);
    let path = std::path::PathBuf::from(path.trim());
    sqlite(&path, "UPDATE items SET price = 0 WHERE id <= 5");
    s.ok(&["checkpoint", "shop@try", "zeroed"]);
    sqlite(&path, "DELETE FROM items WHERE id > 100");
    let t = transcript(
        &s,
        &[
            &["diff", "shop", "shop@try"],
            &[
                "diff",
                "shop@try@fork",
                "shop@try@zeroed",
                "--table",
                "items",
            ],
            &["diff", "shop", "shop@try@zeroed", "--sql"],
            &["diff", "shop", "shop@try", "--table", "nope"],
            &["rollback", "shop@try", "--to", "zeroed"],
            &["rollback", "shop@try", "--to", "zeroed", "--force"],
            &["rollback", "shop@try", "--to", "nope"],
            &["rollback", "shop", "--to", "init", "--no-backup"],
            &["promote", "shop@try", "--onto", "main"],
            &["promote", "shop@try", "--onto", "main", "--force"],
            &["promote", "shop@try", "--onto", "nosuch"],
            &["protect", "shop@try"],
            &["destroy", "shop@try"],
            &["unprotect", "shop@try"],
            &["touch", "shop@try", "--ttl", "30m"],
            &["touch", "shop@try", "--ttl", "soon"],
            &["lease", "acquire", "shop@try"],
            &[
                "--holder", "agent-7", "lease", "acquire", "shop@try", "--ttl", "10m",
            ],
            &["--holder", "agent-8", "lease", "acquire", "shop@try"],
            &["rollback", "shop@try", "--to", "fork"],
            &["--holder", "agent-8", "lease", "release", "shop@try"],
            &["--holder", "agent-7", "lease", "release", "shop@try"],
            &["checkout", "shop@try@zeroed", "--read-only"],
            &["checkout", "shop@try@zeroed", "--read-only"],
            &["checkpoint", "delete", "shop@try", "zeroed"],
            &["checkpoint", "delete", "shop@try", "zeroed"],
            &["checkpoint", "delete", "shop@try", "fork"],
            &["destroy", "shop"],
            &["destroy", "shop@try"],
            &["destroy", "shop@try"],
            &["branches", "shop"],
            &["gc", "--grace", "0", "--force"],
            &["gc"],
        ],
    );
    insta::assert_snapshot!("lifecycle_session", t);
    let ro = s.path(".scion/checkouts-ro/shop/try@zeroed.db");
    assert!(!ro.exists(), "destroy removed the read-only checkout too");
}

/// `scion log`, `undo` and `restore`, and a destroyed branch brought back by name.
#[test]
fn history_session() {
    let s = prepared(30);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "try"]);
    let path = std::path::PathBuf::from(s.ok(&["checkout", "shop@try"]).trim());
    sqlite(&path, "UPDATE items SET price = 1");
    s.ok(&["--holder", "h", "checkpoint", "shop@try", "one"]);
    sqlite(&path, "UPDATE items SET price = 2");
    s.ok(&["--holder", "h", "checkpoint", "shop@try", "two"]);
    let h = |args: &[&'static str]| -> Vec<&'static str> {
        let mut v = vec!["--holder", "h"];
        v.extend_from_slice(args);
        v
    };
    let steps: Vec<Vec<&str>> = vec![
        h(&["rollback", "shop@try", "--to", "one"]),
        h(&["log", "shop@try"]),
        h(&["undo", "shop@try"]),
        h(&["undo", "shop@try"]),
        h(&["log", "shop@try", "--limit", "2"]),
        h(&["restore", "shop@try", "--to", "3"]),
        h(&["restore", "shop@try"]),
        h(&["restore", "shop@try", "--to", "99"]),
        h(&["restore", "shop@try", "--to", "x"]),
        h(&["undo", "shop"]),
        h(&["log", "shop"]),
        h(&["destroy", "shop@try"]),
        h(&["log", "shop@try"]),
        h(&["restore", "shop@try"]),
        h(&["log", "shop@try", "--limit", "3"]),
        h(&["restore", "shop@never"]),
        h(&["config", "--history-retention", "30d"]),
        h(&["config", "--history-retention", "soon"]),
    ];
    let steps: Vec<&[&str]> = steps.iter().map(Vec::as_slice).collect();
    let t = transcript(&s, &steps);
    insta::assert_snapshot!("history_session", t);
    let log = s.json(&["log", "shop@try"]);
    assert_eq!(log["live"], true);
    assert_eq!(log["entries"][0]["op"], "restore");
    assert_eq!(log["entries"][1]["op"], "destroy");
    assert_eq!(log["entries"][1]["new"], serde_json::Value::Null);
    assert_eq!(
        sqlite(&path_of(&s, "shop@try"), "SELECT DISTINCT price FROM items"),
        "Real(1.0)"
    );
    let status = s.json(&["status"]);
    assert_eq!(status["history_retention_secs"], 30 * 86_400);
}

fn path_of(s: &Session, target: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(s.ok(&["checkout", target]).trim())
}

#[test]
fn a_locked_from_source_exits_9_and_a_hot_journal_says_what_to_do() {
    let s = prepared(3000);
    s.ok(&["init"]);
    // Another process (this test) is in the middle of writing the source, with a cache so
    // small that changed pages already reached the file.
    let c = rusqlite::Connection::open(s.path("shop.db")).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=DELETE; PRAGMA cache_size=2; PRAGMA locking_mode=EXCLUSIVE;
         BEGIN EXCLUSIVE; UPDATE items SET name = name || 'changed';",
    )
    .unwrap();
    let r = s.run(&["create", "shop", "--from", "shop.db"]);
    assert_eq!(r.code, 9, "{}", r.stderr);
    assert!(
        r.stderr.contains("locked by another connection"),
        "{}",
        r.stderr
    );
    // A crash in the middle of that write leaves a hot journal.
    std::fs::copy(s.path("shop.db"), s.path("crashed.db")).unwrap();
    std::fs::copy(s.path("shop.db-journal"), s.path("crashed.db-journal")).unwrap();
    c.execute_batch("ROLLBACK").unwrap();
    drop(c);
    let r = s.run(&["create", "crashed", "--from", "crashed.db"]);
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert_eq!(
        r.stderr.matches("hot journal").count(),
        1,
        "said once: {}",
        r.stderr
    );
    assert!(r.stderr.contains("as `sqlite3 "), "{}", r.stderr);
    s.ok(&["create", "shop", "--from", "shop.db"]);
}

#[test]
fn export_into_the_store_is_refused() {
    let s = prepared(10);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    let manifest = s.path(".scion/scion.json");
    let before = std::fs::read(&manifest).unwrap();
    let r = s.run(&["export", "shop", ".scion/scion.json", "--force"]);
    assert_eq!(r.code, 8, "{}", r.stderr);
    assert_eq!(std::fs::read(&manifest).unwrap(), before);
    s.ok(&["status"]);
}

/// `init --page-compression none` is recorded in the manifest and shown by `status`; its
/// store keeps every page's bytes (an lz4 store of the same rows keeps far fewer), and its
/// checkouts, checkpoints, forks and exports read back exactly what was written.
#[test]
fn a_store_without_page_compression_keeps_pages_raw_and_reads_back() {
    let s = prepared(4000);
    let json = |args: &[&str]| s.json(args);
    let init = json(&["--store", "raw", "init", "--page-compression", "none"]);
    assert_eq!(init["page_compression"], "none");
    json(&["--store", "lz4", "init"]);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.path("raw/scion.json")).unwrap()).unwrap();
    assert_eq!(manifest["page_compression"], "none");

    let raw = json(&["--store", "raw", "create", "shop", "--from", "shop.db"]);
    let lz4 = json(&["--store", "lz4", "create", "shop", "--from", "shop.db"]);
    let page_bytes = raw["page_count"].as_u64().unwrap() * raw["page_size"].as_u64().unwrap();
    let (raw_bytes, lz4_bytes) = (
        raw["store_bytes"].as_u64().unwrap(),
        lz4["store_bytes"].as_u64().unwrap(),
    );
    assert!(
        raw_bytes >= page_bytes,
        "raw store {raw_bytes} B < {page_bytes} B of pages"
    );
    assert!(
        lz4_bytes * 5 < raw_bytes * 3,
        "lz4 store {lz4_bytes} B vs raw {raw_bytes} B"
    );
    let status = json(&["--store", "raw", "status"]);
    assert_eq!(status["page_compression"], "none");
    assert!(s
        .ok(&["--store", "lz4", "status"])
        .contains("pages:     compression lz4"));

    let want = sqlite(&s.path("shop.db"), "SELECT count(*), sum(price) FROM items");
    let path = s.ok(&["--store", "raw", "checkout", "shop"]);
    let path = std::path::Path::new(path.trim());
    assert_eq!(sqlite(path, "SELECT count(*), sum(price) FROM items"), want);
    sqlite(path, "UPDATE items SET price = 0 WHERE id <= 10");
    s.ok(&["--store", "raw", "checkpoint", "shop", "cheap"]);
    s.ok(&["--store", "raw", "fork", "shop", "copy"]);
    for (target, out) in [("shop@main@init", "init.db"), ("shop@copy", "copy.db")] {
        s.ok(&["--store", "raw", "export", target, out]);
    }
    assert_eq!(
        sqlite(&s.path("init.db"), "SELECT count(*), sum(price) FROM items"),
        want
    );
    assert_eq!(
        sqlite(
            &s.path("copy.db"),
            "SELECT count(*) FROM items WHERE price = 0"
        ),
        "Integer(10)"
    );
    let check = sqlite(&s.path("copy.db"), "PRAGMA integrity_check");
    assert_eq!(check, "Text(\"ok\")");
}

/// `scion config --page-compression` changes how new pages are stored: the manifest and
/// `status` say so, `compact` rewrites a head in the new way (counted in bytes), what was
/// stored before still reads back, and a name it does not know changes nothing.
#[test]
fn config_changes_how_new_pages_are_stored_and_compact_rewrites_a_head() {
    let s = prepared(4000);
    let json = |args: &[&str]| s.json(args);
    s.ok(&["init"]);
    let created = json(&["create", "shop", "--from", "shop.db"]);
    let page_bytes =
        created["page_count"].as_u64().unwrap() * created["page_size"].as_u64().unwrap();
    let shown = json(&["config"]);
    assert_eq!(shown["page_compression"], "lz4");
    assert_eq!(shown["changed"], serde_json::Value::Null);
    assert_eq!(shown["min_grace_secs"], 3600);

    // A key a newer scion wrote survives a change made by this one.
    let path = s.path(".scion/scion.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest["a_later_setting"] = serde_json::json!({"every": 5});
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let changed = json(&["config", "--page-compression", "none"]);
    assert_eq!(changed["page_compression"], "none");
    assert_eq!(changed["changed"]["page_compression"]["before"], "lz4");
    assert_eq!(changed["changed"]["page_compression"]["after"], "none");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.path(".scion/scion.json")).unwrap()).unwrap();
    assert_eq!(manifest["page_compression"], "none");
    assert_eq!(manifest["store_id"], shown["store_id"]);
    assert_eq!(manifest["a_later_setting"], serde_json::json!({"every": 5}));
    assert_eq!(json(&["status"])["page_compression"], "none");
    assert!(s
        .ok(&["config", "--page-compression", "none"])
        .contains("page compression is already none"));
    let again = json(&["config", "--page-compression", "none"]);
    assert_eq!(again["changed"], serde_json::Value::Null);

    let raw = json(&["compact", "shop"]);
    let raw_bytes = raw["store_bytes_written"].as_u64().unwrap();
    assert!(
        raw_bytes >= page_bytes,
        "compact after `config --page-compression none` wrote {raw_bytes} B < {page_bytes} B of pages"
    );
    let want = sqlite(&s.path("shop.db"), "SELECT count(*), sum(price) FROM items");
    s.ok(&["export", "shop@main@init", "before.db"]);
    s.ok(&["export", "shop", "after.db"]);
    for out in ["before.db", "after.db"] {
        let got = sqlite(&s.path(out), "SELECT count(*), sum(price) FROM items");
        assert_eq!(got, want, "{out}");
        let check = sqlite(&s.path(out), "PRAGMA integrity_check");
        assert_eq!(check, "Text(\"ok\")", "{out}");
    }

    json(&["config", "--page-compression", "lz4"]);
    let lz4_bytes = json(&["compact", "shop"])["store_bytes_written"]
        .as_u64()
        .unwrap();
    assert!(
        lz4_bytes * 5 < raw_bytes * 3,
        "compact back under lz4 wrote {lz4_bytes} B against {raw_bytes} B raw"
    );

    let before = std::fs::read(s.path(".scion/scion.json")).unwrap();
    let r = s.run(&["config", "--page-compression", "zstd"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("[possible values: lz4, none]"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read(s.path(".scion/scion.json")).unwrap(), before);
}

/// On a store shared by a fleet, `status` says who holds what, by host: live leases (a
/// `scion serve` session's named by its id) and writable checkouts, timed by the store's
/// clock.
#[test]
fn status_names_the_hosts_holding_leases_and_checkouts() {
    let s = Session::new();
    seed(&s.path("shop.db"), 10);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "a"]);
    s.ok(&["fork", "shop", "b"]);
    let vm1 = "vm-1:0a1b2c3d:4026531836/42";
    let vm2_session = "vm-2:9f8e7d6c:4026531836/7#s-abc";
    s.ok(&[
        "--holder", vm1, "lease", "acquire", "shop@a", "--ttl", "60s",
    ]);
    s.ok(&[
        "--holder",
        vm2_session,
        "lease",
        "acquire",
        "shop@b",
        "--ttl",
        "60s",
    ]);
    s.ok(&[
        "--holder",
        "agent",
        "lease",
        "acquire",
        "shop@main",
        "--ttl",
        "60s",
    ]);
    s.ok(&["--holder", "agent", "lease", "release", "shop@main"]);
    let path = s.ok(&["checkout", "shop@a"]);
    let status = s.json(&["status"]);
    let hosts = status["hosts"].as_array().unwrap();
    let host = |name: &str| hosts.iter().find(|h| h["host"] == name).cloned();
    let vm1 = host("vm-1").expect("vm-1 holds a lease");
    assert_eq!(vm1["leases"][0]["branch"], "shop@a");
    assert!(vm1["leases"][0].get("session").is_none(), "{vm1}");
    let left = vm1["leases"][0]["expires_in_secs"].as_u64().unwrap();
    assert!((1..=60).contains(&left), "{vm1}");
    let vm2 = host("vm-2").expect("vm-2 holds a session's lease");
    assert_eq!(vm2["leases"][0]["branch"], "shop@b");
    assert_eq!(vm2["leases"][0]["session"], "s-abc");
    assert!(
        host("agent").is_none(),
        "a released lease is held by no one: {hosts:?}"
    );
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let local = host(here.trim()).expect("this host holds a checkout");
    assert_eq!(local["checkouts"][0]["branch"], "shop@a");
    assert_eq!(local["checkouts"][0]["path"], path.trim());
    assert_eq!(hosts.len(), 3, "{hosts:?}");
    let text = s.ok(&["status"]);
    assert!(text.contains("held by host (store clock)"), "{text}");
    assert!(
        text.contains("    lease of shop@b by session s-abc of `scion serve`, "),
        "{text}"
    );
    assert!(
        text.contains(&format!("    checkout of shop@a at {}", path.trim())),
        "{text}"
    );
}
