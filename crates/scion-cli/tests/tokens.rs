//! Scoped daemon tokens, against a real `scion serve`: a token works inside its grants and
//! gets 403 (the missing grant named, nothing done) on every route of docs/openapi.json
//! outside them; a revoked or expired token gets 401; the token file is the owner's alone;
//! head histories name the token that made a move; an MCP server passes its own token.

mod mcp_client;
mod served;
mod token_rig;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use serde_json::{json, Value};
use token_rig::Rig;

/// Every route of the OpenAPI document, with what to send to touch `shop@main` (outside the
/// scope of `shop@exp-*:write`).
fn routes_outside_the_scope(session_on_main: &str) -> Vec<(String, String, Option<Value>)> {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/openapi.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let method = method.to_uppercase();
            let concrete = path
                .replace("{branch}", "shop@main")
                .replace("{db}", "crm")
                .replace("{id}", session_on_main)
                .replace("{name}", "origin");
            let (concrete, body) = match (method.as_str(), path.as_str()) {
                ("POST", "/v1/databases") => (concrete, Some(json!({"name": "crm"}))),
                ("POST", "/v1/branches") => (
                    concrete,
                    Some(json!({"source": "shop@main", "name": "exp-9"})),
                ),
                ("POST", "/v1/branches/{branch}/checkpoints") => {
                    (concrete, Some(json!({"name": "x"})))
                }
                ("POST", "/v1/branches/{branch}/rollback") => {
                    (concrete, Some(json!({"to": "init"})))
                }
                ("POST", "/v1/branches/{branch}/promote") => {
                    (concrete, Some(json!({"onto": "exp-1"})))
                }
                ("POST", "/v1/branches/{branch}/merge") => {
                    (concrete, Some(json!({"from": "exp-1"})))
                }
                ("POST", "/v1/branches/{branch}/protect") => {
                    (concrete, Some(json!({"protected": false})))
                }
                ("POST", "/v1/branches/{branch}/touch") => (concrete, Some(json!({"ttl": "1s"}))),
                ("GET", "/v1/diff") => (format!("{concrete}?from=shop@main&to=shop@exp-1"), None),
                ("POST", "/v1/export") => (
                    concrete,
                    Some(json!({"target": "shop@main", "path": "/tmp/never.db"})),
                ),
                ("POST", "/v1/sessions") => {
                    (concrete, Some(json!({"db": "shop", "branch": "main"})))
                }
                ("POST", "/v1/gc") => (concrete, Some(json!({}))),
                ("POST", "/v1/branches/{branch}/push" | "/v1/branches/{branch}/pull") => {
                    (concrete, Some(json!({"remote": "origin"})))
                }
                ("POST", "/v1/remotes") => (
                    concrete,
                    Some(json!({"name": "origin", "location": "/tmp/never"})),
                ),
                _ => (concrete, None),
            };
            out.push((method, concrete, body));
        }
    }
    out
}

/// Routes any valid token may call: health, readiness, the document, the database names,
/// who the caller is, the explorer's page (its data comes from routes that check grants).
const OPEN: &[&str] = &[
    "/healthz",
    "/readyz",
    "/v1/openapi.json",
    "/v1/databases",
    "/v1/whoami",
    "/ui",
];

