//! Agents get exactly the access they are given. A real `scion mcp` with its defaults,
//! driven by a real MCP client: every change to a branch the agent did not fork is refused
//! with the rule and the grant that lifts it, and leaves every branch's rows as they were
//! (checked with `scion sql`); the same calls go through on the agent's own forks, and
//! everywhere once granted. Run with `--nocapture` for the table of calls and answers.

mod mcp_client;
mod served;

use mcp_client::{call, connect, ok, refused, Client};
use rmcp::model::CallToolResult;
use serde_json::{json, Value};
use served::Served;

/// What every branch of `shop` holds: `(branch, rows, sum of qty)`, read with `scion sql`.
fn state(s: &Served) -> Vec<(String, String)> {
    let listed: Value = serde_json::from_str(&s.scion(&["branches", "shop", "--json"])).unwrap();
    let mut out = Vec::new();
    for b in listed["branches"].as_array().unwrap() {
        let name = b["branch"].as_str().unwrap().to_string();
        let rows = s.scion(&[
            "sql",
            &format!("shop@{name}"),
            "SELECT count(*) || '/' || total(qty) FROM items",
        ]);
        let ttl = b["ttl_secs"].to_string();
        out.push((
            name,
            format!("{} ttl={ttl}", rows.lines().last().unwrap_or_default()),
        ));
    }
    out.sort();
    out
}

/// One attack: the call, refused with `code`, and nothing changed.
struct Table(Vec<String>);

impl Table {
    fn row(&mut self, call: &str, answer: &str, intact: bool) {
        self.0.push(format!(
            "| {call} | {answer} | {} |",
            if intact { "yes" } else { "NO" }
        ));
    }
}

fn answer_of(r: &CallToolResult) -> String {
    let v = r.structured_content.clone().unwrap_or_default();
    if r.is_error == Some(true) {
        format!(
            "refused `{}` (rule {}, grant `{}`)",
            v["code"].as_str().unwrap_or_default(),
            v["rule"].as_str().unwrap_or("-"),
            v["grant"].as_str().unwrap_or("-")
        )
    } else {
        "done".to_string()
    }
}

async fn attack(
    s: &Served,
    c: &Client,
    table: &mut Table,
    tool: &'static str,
    args: Value,
    code: &str,
) {
    let before = tokio::task::block_in_place(|| state(s));
    let r = call(c, tool, args.clone()).await;
    let after = tokio::task::block_in_place(|| state(s));
    table.row(&format!("{tool} {args}"), &answer_of(&r), before == after);
    assert_eq!(refused(&r), code, "{tool} {args}: {r:?}");
    assert_eq!(before, after, "{tool} {args} changed data");
    let body = r.structured_content.as_ref().unwrap();
    if code != "read_only_tool" {
        assert!(body["rule"].is_string(), "{body}");
        assert!(body["grant"].is_string(), "{body}");
    }
}

