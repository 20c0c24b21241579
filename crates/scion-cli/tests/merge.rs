//! `scion merge` as users run it: two agents' forks merged into main, a conflict settled by
//! a resolutions file, the report in JSON, the documented exit codes, and the result
//! checked by the real `sqlite3` CLI.

mod common;

use common::*;

fn sqlite3(path: &std::path::Path, sql: &str) -> String {
    let out = std::process::Command::new("sqlite3")
        .arg(path)
        .arg(sql)
        .output()
        .expect("the sqlite3 CLI runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(s: &Session, args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let r = s.run(&all);
    let v = serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {} {}", r.stdout, r.stderr));
    (r.code, v)
}

#[test]
fn two_agents_forks_merge_into_main_with_a_conflict_resolved_by_file() {
    let s = Session::new();
    sqlite3(
        &s.path("shop.db"),
        "PRAGMA foreign_keys=ON;
         CREATE TABLE cat(id INTEGER PRIMARY KEY, name TEXT);
         CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price INT, cat INT REFERENCES cat(id));
         INSERT INTO cat VALUES (1,'office'),(2,'misc');
         INSERT INTO items VALUES (1,'pen',3,1),(2,'ink',5,1),(3,'pad',2,2);",
    );
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "agent-1"]);
    s.ok(&["fork", "shop", "agent-2"]);
    s.ok(&[
        "sql",
        "shop@agent-1",
        "UPDATE items SET price = 4 WHERE id = 1; INSERT INTO items VALUES (4,'clip',1,2)",
    ]);
    s.ok(&[
        "sql",
        "shop@agent-2",
        "UPDATE items SET price = 6 WHERE id = 1; UPDATE items SET name = 'notepad' WHERE id = 3",
    ]);

    // main is protected: merging into it needs --force, like every move of it.
    let r = s.run(&["merge", "shop@agent-1", "--into", "main"]);
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert!(r.stderr.contains("protected"), "{}", r.stderr);

    let (code, first) = json(&s, &["merge", "shop@agent-1", "--into", "main", "--force"]);
    assert_eq!(code, 0);
    assert_eq!(first["outcome"], "fast_forward");
    // A fast-forward still says what it brought.
    assert_eq!(first["tables"][0]["table"], "items", "{first}");
    assert_eq!(first["tables"][0]["theirs_inserted"], 1, "{first}");
    assert_eq!(first["tables"][0]["theirs_updated"], 1, "{first}");
    assert_eq!(first["tables"][0]["theirs_deleted"], 0, "{first}");

    // The second agent conflicts on one cell: the dry run and the real run report it
    // alike, exit 11, and publish nothing.
    let version = |s: &Session| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(&s.ok(&["--json", "log", "shop", "--limit", "1"]))
            .unwrap()
    };
    let before = version(&s);
    let (code, dry) = json(
        &s,
        &[
            "merge",
            "shop@agent-2",
            "--into",
            "main",
            "--dry-run",
            "--force",
        ],
    );
    assert_eq!(code, 11);
    let (code, real) = json(&s, &["merge", "shop@agent-2", "--into", "main", "--force"]);
    assert_eq!(code, 11);
    assert_eq!(dry["conflicts"], real["conflicts"]);
    assert_eq!(dry["tables"], real["tables"]);
    assert_eq!(real["outcome"], "conflicts");
    // The base is named as people know it: main's version before the fast-forward,
    // where agent-2 was forked.
    let how = real["base"]["how"].as_str().unwrap_or_default();
    assert!(
        how.starts_with("shop@main v1: the newest version both come from"),
        "{real}"
    );
    assert_eq!(real["conflicts"][0]["id"], "items:1:price");
    assert_eq!(real["conflicts"][0]["columns"][0]["base"], 3);
    assert_eq!(real["conflicts"][0]["columns"][0]["ours"], 4);
    assert_eq!(real["conflicts"][0]["columns"][0]["theirs"], 6);
    assert_eq!(version(&s), before, "nothing published");

    std::fs::write(s.path("fixes.json"), r#"{"items:1:price": 5}"#).unwrap();
    let (code, done) = json(
        &s,
        &[
            "merge",
            "shop@agent-2",
            "--into",
            "main",
            "--resolve",
            "fixes.json",
            "--force",
        ],
    );
    assert_eq!(code, 0, "{done}");
    assert_eq!(done["outcome"], "merged");
    assert_eq!(done["conflicts"][0]["resolution"], "value");

    s.ok(&["export", "shop", "merged.db"]);
    let merged = s.path("merged.db");
    assert_eq!(
        sqlite3(
            &merged,
            "SELECT id, name, price, cat FROM items ORDER BY id"
        ),
        "1|pen|5|1\n2|ink|5|1\n3|notepad|2|2\n4|clip|1|2\n"
    );
    assert_eq!(sqlite3(&merged, "PRAGMA integrity_check"), "ok\n");
    assert_eq!(sqlite3(&merged, "PRAGMA foreign_key_check"), "");

    // Again: nothing left to merge. And the merge is one entry of main's history.
    let (code, again) = json(&s, &["merge", "shop@agent-2", "--into", "main", "--force"]);
    assert_eq!((code, again["outcome"].as_str()), (0, Some("up_to_date")));
    let log = s.ok(&["log", "shop", "--limit", "1"]);
    assert!(
        log.contains("merge") && log.contains("shop@agent-2"),
        "{log}"
    );
    s.ok(&["undo", "shop", "--force"]);
    assert_eq!(
        s.ok(&["sql", "shop", "SELECT price FROM items WHERE id = 1"]),
        "4\n"
    );
}

