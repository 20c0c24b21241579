//! Names that are not names, from every front end: the CLI, the daemon's HTTP API, and MCP
//! in process and through a daemon. Each one is refused as a name before it reaches a
//! path, a glob or a lookup (a `?` or `#` once turned `exp-h?force=true#` into a forced
//! destroy of the protected `exp-h`), and every front end gives the same literal name the
//! same answer: refused, not found, or found. Nothing panics and nothing hangs.

mod mcp_client;
mod served;

use std::time::Duration;

use mcp_client::{call, connect, ok, refused, Client};
use serde_json::{json, Value};
use served::Served;

/// How a front end answered for one name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Refused,
    NotFound,
    Found,
}

fn outcome_of_code(code: &str) -> Outcome {
    match code {
        "invalid_name" => Outcome::Refused,
        "branch_not_found" => Outcome::NotFound,
        other => panic!("unexpected code {other}"),
    }
}

/// A protected `exp-h` with unsaved rows in its checkout: what a forced destroy would lose.
fn protected_with_unsaved_rows(s: &Served) -> std::path::PathBuf {
    s.scion(&["fork", "shop", "exp-h"]);
    s.scion(&["protect", "shop@exp-h"]);
    let path = s.scion(&["checkout", "shop@exp-h"]);
    let path = std::path::PathBuf::from(path.trim());
    served::sqlite3(&path, "INSERT INTO items(name, qty) VALUES ('unsaved', 1)");
    path
}

