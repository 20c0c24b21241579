//! Access holes found by attack, each test named for the sequence that got through: every
//! one must be refused, or show only what the caller was given.

mod mcp_client;
mod served;

use mcp_client::{call, connect, ok, refused};
use serde_json::json;
use served::Served;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_given_shop_does_not_list_or_show_sessions_of_crm() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Served::prepare(dir.path(), 5);
    s.scion(&["create", "crm"]);
    tokio::task::block_in_place(|| s.start(&[]));
    let crm = s.scion(&["--json", "session", "open", "crm@main"]);
    let crm: serde_json::Value = serde_json::from_str(&crm).unwrap();
    let crm_id = crm["id"].as_str().unwrap().to_string();
    let shop = s.scion(&["--json", "session", "open", "shop@main"]);
    let shop: serde_json::Value = serde_json::from_str(&shop).unwrap();
    let shop_id = shop["id"].as_str().unwrap().to_string();

    let c = connect(&s, &["--daemon", "require", "--databases", "shop"]).await;
    let all = call(&c, "scion_session_status", json!({})).await;
    let ids: Vec<&str> = ok(&all)["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [shop_id.as_str()]);
    for id in [crm_id.as_str(), "crm@main"] {
        let one = call(&c, "scion_session_status", json!({"session_id": id})).await;
        assert_eq!(refused(&one), "database_not_given", "{id}");
    }
    let one = call(&c, "scion_session_status", json!({"session_id": shop_id})).await;
    assert_eq!(ok(&one)["sessions"][0]["id"], shop_id.as_str());
}