#[test]
fn merge_refuses_bad_input_with_the_documented_codes() {
    let s = Session::new();
    sqlite3(&s.path("a.db"), "CREATE TABLE t(x)");
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "a.db"]);
    s.ok(&["create", "other", "--from", "a.db"]);
    s.ok(&["fork", "shop", "f"]);
    let failed = |args: &[&str], exit: i32, code: &str| {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let r = s.run(&all);
        assert_eq!(r.code, exit, "{args:?}: {}", r.stderr);
        let v: serde_json::Value = serde_json::from_str(r.stderr.trim()).unwrap();
        assert_eq!(v["error"]["code"], code, "{}", r.stderr);
        assert!(
            v["error"]["hint"].is_string() || code == "invalid_input",
            "{v}"
        );
    };
    failed(
        &["merge", "shop@nope", "--into", "main"],
        3,
        "branch_not_found",
    );
    failed(
        &[
            "merge",
            "shop@f",
            "--into",
            "main",
            "--resolve",
            "missing.json",
        ],
        8,
        "invalid_input",
    );
    std::fs::write(s.path("bad.json"), "[1]").unwrap();
    failed(
        &["merge", "shop@f", "--into", "main", "--resolve", "bad.json"],
        8,
        "invalid_input",
    );
    failed(
        &["merge", "shop@main", "--into", "main"],
        8,
        "invalid_input",
    );
    failed(
        &["merge", "other@main", "--into", "f"],
        3,
        "branch_not_found",
    );
    // A base of another database.
    failed(
        &["merge", "shop@f", "--into", "main", "--base", "other@main"],
        8,
        "invalid_input",
    );
    // Each side merged the other as it was: two best common versions, named, and the
    // merge runs once --base picks one.
    s.ok(&["fork", "shop", "g"]);
    s.ok(&["fork", "shop", "h"]);
    s.ok(&["sql", "shop@g", "INSERT INTO t VALUES (1)"]);
    s.ok(&["sql", "shop@h", "INSERT INTO t VALUES (2)"]);
    s.ok(&["checkpoint", "shop@g", "g1"]);
    s.ok(&["checkpoint", "shop@h", "h1"]);
    s.ok(&["merge", "shop@h@h1", "--into", "g"]);
    s.ok(&["merge", "shop@g@g1", "--into", "h"]);
    s.ok(&["sql", "shop@g", "INSERT INTO t VALUES (3)"]);
    failed(&["merge", "shop@g", "--into", "h"], 8, "no_merge_base");
    s.ok(&["merge", "shop@g", "--into", "h", "--base", "shop@g@g1"]);
}

/// `--into` and `--onto` take the branch as `main` or as `shop@main`; another database's
/// branch is refused (exit 8) before anything is read: for a merge, as two branches of
/// different databases, neither name blamed alone.
#[test]
fn into_and_onto_take_a_branch_or_a_ref_of_the_same_database() {
    let s = Session::new();
    sqlite3(
        &s.path("shop.db"),
        "CREATE TABLE items(id INTEGER PRIMARY KEY, price INT); INSERT INTO items VALUES (1, 3);",
    );
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["create", "other", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "a"]);
    s.ok(&["fork", "shop", "b"]);
    s.ok(&["sql", "shop@a", "UPDATE items SET price = 4"]);
    let (code, report) = json(&s, &["merge", "shop@a", "--into", "shop@main", "--force"]);
    assert_eq!(
        (code, report["outcome"].as_str()),
        (0, Some("fast_forward"))
    );
    let r = s.run(&["merge", "shop@a", "--into", "other@main", "--force"]);
    assert_eq!(r.code, 8, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("shop@a and other@main are branches of different databases"),
        "{}",
        r.stderr
    );
    s.ok(&["promote", "shop@b", "--onto", "shop@main", "--force"]);
    let r = s.run(&["promote", "shop@b", "--onto", "other@main", "--force"]);
    assert_eq!(r.code, 8, "{}", r.stderr);
}