#[test]
fn a_scoped_token_works_inside_its_grants_and_gets_403_on_every_route_outside() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::new(dir.path(), &[]);
    let ci = rig.token("ci", &["shop@exp-*:write"], None);
    // The token file is the owner's alone, and holds no token.
    let text = std::fs::read_to_string(&rig.tokens).unwrap();
    assert!(!text.contains(&ci));
    let mode = std::fs::metadata(&rig.tokens).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "token file mode {mode:o}");
    // A session on main, opened with the daemon's own token, for the session routes.
    let (st, so) = rig.call(
        &rig.admin,
        "POST",
        "/v1/sessions",
        Some(json!({"db": "shop", "branch": "main"})),
    );
    assert_eq!(st, 201, "{so}");
    let sid = so["id"].as_str().unwrap().to_string();
    let before = rig.state();
    let mut refused = 0;
    let mut open = 0;
    let routes = routes_outside_the_scope(&sid);
    for (method, path, body) in &routes {
        let bare = path.split('?').next().unwrap();
        if method == "GET" && OPEN.contains(&bare) {
            let (st, _) = rig.call(&ci, method, path, body.clone());
            assert!(st < 400, "{method} {path}: {st}");
            open += 1;
            continue;
        }
        let (st, v) = rig.call(&ci, method, path, body.clone());
        assert_eq!(st, 403, "{method} {path}: {v}");
        assert_eq!(v["error"]["code"], "forbidden", "{method} {path}: {v}");
        assert!(
            v["error"]["missing_grant"].is_string(),
            "{method} {path}: {v}"
        );
        refused += 1;
    }
    println!(
        "routes in docs/openapi.json: {}; refused outside the scope: {refused}; open to any token: {open}",
        routes.len()
    );
    assert_eq!(refused + open, routes.len());
    let (st, _) = rig.call(&rig.admin, "DELETE", &format!("/v1/sessions/{sid}"), None);
    assert_eq!(st, 200);
    let after = rig.state();
    assert_eq!(before, after, "a refused request changed the store");
    // Inside the scope: fork, write (a checkpoint of a checkout), merge, destroy.
    let (st, v) = rig.call(
        &ci,
        "POST",
        "/v1/branches",
        Some(json!({"source": "shop@exp-1", "name": "exp-2"})),
    );
    assert_eq!(st, 201, "{v}");
    let (st, co) = rig.call(
        &ci,
        "POST",
        "/v1/branches/shop@exp-2/checkout",
        Some(json!({})),
    );
    assert_eq!(st, 200, "{co}");
    served::sqlite3(
        std::path::Path::new(co["path"].as_str().unwrap()),
        "DELETE FROM items WHERE id <= 3",
    );
    let (st, v) = rig.call(
        &ci,
        "POST",
        "/v1/branches/shop@exp-2/checkpoints",
        Some(json!({"name": "trim"})),
    );
    assert_eq!(st, 201, "{v}");
    let (st, v) = rig.call(&ci, "DELETE", "/v1/branches/shop@exp-2/checkout", None);
    assert!(st < 300, "{v}");
    let (st, v) = rig.call(
        &ci,
        "POST",
        "/v1/branches/shop@exp-1/merge",
        Some(json!({"from": "exp-2"})),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["outcome"], "fast_forward", "{v}");
    // Its fork is its own, and the history names the token.
    let status: Value =
        serde_json::from_str(&rig.s.scion(&["branches", "shop", "--json"])).unwrap();
    let exp2 = status["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["branch"] == "exp-2")
        .unwrap()
        .clone();
    assert_eq!(exp2["owner"], "token:ci");
    let log = rig.s.scion(&["log", "shop@exp-2"]);
    assert!(log.contains("by token:ci"), "{log}");
    println!("scion log shop@exp-2:\n{log}");
    let log1 = rig.s.scion(&["log", "shop@exp-1"]);
    assert!(
        log1.lines()
            .next()
            .unwrap_or_default()
            .contains("by token:ci"),
        "{log1}"
    );
    // The events name the token too.
    let (st, events) = rig.call(&rig.admin, "GET", "/v1/events?since=0&follow=false", None);
    assert_eq!(st, 200);
    let events = events.as_str().unwrap_or_default().to_string();
    // The fork of exp-2 was the token's.
    assert!(
        events
            .lines()
            .any(|l| l.contains("exp-2") && l.contains("\"by\":\"token:ci\"")),
        "{events}"
    );
    // Revoked: 401 from the next request on.
    rig.s.scion(&[
        "token",
        "revoke",
        "ci",
        "--tokens",
        rig.tokens.to_str().unwrap(),
    ]);
    let (st, v) = rig.call(&ci, "GET", "/v1/branches/shop@exp-1", None);
    assert_eq!(
        (st, v["error"]["code"].clone()),
        (401, json!("unauthorized")),
        "{v}"
    );
    // Expired: 401.
    let old = rig.token("old", &["shop:read"], Some("1s"));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (st, v) = rig.call(&old, "GET", "/v1/branches/shop@main", None);
    assert_eq!(st, 401, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("expired"),
        "{v}"
    );
    // No token on a socket that asks for one: 401; a wrong one: 401.
    let r = rig.s.client().raw("GET", "/v1/status", None, &[]).unwrap();
    assert_eq!(r.status, 401);
    let (st, _) = rig.call("scion_0000", "GET", "/v1/status", None);
    assert_eq!(st, 401);
}