async fn mcp_destroy_with_a_query_in_the_name_is_refused(s: &Served, c: &Client) {
    let file = protected_with_unsaved_rows(s);
    for branch in ["exp-h?force=true#", "exp-h?force=true", "exp-h#"] {
        let r = call(
            c,
            "scion_destroy",
            json!({"database": "shop", "branch": branch}),
        )
        .await;
        assert_eq!(refused(&r), "invalid_name", "{branch}: {r:?}");
    }
    // The agent's own fork, with rows in its checkout: not discarded either.
    let fork = call(
        c,
        "scion_fork",
        json!({"database": "shop", "new_branch": "a1"}),
    )
    .await;
    ok(&fork);
    let co = call(
        c,
        "scion_checkout",
        json!({"database": "shop", "branch": "a1"}),
    )
    .await;
    let own = std::path::PathBuf::from(ok(&co)["path"].as_str().unwrap());
    served::sqlite3(&own, "INSERT INTO items(name, qty) VALUES ('mine', 1)");
    let r = call(
        c,
        "scion_destroy",
        json!({"database": "shop", "branch": "a1?force=true#"}),
    )
    .await;
    assert_eq!(refused(&r), "invalid_name", "{r:?}");
    let listed = s.scion(&["branches", "shop"]);
    assert!(listed.contains("exp-h *"), "{listed}");
    assert!(listed.contains("a1"), "{listed}");
    assert_eq!(
        served::rows(&file, "SELECT count(*) FROM items WHERE name = 'unsaved'"),
        1
    );
    assert_eq!(
        served::rows(&own, "SELECT count(*) FROM items WHERE name = 'mine'"),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_destroy_of_exp_h_query_force_true_is_refused_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::prepare(dir.path(), 5);
    let c = connect(&s, &["--daemon", "never", "--write", "shop@exp-*"]).await;
    mcp_destroy_with_a_query_in_the_name_is_refused(&s, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_destroy_of_exp_h_query_force_true_is_refused_through_a_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Served::prepare(dir.path(), 5);
    tokio::task::block_in_place(|| s.start(&[]));
    let c = connect(&s, &["--daemon", "require", "--write", "shop@exp-*"]).await;
    mcp_destroy_with_a_query_in_the_name_is_refused(&s, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_in_process_log_of_a_b_and_control_characters_is_refused_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::prepare(dir.path(), 5);
    let c = connect(&s, &["--daemon", "never"]).await;
    for branch in ["a b", "main ", "a1\r\nX: y", "crm\u{0}", "%", "é"] {
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            call(
                &c,
                "scion_log",
                json!({"database": "shop", "branch": branch}),
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("scion_log {branch:?} never answered"));
        assert_eq!(refused(&r), "invalid_name", "{branch:?}: {r:?}");
    }
    // The server still answers after them.
    let r = call(
        &c,
        "scion_log",
        json!({"database": "shop", "branch": "main"}),
    )
    .await;
    ok(&r);
}

/// Names to try: a third from the name alphabet (some exist), the rest mixing in what
/// breaks paths, globs and headers.
fn generated_names(n: usize) -> Vec<String> {
    let valid: Vec<char> = "abcdefgh0123456789.-_".chars().collect();
    let hostile: Vec<char> = "?#%/\\ \t\r\n\u{0}\u{1}\u{7f}*@~:;&=+'\"<>[]{}|^`éß漢\u{202e}🙂ABC"
        .chars()
        .collect();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut names = vec!["main".to_string(), "exists-1".to_string()];
    while names.len() < n {
        let len = 1 + (next() % 12) as usize;
        let only_valid = next() % 3 == 0;
        let name: String = (0..len)
            .map(|_| {
                if only_valid || next() % 2 == 0 {
                    valid[(next() % valid.len() as u64) as usize]
                } else {
                    hostile[(next() % hostile.len() as u64) as usize]
                }
            })
            .collect();
        names.push(name);
    }
    names
}

fn percent_encoded(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn cli_outcome(s: &Served, name: &str) -> Option<Outcome> {
    // A NUL cannot be passed in an argument vector at all.
    if name.contains('\0') {
        return None;
    }
    let out = s
        .cmd(&["--json", "log", &format!("shop@{name}")])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{name:?}: {stderr}");
    if out.status.success() {
        return Some(Outcome::Found);
    }
    // Clap may take a leading '-' as an option: that is a refusal too.
    if out.status.code() == Some(2) {
        return Some(Outcome::Refused);
    }
    let v: Value = serde_json::from_str(stderr.trim()).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    Some(outcome_of_code(v["error"]["code"].as_str().unwrap()))
}

fn http_outcome(s: &Served, name: &str) -> Outcome {
    let path = format!("/v1/branches/shop@{}/history", percent_encoded(name));
    let r = s.client().raw("GET", &path, None, &[]).unwrap();
    assert!(r.status < 500, "{name:?}: {} {}", r.status, r.body);
    if r.status == 200 {
        return Outcome::Found;
    }
    outcome_of_code(r.body["error"]["code"].as_str().unwrap())
}

async fn mcp_outcome(c: &Client, name: &str) -> Outcome {
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        call(c, "scion_log", json!({"database": "shop", "branch": name})),
    )
    .await
    .unwrap_or_else(|_| panic!("scion_log {name:?} never answered"));
    if r.is_error != Some(true) {
        return Outcome::Found;
    }
    outcome_of_code(&refused(&r))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_generated_names_get_one_answer_from_every_front_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Served::prepare(dir.path(), 5);
    s.scion(&["fork", "shop", "exists-1"]);
    tokio::task::block_in_place(|| s.start(&[]));
    let in_process = connect(&s, &["--daemon", "never"]).await;
    let through_daemon = connect(&s, &["--daemon", "require"]).await;
    let names = generated_names(1000);
    let mut counts = std::collections::BTreeMap::new();
    let mut cli_skipped = 0;
    for name in &names {
        let http = tokio::task::block_in_place(|| http_outcome(&s, name));
        let mcp_here = mcp_outcome(&in_process, name).await;
        let mcp_there = mcp_outcome(&through_daemon, name).await;
        assert_eq!(http, mcp_here, "{name:?}: HTTP against MCP in process");
        assert_eq!(
            http, mcp_there,
            "{name:?}: HTTP against MCP through the daemon"
        );
        match tokio::task::block_in_place(|| cli_outcome(&s, name)) {
            Some(cli) => assert_eq!(http, cli, "{name:?}: HTTP against the CLI"),
            None => cli_skipped += 1,
        }
        // What a valid name gets: never refused; what an invalid one gets: always.
        let valid = scion_core::BranchName::new(name).is_ok();
        assert_eq!(http != Outcome::Refused, valid, "{name:?}");
        *counts.entry(http).or_insert(0) += 1;
    }
    eprintln!(
        "{} names: {counts:?}; the CLI took all but {cli_skipped} (NUL cannot be an argument)",
        names.len()
    );
    assert!(counts[&Outcome::Refused] > 500, "{counts:?}");
    assert!(counts[&Outcome::NotFound] > 100, "{counts:?}");
    assert_eq!(counts[&Outcome::Found], 2, "{counts:?}");
    // Both MCP servers and the daemon still answer.
    ok(&call(&in_process, "scion_list", json!({})).await);
    ok(&call(&through_daemon, "scion_list", json!({})).await);
}