/// Two agents that each append orders (AUTOINCREMENT) and their lines: the second merge
/// conflicts on the shared ids, says `--renumber` keeps both, and with it the agent's rows
/// come after main's, their lines following, as the real `sqlite3` reads the export.
#[test]
fn rows_both_agents_appended_merge_with_renumber() {
    let s = Session::new();
    sqlite3(
        &s.path("shop.db"),
        "CREATE TABLE orders(id INTEGER PRIMARY KEY AUTOINCREMENT, who TEXT);
         CREATE TABLE lines(id INTEGER PRIMARY KEY, order_id INT REFERENCES orders(id), item TEXT);
         INSERT INTO orders(who) VALUES ('ann');
         INSERT INTO lines(order_id, item) VALUES (1, 'pen');",
    );
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "agent-1"]);
    s.ok(&["fork", "shop", "agent-2"]);
    for (agent, who) in [("shop@agent-1", "bob"), ("shop@agent-2", "cat")] {
        s.ok(&[
            "sql",
            agent,
            &format!(
                "INSERT INTO orders(who) VALUES ('{who}');
                 INSERT INTO lines(order_id, item) VALUES (last_insert_rowid(), '{who}''s cup')"
            ),
        ]);
    }
    s.ok(&["merge", "shop@agent-1", "--into", "main", "--force"]);
    let r = s.run(&["merge", "shop@agent-2", "--into", "main", "--force"]);
    assert_eq!(r.code, 11, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("conflict orders:2 (insert/insert"),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains("--renumber"), "{}", r.stderr);

    let out = s.ok(&[
        "merge",
        "shop@agent-2",
        "--into",
        "main",
        "--force",
        "--renumber",
    ]);
    assert!(
        out.contains("renumbered 1 row of orders the source inserted: 2 → 3"),
        "{out}"
    );
    assert!(
        out.contains("followed: lines.order_id in 1 row now names the new ids of orders"),
        "{out}"
    );
    // A copy of the agent's branch that changes its order before it is brought up to date
    // is refused: the change would land on main's order 2.
    s.ok(&["fork", "shop@agent-2", "agent-2b"]);
    s.ok(&[
        "sql",
        "shop@agent-2b",
        "UPDATE orders SET who = 'cat!' WHERE who = 'cat'",
    ]);
    let refused = s.run(&[
        "--json",
        "merge",
        "shop@agent-2b",
        "--into",
        "main",
        "--force",
    ]);
    assert_eq!(refused.code, 6, "{}", refused.stderr);
    let err: serde_json::Value = serde_json::from_str(refused.stderr.trim()).unwrap();
    assert_eq!(err["error"]["code"], "renumbered_source", "{err}");
    assert!(
        err["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("scion merge shop@main --into shop@agent-2b")),
        "{err}"
    );
    // The agent's branch still has its own ids; brought up to date, it has main's.
    assert!(
        out.contains("`scion merge shop@main --into shop@agent-2`, a fast-forward"),
        "{out}"
    );
    let (code, up) = json(&s, &["merge", "shop@main", "--into", "shop@agent-2"]);
    assert_eq!(
        (code, up["outcome"].as_str()),
        (0, Some("fast_forward")),
        "{up}"
    );
    s.ok(&["export", "shop", "merged.db"]);
    let merged = s.path("merged.db");
    assert_eq!(
        sqlite3(
            &merged,
            "SELECT o.id, o.who, l.id, l.item FROM orders o JOIN lines l ON l.order_id = o.id ORDER BY o.id"
        ),
        "1|ann|1|pen\n2|bob|2|bob's cup\n3|cat|3|cat's cup\n"
    );
    assert_eq!(sqlite3(&merged, "PRAGMA foreign_key_check"), "");
    assert_eq!(sqlite3(&merged, "PRAGMA integrity_check"), "ok\n");
}
