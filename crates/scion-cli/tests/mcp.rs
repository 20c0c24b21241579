//! `scion mcp` driven by a real MCP client (rmcp's) over stdio: tools listed, each called,
//! and the safety refusals (force, the branch cap, read-only mode, TTLs, unknown arguments).

mod mcp_client;
mod served;

use mcp_client::{call, connect, ok, refused, tool_names};
use rmcp::model::CallToolRequestParams;
use serde_json::{json, Value};
use served::Served;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_answers_a_real_mcp_client_and_unsafe_calls_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::prepare(dir.path(), 50);
    let c = connect(&s, &["--daemon", "never", "--max-branches", "3"]).await;
    assert_eq!(
        tool_names(&c).await,
        [
            "scion_checkout",
            "scion_checkpoint",
            "scion_destroy",
            "scion_diff",
            "scion_fork",
            "scion_list",
            "scion_log",
            "scion_merge",
            "scion_promote",
            "scion_query",
            "scion_restore",
            "scion_rollback",
            "scion_session_close",
            "scion_session_open",
            "scion_session_status",
            "scion_touch",
            "scion_undo"
        ]
    );
    // A fork gets the default TTL; a longer one is capped; "none" is refused.
    let f = call(
        &c,
        "scion_fork",
        json!({"database": "shop", "new_branch": "try-1"}),
    )
    .await;
    assert_eq!(ok(&f)["ttl"], "86400s");
    let f = call(
        &c,
        "scion_fork",
        json!({"database": "shop", "new_branch": "try-2", "ttl": "30d"}),
    )
    .await;
    assert_eq!(ok(&f)["ttl"], "604800s");
    assert_eq!(
        refused(
            &call(
                &c,
                "scion_fork",
                json!({"database": "shop", "new_branch": "x", "ttl": "none"})
            )
            .await
        ),
        "ttl_required"
    );
    let listed = call(&c, "scion_list", json!({})).await;
    let branches = ok(&listed)["databases"][0]["branches"]
        .as_array()
        .unwrap()
        .clone();
    let try1 = branches.iter().find(|b| b["branch"] == "try-1").unwrap();
    assert_eq!(try1["ttl_secs"], 86400);
    // Work on the fork, checkpoint, query both versions side by side, diff.
    let co = call(
        &c,
        "scion_checkout",
        json!({"database": "shop", "branch": "try-1"}),
    )
    .await;
    let path = ok(&co)["path"].as_str().unwrap().to_string();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("DELETE FROM items WHERE id <= 5", [])
        .unwrap();
    // Work in progress: seen with `working`, before any checkpoint.
    let wip = call(
        &c,
        "scion_diff",
        json!({"database": "shop", "left": "main", "right": "try-1", "working": true}),
    )
    .await;
    assert_eq!(ok(&wip)["tables"][0]["removed"], 5);
    assert_eq!(ok(&wip)["working_files"], json!(["shop@try-1"]));
    let cp = call(
        &c,
        "scion_checkpoint",
        json!({"database": "shop", "branch": "try-1", "name": "trimmed"}),
    )
    .await;
    assert_eq!(ok(&cp)["version"], 2);
    let q = call(&c, "scion_query", json!({"database": "shop", "sql": "SELECT count(*) FROM items", "targets": ["main", "try-1@trimmed"]})).await;
    let results = ok(&q)["results"].as_array().unwrap().clone();
    assert_eq!(
        (
            results[0]["rows"][0][0].clone(),
            results[1]["rows"][0][0].clone()
        ),
        (json!(50), json!(45))
    );
    let w = call(
        &c,
        "scion_query",
        json!({"database": "shop", "sql": "DELETE FROM items", "targets": ["main"]}),
    )
    .await;
    // A write is a refusal of the tool, saying which tool writes.
    assert_eq!(refused(&w), "read_only_tool");
    let hint = w.structured_content.as_ref().unwrap()["hint"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(hint.contains("scion_checkout"), "{hint}");
    // Versions compared in one statement: the branch beside its parent and a checkpoint.
    let cmp = call(&c, "scion_query", json!({"database": "shop",
        "sql": "SELECT (SELECT count(*) FROM base.items) - (SELECT count(*) FROM items), (SELECT count(*) FROM kept.items)",
        "targets": ["try-1"], "attach": {"base": "main", "kept": "try-1@trimmed"}})).await;
    assert_eq!(ok(&cmp)["results"][0]["rows"][0], json!([5, 45]));
    let bad = call(
        &c,
        "scion_query",
        json!({"database": "shop", "sql": "SELECT 1",
        "targets": ["main"], "attach": {"main": "try-1"}}),
    )
    .await;
    assert_eq!(refused(&bad), "invalid_input");
    let sneaky = call(
        &c,
        "scion_query",
        json!({"database": "shop", "sql": "DELETE FROM base.items",
        "targets": ["try-1"], "attach": {"base": "main"}}),
    )
    .await;
    assert_eq!(refused(&sneaky), "read_only_tool");
    let capped = call(&c, "scion_query", json!({"database": "shop", "sql": "SELECT * FROM items", "targets": ["main"], "max_rows": 3})).await;
    assert_eq!(ok(&capped)["results"][0]["truncated"], true);
    let d = call(
        &c,
        "scion_diff",
        json!({"database": "shop", "left": "main", "right": "try-1", "rows": true}),
    )
    .await;
    assert_eq!(ok(&d)["tables"][0]["removed"], 5);
    let t = call(
        &c,
        "scion_touch",
        json!({"database": "shop", "branch": "try-1", "ttl": "2h"}),
    )
    .await;
    assert_eq!(ok(&t)["ttl_secs"], 7200);
    let rb = call(
        &c,
        "scion_rollback",
        json!({"database": "shop", "branch": "try-1", "to": "fork"}),
    )
    .await;
    assert_eq!(ok(&rb)["to"], "fork");
    let backup = ok(&rb)["backup"].as_str().unwrap_or_default().to_string();
    assert!(backup.contains("try-1-pre-rollback-v"), "{rb:?}");
    // A merge is a dry run unless asked otherwise: the report, nothing published.
    let m = call(
        &c,
        "scion_merge",
        json!({"database": "shop", "source": "try-1@trimmed"}),
    )
    .await;
    assert_eq!(ok(&m)["dry_run"], true, "{m:?}");
    assert_eq!(ok(&m)["outcome"], "fast_forward");
    assert_eq!(ok(&m)["published"], Value::Null);
    let real = json!({"database": "shop", "source": "try-1@trimmed", "dry_run": false});
    assert_eq!(
        refused(&call(&c, "scion_merge", real.clone()).await),
        "not_owner"
    );
    let mut forced = real;
    forced["force"] = json!(true);
    assert_eq!(
        refused(&call(&c, "scion_merge", forced).await),
        "force_not_allowed"
    );
    // Force is refused; main is not this agent's to change.
    assert_eq!(
        refused(
            &call(
                &c,
                "scion_promote",
                json!({"database": "shop", "source": "try-1", "force": true})
            )
            .await
        ),
        "force_not_allowed"
    );
    assert_eq!(
        refused(
            &call(
                &c,
                "scion_promote",
                json!({"database": "shop", "source": "try-1"})
            )
            .await
        ),
        "not_owner"
    );
    assert_eq!(
        refused(
            &call(
                &c,
                "scion_destroy",
                json!({"database": "shop", "branch": "main", "force": true})
            )
            .await
        ),
        "force_not_allowed"
    );
    // A misspelt argument is a structured refusal that names the valid fields.
    let bad = call(
        &c,
        "scion_destroy",
        json!({"database": "shop", "branch": "try-2", "forse": true}),
    )
    .await;
    assert_eq!(refused(&bad), "invalid_arguments");
    let body = bad.structured_content.as_ref().unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("forse"),
        "{body}"
    );
    assert_eq!(
        body["hint"],
        "scion_destroy takes branch, database, force (required: database, branch)"
    );
    let gone = call(
        &c,
        "scion_destroy",
        json!({"database": "shop", "branch": "try-2"}),
    )
    .await;
    assert_eq!(ok(&gone)["destroyed"], true);
    // Sessions (in this process: no daemon runs), and the branch cap (3: two forks and
    // this session's fork were made, one destroyed does not give its place back).
    let so = call(
        &c,
        "scion_session_open",
        json!({"database": "shop", "branch": "s1", "fork_from": "main"}),
    )
    .await;
    let sid = ok(&so)["session_id"].as_str().unwrap().to_string();
    let spath = ok(&so)["path"].as_str().unwrap().to_string();
    // Every tool answers a branch the same way, and takes what any tool answered.
    assert_eq!(ok(&so)["branch"], "s1");
    assert_eq!(ok(&so)["ref"], "shop@s1");
    let d = call(
        &c,
        "scion_diff",
        json!({"database": "shop", "left": "main", "right": ok(&so)["ref"].clone()}),
    )
    .await;
    ok(&d);
    rusqlite::Connection::open(&spath)
        .unwrap()
        .execute("INSERT INTO items(name, qty) VALUES ('agent', 1)", [])
        .unwrap();
    let st = call(&c, "scion_session_status", json!({})).await;
    assert_eq!(ok(&st)["sessions"][0]["id"], sid.as_str());
    let cp = call(
        &c,
        "scion_checkpoint",
        json!({"database": "shop", "branch": "s1", "name": "live", "meta": {"by": "agent"}}),
    )
    .await;
    assert_eq!(ok(&cp)["live"], true);
    assert_eq!(
        refused(
            &call(
                &c,
                "scion_session_close",
                json!({"session_id": sid, "flush": false})
            )
            .await
        ),
        "discard_not_allowed"
    );
    let sc = call(&c, "scion_session_close", json!({"session_id": sid})).await;
    assert_eq!(ok(&sc)["closed"], true);
    let listed = call(&c, "scion_list", json!({"database": "shop"})).await;
    let s1 = ok(&listed)["databases"][0]["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["branch"] == "s1")
        .cloned()
        .unwrap();
    assert_eq!(s1["checkpoints_list"][0]["name"], "live");
    assert_eq!(
        refused(
            &call(
                &c,
                "scion_fork",
                json!({"database": "shop", "new_branch": "fourth"})
            )
            .await
        ),
        "limit_exceeded"
    );
    c.cancel().await.unwrap();
}