#[test]
fn a_token_that_may_fork_writes_its_own_forks_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::new(dir.path(), &[]);
    let t = rig.token("agent-run", &["shop:read,fork"], Some("7d"));
    let (st, v) = rig.call(
        &t,
        "POST",
        "/v1/branches",
        Some(json!({"source": "shop", "name": "try-1", "owner": "someone-else"})),
    );
    assert_eq!(st, 201, "{v}");
    let (st, v) = rig.call(
        &t,
        "POST",
        "/v1/branches/shop@try-1/checkpoints",
        Some(json!({"name": "a"})),
    );
    assert_eq!(st, 201, "{v}");
    // Not its own: exp-1 (made at the CLI), main.
    for b in ["exp-1", "main"] {
        let (st, v) = rig.call(
            &t,
            "POST",
            &format!("/v1/branches/shop@{b}/checkpoints"),
            Some(json!({"name": "a"})),
        );
        assert_eq!(st, 403, "{v}");
        assert_eq!(v["error"]["missing_grant"], format!("shop@{b}:write"));
    }
    // Its forks' owner is the token, whatever the body said.
    let (_, me) = rig.call(&t, "GET", "/v1/whoami", None);
    assert_eq!(me["actor"], "token:agent-run");
    let (_, b) = rig.call(&t, "GET", "/v1/branches/shop@try-1", None);
    assert_eq!(b["owner"], "token:agent-run");
    // Force, and a TTL that shortens another's branch, are an admin's.
    let (st, v) = rig.call(&t, "DELETE", "/v1/branches/shop@try-1?force=true", None);
    assert_eq!(
        (st, v["error"]["missing_grant"].clone()),
        (403, json!("shop@try-1:admin"))
    );
    let (st, _) = rig.call(&t, "DELETE", "/v1/branches/shop@try-1", None);
    assert_eq!(st, 200);
    // The daemon counted the refusals.
    let (_, metrics) = rig.call(&rig.admin, "GET", "/metrics", None);
    let text = metrics.as_str().unwrap_or_default().to_string();
    assert!(
        text.lines()
            .any(|l| l.contains("missing_grant") && !l.starts_with('#')),
        "{text}"
    );
}

#[test]
fn a_scoped_token_lists_only_the_databases_its_grants_reach() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::new(dir.path(), &[]);
    for name in ["crm", "payroll"] {
        let (st, v) = rig.call(
            &rig.admin,
            "POST",
            "/v1/databases",
            Some(json!({"name": name})),
        );
        assert_eq!(st, 201, "{v}");
    }
    let listed = |token: &str| {
        let (st, v) = rig.call(token, "GET", "/v1/databases", None);
        assert_eq!(st, 200, "{v}");
        v["databases"].clone()
    };
    assert_eq!(listed(&rig.admin), json!(["crm", "payroll", "shop"]));
    let shop = rig.token("shop-only", &["shop@exp-*:write"], None);
    assert_eq!(listed(&shop), json!(["shop"]));
    let two = rig.token("two", &["crm:read", "shop@main:read"], None);
    assert_eq!(listed(&two), json!(["crm", "shop"]));
    let all = rig.token("reader", &["*:read"], None);
    assert_eq!(listed(&all), json!(["crm", "payroll", "shop"]));
    // What the list hides stays refused by name, as before.
    let (st, v) = rig.call(&shop, "GET", "/v1/databases/payroll/branches", None);
    assert_eq!(st, 403, "{v}");
}