/// A store with a protected `main` of 20 rows, a person's branch `alice` (made at the
/// CLI, 7-day TTL) and a safety fork of main (`main-pre-promote-v…`) from a person's
/// promote.
fn prepared(dir: &std::path::Path) -> (Served, String) {
    let s = Served::prepare(dir, 20);
    s.scion(&["fork", "shop", "alice", "--ttl", "7d"]);
    s.scion(&["fork", "shop", "feature"]);
    s.scion(&[
        "sql",
        "shop@feature",
        "INSERT INTO items(name, qty) VALUES ('f', 1)",
    ]);
    let out = s.scion(&[
        "promote",
        "shop@feature",
        "--onto",
        "main",
        "--force",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let safety = v["safety_fork"]
        .as_str()
        .unwrap()
        .split_once('@')
        .unwrap()
        .1
        .to_string();
    (s, safety)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_with_the_defaults_changes_nothing_it_did_not_fork() {
    let dir = tempfile::tempdir().unwrap();
    let (s, safety) = prepared(dir.path());
    let c = connect(&s, &["--daemon", "never"]).await;
    let mut t = Table(vec![
        "| call | answer | data intact |".into(),
        "|---|---|---|".into(),
    ]);
    let db = |extra: Value| {
        let mut v = json!({"database": "shop"});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    // The three sequences that used to change a person's data without force.
    attack(
        &s,
        &c,
        &mut t,
        "scion_checkout",
        db(json!({"branch": "main"})),
        "not_owner",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_checkpoint",
        db(json!({"branch": "main", "name": "x"})),
        "not_owner",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_destroy",
        db(json!({"branch": safety})),
        "not_owner",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_touch",
        db(json!({"branch": "alice", "ttl": "1s"})),
        "not_owner",
    )
    .await;
    // Every other change to a branch it does not own.
    attack(
        &s,
        &c,
        &mut t,
        "scion_session_open",
        db(json!({"branch": "main"})),
        "not_owner",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_query",
        db(json!({"sql": "DELETE FROM items", "targets": ["main"]})),
        "read_only_tool",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_merge",
        db(json!({"source": "alice", "target": "main", "dry_run": false})),
        "not_owner",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_promote",
        db(json!({"source": "alice", "target": "main"})),
        "not_owner",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_undo",
        db(json!({"branch": "main"})),
        "not_owner",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_restore",
        db(json!({"branch": "main", "to": 1})),
        "not_owner",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_rollback",
        db(json!({"branch": "alice", "to": "fork"})),
        "not_owner",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_destroy",
        db(json!({"branch": "alice"})),
        "not_owner",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_merge",
        db(json!({"source": "main", "target": "alice", "dry_run": false})),
        "not_owner",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_checkout",
        db(json!({"branch": "alice"})),
        "not_owner",
    )
    .await;
    attack(
        &s,
        &c,
        &mut t,
        "scion_destroy",
        db(json!({"branch": "main", "force": true})),
        "force_not_allowed",
    )
    .await;
    // Reading stays open: a read-only checkout, a dry-run merge into main, a query.
    let ro = call(
        &c,
        "scion_checkout",
        db(json!({"branch": "main", "read_only": true})),
    )
    .await;
    assert_eq!(ok(&ro)["read_only"], true);
    let dry = call(
        &c,
        "scion_merge",
        db(json!({"source": "alice", "target": "main"})),
    )
    .await;
    assert_eq!(ok(&dry)["dry_run"], true);
    // The person's branch survives a gc: its TTL was never shortened.
    tokio::task::block_in_place(|| {
        s.scion(&["gc", "--grace", "0", "--force"]);
        assert!(state(&s).iter().any(|(b, _)| b == "alice"));
    });
    c.cancel().await.unwrap();
    println!("{}", t.0.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_changes_its_own_forks_and_owns_them_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = prepared(dir.path());
    let c = connect(&s, &["--daemon", "never", "--owner", "agent-7"]).await;
    let f = call(
        &c,
        "scion_fork",
        json!({"database": "shop", "new_branch": "mine"}),
    )
    .await;
    assert_eq!(ok(&f)["owner"], "agent-7");
    let co = call(
        &c,
        "scion_checkout",
        json!({"database": "shop", "branch": "mine"}),
    )
    .await;
    let path = ok(&co)["path"].as_str().unwrap().to_string();
    served::sqlite3(
        std::path::Path::new(&path),
        "DELETE FROM items WHERE id <= 5",
    );
    let cp = call(
        &c,
        "scion_checkpoint",
        json!({"database": "shop", "branch": "mine", "name": "trim"}),
    )
    .await;
    ok(&cp);
    let t = call(
        &c,
        "scion_touch",
        json!({"database": "shop", "branch": "mine", "ttl": "1h"}),
    )
    .await;
    assert_eq!(ok(&t)["ttl_secs"], 3600);
    let rb = call(
        &c,
        "scion_rollback",
        json!({"database": "shop", "branch": "mine", "to": "fork"}),
    )
    .await;
    let backup = ok(&rb)["backup"]
        .as_str()
        .unwrap()
        .split_once('@')
        .unwrap()
        .1
        .to_string();
    let un = call(
        &c,
        "scion_undo",
        json!({"database": "shop", "branch": "mine"}),
    )
    .await;
    ok(&un);
    let m = call(
        &c,
        "scion_merge",
        json!({"database": "shop", "source": "main", "target": "mine", "dry_run": false}),
    )
    .await;
    ok(&m);
    // The safety fork its own rollback kept is its own too, but still needs force.
    assert_eq!(
        refused(
            &call(
                &c,
                "scion_destroy",
                json!({"database": "shop", "branch": backup})
            )
            .await
        ),
        "safety_fork"
    );
    let so = call(
        &c,
        "scion_session_open",
        json!({"database": "shop", "branch": "live", "fork_from": "main"}),
    )
    .await;
    let sid = ok(&so)["session_id"].as_str().unwrap().to_string();
    let sc = call(&c, "scion_session_close", json!({"session_id": sid})).await;
    ok(&sc);
    c.cancel().await.unwrap();
    // The head history names the agent the moves were made for.
    let log = s.scion(&["log", "shop@mine"]);
    assert!(log.contains("by agent-7 (via "), "{log}");
    // `scion branches` names the owner; a restarted server with the tag owns them again.
    let listed = s.scion(&["branches", "shop"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("mine") && l.contains("owner agent-7")),
        "{listed}"
    );
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("live") && l.contains("owner agent-7")),
        "{listed}"
    );
    let c = connect(&s, &["--daemon", "never", "--owner", "agent-7"]).await;
    let d = call(
        &c,
        "scion_destroy",
        json!({"database": "shop", "branch": "mine"}),
    )
    .await;
    ok(&d);
    let r = call(
        &c,
        "scion_restore",
        json!({"database": "shop", "branch": "mine"}),
    )
    .await;
    ok(&r);
    c.cancel().await.unwrap();
    // Another agent's server does not.
    let other = connect(&s, &["--daemon", "never", "--owner", "agent-8"]).await;
    let no = call(
        &other,
        "scion_checkpoint",
        json!({"database": "shop", "branch": "mine", "name": "z"}),
    )
    .await;
    assert_eq!(refused(&no), "not_owner");
    assert!(
        no.structured_content.as_ref().unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("belongs to agent-7"),
        "{no:?}"
    );
    other.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_widen_what_an_agent_may_change() {
    let dir = tempfile::tempdir().unwrap();
    let (s, safety) = prepared(dir.path());
    s.scion(&["fork", "shop", "exp-1"]);
    // --write lets it change matching branches, and only those.
    let c = connect(&s, &["--daemon", "never", "--write", "shop@exp-*"]).await;
    let co = call(
        &c,
        "scion_checkout",
        json!({"database": "shop", "branch": "exp-1"}),
    )
    .await;
    ok(&co);
    let cp = call(
        &c,
        "scion_checkpoint",
        json!({"database": "shop", "branch": "exp-1", "name": "a"}),
    )
    .await;
    ok(&cp);
    let no = call(
        &c,
        "scion_checkout",
        json!({"database": "shop", "branch": "alice"}),
    )
    .await;
    assert_eq!(refused(&no), "not_owner");
    c.cancel().await.unwrap();
    // Granted everything and force: a TTL made shorter and a safety fork destroyed need
    // force; main stays protected.
    let c = connect(
        &s,
        &["--daemon", "never", "--write", "shop", "--allow-force"],
    )
    .await;
    let short = json!({"database": "shop", "branch": "alice", "ttl": "1s"});
    assert_eq!(
        refused(&call(&c, "scion_touch", short.clone()).await),
        "ttl_shortening"
    );
    let longer = call(
        &c,
        "scion_touch",
        json!({"database": "shop", "branch": "alice", "ttl": "7d"}),
    )
    .await;
    ok(&longer);
    let mut forced = short;
    forced["force"] = json!(true);
    ok(&call(&c, "scion_touch", forced).await);
    let gone = json!({"database": "shop", "branch": safety});
    assert_eq!(
        refused(&call(&c, "scion_destroy", gone.clone()).await),
        "safety_fork"
    );
    let mut forced = gone;
    forced["force"] = json!(true);
    ok(&call(&c, "scion_destroy", forced).await);
    let m = json!({"database": "shop", "source": "exp-1", "dry_run": false});
    assert_eq!(
        refused(&call(&c, "scion_merge", m.clone()).await),
        "protected"
    );
    c.cancel().await.unwrap();
    // --databases: the others are neither listed nor read.
    let c = connect(&s, &["--daemon", "never", "--databases", "crm"]).await;
    let listed = call(&c, "scion_list", json!({})).await;
    assert_eq!(ok(&listed)["databases"], json!([]));
    let f = call(
        &c,
        "scion_fork",
        json!({"database": "shop", "new_branch": "x"}),
    )
    .await;
    assert_eq!(refused(&f), "database_not_given");
    let q = call(
        &c,
        "scion_query",
        json!({"database": "shop", "sql": "SELECT 1", "targets": ["main"]}),
    )
    .await;
    assert_eq!(refused(&q), "database_not_given");
    c.cancel().await.unwrap();
}
