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

/// `POST path` with `body` over TCP to `base` (`127.0.0.1:port`): the status line.
fn tcp_post(addr: &str, token: &str, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    write!(
        c,
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn ui_writable_in_front_of_serve_keeps_export_and_create_from_socket_only() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut s = Served::prepare(dir.path(), 5);
    s.start(&[]);
    let mut ui = s
        .cmd(&["ui", "--no-browser", "--writable"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(ui.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_string();
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let token = url.split("token=").nth(1).unwrap().to_string();
    // The URL is printed as the listener starts: wait until it answers.
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the explorer never listened on {addr}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = dir.path().join("stolen.db");
    let seed = dir.path().join("seed.db");
    let answers = [
        tcp_post(
            &addr,
            &token,
            "/v1/export",
            &format!(r#"{{"target": "shop@main", "path": "{}"}}"#, out.display()),
        ),
        tcp_post(
            &addr,
            &token,
            "/v1/databases",
            &format!(r#"{{"name": "copied", "from": "{}"}}"#, seed.display()),
        ),
    ];
    // A fork through the same explorer works: it is writable.
    let fork = tcp_post(
        &addr,
        &token,
        "/v1/branches",
        r#"{"source": "shop", "name": "from-page"}"#,
    );
    let _ = ui.kill();
    let _ = ui.wait();
    for a in &answers {
        assert!(a.starts_with("HTTP/1.1 403"), "{a}");
        assert!(a.contains("socket_only"), "{a}");
    }
    assert!(fork.starts_with("HTTP/1.1 201"), "{fork}");
    assert!(
        !out.exists(),
        "export wrote a host file through the explorer"
    );
    assert!(!s.scion(&["status"]).contains("copied"));
}