#[test]
fn the_commits_a_session_captures_name_the_token_that_opened_it() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::new(dir.path(), &["--flush-every", "1h"]);
    let t = rig.token("agent-9", &["shop@exp-*:write"], None);
    let (st, opened) = rig.call(
        &t,
        "POST",
        "/v1/sessions",
        Some(json!({"db": "shop", "branch": "exp-1"})),
    );
    assert_eq!(st, 201, "{opened}");
    let id = opened["id"].as_str().unwrap().to_string();
    let path = PathBuf::from(opened["path"].as_str().unwrap());
    served::sqlite3(&path, "INSERT INTO items(name) VALUES ('by-session')");
    let (st, v) = rig.call(
        &t,
        "POST",
        &format!("/v1/sessions/{id}/flush"),
        Some(json!({})),
    );
    assert_eq!(st, 200, "{v}");
    // The close's last capture runs on the session's thread too, asked by someone else.
    served::sqlite3(&path, "INSERT INTO items(name) VALUES ('at-close')");
    let (st, v) = rig.call(&rig.admin, "DELETE", &format!("/v1/sessions/{id}"), None);
    assert_eq!(st, 200, "{v}");
    let log: Value = serde_json::from_str(&rig.s.scion(&["log", "shop@exp-1", "--json"])).unwrap();
    let entries = log["entries"].as_array().unwrap();
    let captured: Vec<&Value> = entries.iter().filter(|e| e["op"] == "commit").collect();
    assert!(captured.len() >= 2, "{log}");
    for e in captured {
        assert_eq!(e["by"], "token:agent-9", "{e}");
    }
}

#[test]
fn tcp_clients_present_a_token_and_get_only_its_grants() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let rig = Rig::new(dir.path(), &["--listen", &addr]);
    let t = rig.token("reader", &["shop@main:read"], None);
    let http = |token: Option<&str>, path: &str| -> u16 {
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        write!(
            c,
            "GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert_eq!(http(Some(&t), "/v1/branches/shop@main"), 200);
    assert_eq!(http(Some(&t), "/v1/branches/shop@exp-1"), 403);
    assert_eq!(http(None, "/v1/branches/shop@main"), 401);
    assert_eq!(http(Some(&rig.admin), "/v1/branches/shop@exp-1"), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_through_the_daemon_passes_its_own_token() {
    let dir = tempfile::tempdir().unwrap();
    let rig = tokio::task::block_in_place(|| Rig::new(dir.path(), &[]));
    let t = rig.token("agent-7", &["shop:read,fork"], None);
    let token_file = dir.path().join("agent.token");
    std::fs::write(&token_file, &t).unwrap();
    let c = mcp_client::connect(
        &rig.s,
        &[
            "--daemon",
            "require",
            "--token-file",
            token_file.to_str().unwrap(),
        ],
    )
    .await;
    let f = mcp_client::call(
        &c,
        "scion_fork",
        json!({"database": "shop", "new_branch": "mine"}),
    )
    .await;
    assert_eq!(mcp_client::ok(&f)["owner"], "token:agent-7");
    let co = mcp_client::call(
        &c,
        "scion_checkout",
        json!({"database": "shop", "branch": "mine"}),
    )
    .await;
    let path = mcp_client::ok(&co)["path"].as_str().unwrap().to_string();
    served::sqlite3(
        std::path::Path::new(&path),
        "DELETE FROM items WHERE id = 1",
    );
    let cp = mcp_client::call(
        &c,
        "scion_checkpoint",
        json!({"database": "shop", "branch": "mine", "name": "a"}),
    )
    .await;
    mcp_client::ok(&cp);
    let no = mcp_client::call(
        &c,
        "scion_checkpoint",
        json!({"database": "shop", "branch": "exp-1", "name": "a"}),
    )
    .await;
    assert_eq!(mcp_client::refused(&no), "not_owner");
    c.cancel().await.unwrap();
    let log = rig.s.scion(&["log", "shop@mine"]);
    assert!(log.contains("by token:agent-7"), "{log}");
}