/// The attack a careless agent can make with the server's defaults: roll a protected `main`
/// back, then destroy the only branch that named its old head. The rollback is refused (main
/// is not the agent's); granted main and force it goes through, the destroy of the safety
/// fork too (with force), and main's work is still there: the head history names it, `gc`
/// keeps it, and `undo` brings it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rollback_then_destroy_attack_on_a_protected_main_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::prepare(dir.path(), 20);
    let main_path = s.scion(&["checkout", "shop"]).trim().to_string();
    rusqlite::Connection::open(&main_path)
        .unwrap()
        .execute("INSERT INTO items(name, qty) VALUES ('main-work', 42)", [])
        .unwrap();
    s.scion(&["checkpoint", "shop", "work"]);
    let main_work = |s: &Served| {
        s.scion(&[
            "sql",
            "shop",
            "SELECT count(*) FROM items WHERE name = 'main-work'",
        ])
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
    };
    assert_eq!(main_work(&s), "1");
    let c = connect(&s, &["--daemon", "never"]).await;
    let rollback = json!({"database": "shop", "branch": "main", "to": "init"});
    assert_eq!(
        refused(&call(&c, "scion_rollback", rollback.clone()).await),
        "not_owner"
    );
    let mut forced = rollback.clone();
    forced["force"] = json!(true);
    assert_eq!(
        refused(&call(&c, "scion_rollback", forced.clone()).await),
        "force_not_allowed"
    );
    assert_eq!(
        refused(
            &call(
                &c,
                "scion_undo",
                json!({"database": "shop", "branch": "main"})
            )
            .await
        ),
        "not_owner"
    );
    assert_eq!(main_work(&s), "1", "main is untouched");
    c.cancel().await.unwrap();
    // A server granted the database and force lets the agent go through with it: main is
    // still protected, so the rollback needs force, and so does destroying a safety fork.
    let c = connect(
        &s,
        &["--daemon", "never", "--allow-force", "--write", "shop"],
    )
    .await;
    assert_eq!(
        refused(&call(&c, "scion_rollback", rollback.clone()).await),
        "protected"
    );
    let rb = call(&c, "scion_rollback", forced).await;
    let backup = ok(&rb)["backup"].as_str().unwrap().to_string();
    let backup_branch = backup.split_once('@').unwrap().1.to_string();
    let unforced = json!({"database": "shop", "branch": backup_branch});
    assert_eq!(
        refused(&call(&c, "scion_destroy", unforced).await),
        "safety_fork"
    );
    let gone = call(
        &c,
        "scion_destroy",
        json!({"database": "shop", "branch": backup_branch, "force": true}),
    )
    .await;
    assert_eq!(ok(&gone)["destroyed"], true);
    let log = call(&c, "scion_log", json!({"database": "shop"})).await;
    let newest = &ok(&log)["entries"][0];
    assert_eq!(newest["op"], "rollback");
    assert_eq!(newest["detail"], "shop@main@init");
    c.cancel().await.unwrap();
    assert_eq!(main_work(&s), "0", "main was rolled back");
    // gc with no grace keeps what the history names; undo brings main's work back.
    s.scion(&["gc", "--grace", "0", "--force"]);
    s.scion(&["gc", "--grace", "0", "--force"]);
    s.scion(&["undo", "shop", "--force"]);
    assert_eq!(main_work(&s), "1", "main's work survived the attack");
    s.scion(&["verify"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mode_offers_only_the_reading_tools() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::prepare(dir.path(), 5);
    let c = connect(&s, &["--read-only", "--daemon", "never"]).await;
    assert_eq!(
        tool_names(&c).await,
        [
            "scion_checkout",
            "scion_diff",
            "scion_list",
            "scion_log",
            "scion_query",
            "scion_session_status"
        ]
    );
    let co = call(&c, "scion_checkout", json!({"database": "shop"})).await;
    assert_eq!(ok(&co)["read_only"], true);
    let fork = c
        .call_tool(
            CallToolRequestParams::new("scion_fork").with_arguments(
                json!({"database": "shop", "new_branch": "x"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await;
    assert!(
        fork.is_err() || fork.as_ref().unwrap().is_error == Some(true),
        "{fork:?}"
    );
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_daemon_running_sessions_live_in_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Served::prepare(dir.path(), 5);
    tokio::task::block_in_place(|| s.start(&[]));
    let c = connect(&s, &["--daemon", "require"]).await;
    let so = call(
        &c,
        "scion_session_open",
        json!({"database": "shop", "branch": "agent-1", "fork_from": {"branch": "main"}}),
    )
    .await;
    let sid = ok(&so)["session_id"].as_str().unwrap().to_string();
    // The daemon holds it: the HTTP API lists the session opened through MCP.
    let listed = tokio::task::block_in_place(|| s.get("/v1/sessions"));
    assert_eq!(listed["sessions"][0]["id"], sid.as_str());
    // The fork is recorded as the agent's, in the ref the daemon wrote.
    let fork = tokio::task::block_in_place(|| s.get("/v1/branches/shop@agent-1"));
    assert_eq!(fork["owner"], "agent");
    let sc = call(
        &c,
        "scion_session_close",
        json!({"session_id": sid, "checkpoint": "done"}),
    )
    .await;
    assert_eq!(ok(&sc)["checkpoint"], "done");
    c.cancel().await.unwrap();
    let none = tempfile::tempdir().unwrap();
    let lone = Served::prepare(none.path(), 1);
    let out = lone.cmd(&["mcp", "--daemon", "require"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("scion serve"));
}

/// Two forks of an agent each append a row under the next id: merged as they are they
/// conflict on it; with `renumber` the source's row takes the id after the target's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_forks_that_both_appended_merge_with_renumber() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::prepare(dir.path(), 5);
    let c = connect(&s, &["--daemon", "never"]).await;
    for (branch, name) in [("left", "from-left"), ("right", "from-right")] {
        let f = call(
            &c,
            "scion_fork",
            json!({"database": "shop", "new_branch": branch}),
        )
        .await;
        ok(&f);
        let co = call(
            &c,
            "scion_checkout",
            json!({"database": "shop", "branch": branch}),
        )
        .await;
        let path = ok(&co)["path"].as_str().unwrap().to_string();
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute("INSERT INTO items(name, qty) VALUES (?1, 1)", [name])
            .unwrap();
        let cp = call(
            &c,
            "scion_checkpoint",
            json!({"database": "shop", "branch": branch, "name": "appended"}),
        )
        .await;
        ok(&cp);
    }
    let merge = |renumber: bool| json!({"database": "shop", "source": "right", "target": "left", "dry_run": false, "renumber": renumber});
    let clash = call(&c, "scion_merge", merge(false)).await;
    let report = clash.structured_content.clone().unwrap_or_default();
    assert_eq!(report["outcome"], "conflicts", "{clash:?}");
    assert_eq!(report["conflicts"][0]["kind"], "insert/insert", "{clash:?}");
    assert!(
        report["hint"]
            .as_str()
            .is_some_and(|h| h.contains("renumber: true")),
        "{clash:?}"
    );
    let done = call(&c, "scion_merge", merge(true)).await;
    assert_eq!(ok(&done)["outcome"], "merged", "{done:?}");
    assert_eq!(
        ok(&done)["renumbered"],
        json!([{"table": "items", "column": "id", "from": 6, "to": 7}])
    );
    let q = call(
        &c,
        "scion_query",
        json!({"database": "shop", "sql": "SELECT id, name FROM items WHERE id > 5 ORDER BY id", "targets": ["left"]}),
    )
    .await;
    assert_eq!(
        ok(&q)["results"][0]["rows"],
        json!([[6, "from-left"], [7, "from-right"]])
    );
    c.cancel().await.unwrap();
}
