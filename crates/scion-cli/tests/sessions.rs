//! Sessions of a real `scion serve`: capture end to end, at-rest refusals, ephemeral,
//! owner-bound and idle sessions, fencing, the janitor, SIGTERM.

mod served;

use std::time::{Duration, Instant};

use serde_json::json;
use served::{code, rows, served, sqlite3};

#[test]
fn a_session_captures_commits_and_refuses_at_rest_changes_until_closed() {
    let (_d, s) = served(50, &["--flush-every", "1h"]);
    let opened = s.post("/v1/sessions", json!({"db": "shop"})).unwrap();
    let id = opened.body["id"].as_str().unwrap().to_string();
    let path = std::path::PathBuf::from(opened.body["path"].as_str().unwrap());
    assert_eq!(opened.body["version"], 1);
    sqlite3(
        &path,
        "INSERT INTO items(name, qty) VALUES ('new', 1); UPDATE items SET qty = 0 WHERE id = 3;",
    );
    // The CLI and the API both refuse at-rest changes, naming the session.
    let cli = s.cmd(&["checkpoint", "shop", "x"]).output().unwrap();
    assert_eq!(cli.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&cli.stderr).contains(&format!("scion session flush {id}")));
    assert_eq!(
        code(s.post("/v1/branches/shop@main/checkpoints", json!({"name": "x"}))),
        (409, "lease_held".into())
    );
    assert_eq!(
        code(s.post("/v1/sessions", json!({"db": "shop"}))),
        (409, "lease_held".into())
    );
    let flushed = s
        .post(
            &format!("/v1/sessions/{id}/flush"),
            json!({"checkpoint": "after", "meta": {"by": "test"}}),
        )
        .unwrap();
    assert_eq!(flushed.body["version"], 2);
    assert_eq!(flushed.body["transactions"], 2);
    assert_eq!(flushed.body["checkpoint"], "shop@main@after");
    let listed = s.get("/v1/sessions");
    assert_eq!(listed["sessions"][0]["id"], id.as_str());
    assert_eq!(listed["sessions"][0]["durable_version"], 2);
    let out = s.export("shop@main@after");
    assert_eq!(rows(&out, "SELECT count(*) FROM items"), 51);
    // The CLI's flush says what it made durable, in words.
    sqlite3(&path, "UPDATE items SET qty = 7 WHERE id = 4;");
    let cli = s.cmd(&["session", "flush", &id]).output().unwrap();
    assert!(cli.status.success());
    assert_eq!(
        String::from_utf8_lossy(&cli.stdout),
        "durable version 3: committed 1 transaction (1 page)\n"
    );
    assert_eq!(
        code(s.post("/v1/sessions/s-000000000000/flush", json!({}))),
        (404, "session_not_found".into())
    );
    let closed = s
        .client()
        .request("DELETE", &format!("/v1/sessions/{id}"), None, &[])
        .unwrap();
    let again = s
        .client()
        .request("DELETE", &format!("/v1/sessions/{id}"), None, &[])
        .unwrap();
    assert_eq!(closed.body, again.body, "closing twice answers the same");
    assert!(s.get("/v1/sessions")["sessions"]
        .as_array()
        .unwrap()
        .is_empty());
    // Closed: the checkout is clean at the durable version, and at-rest commands work.
    s.scion(&["checkpoint", "shop", "x"]);
}

#[test]
fn ephemeral_owner_bound_and_idle_sessions_end_by_themselves() {
    let (_d, s) = served(20, &["--flush-every", "200ms"]);
    // Ephemeral: a fork per test, destroyed on close.
    let e = s
        .post(
            "/v1/sessions",
            json!({"db": "shop", "branch": "t1", "fork_from": "main", "ephemeral": true}),
        )
        .unwrap();
    let id = e.body["id"].as_str().unwrap();
    assert_eq!(e.body["branch"], "shop@t1");
    let closed = s
        .client()
        .request("DELETE", &format!("/v1/sessions/{id}"), None, &[])
        .unwrap();
    assert_eq!(closed.body["destroyed"], true);
    assert_eq!(
        code(s.client().request("GET", "/v1/branches/shop@t1", None, &[])),
        (404, "branch_not_found".into())
    );
    assert_eq!(
        code(s.post("/v1/sessions", json!({"db": "shop", "ephemeral": true}))),
        (400, "invalid_input".into())
    );
    // An ephemeral fork that outlives its session (a test fork that may be kept): closing
    // leaves it, and destroying it later takes its history too (nothing to restore).
    let k = s
        .post(
            "/v1/sessions",
            json!({"db": "shop", "branch": "t4", "fork_from": "main", "fork_ephemeral": true}),
        )
        .unwrap();
    let kid = k.body["id"].as_str().unwrap();
    let closed = s
        .client()
        .request("DELETE", &format!("/v1/sessions/{kid}"), None, &[])
        .unwrap();
    assert_eq!(closed.body["destroyed"], false);
    assert_eq!(s.get("/v1/branches/shop@t4")["ephemeral"], true);
    assert!(s.scion(&["branches", "shop"]).contains("ephemeral"));
    s.scion(&["destroy", "shop@t4", "--force"]);
    let restore = s.cmd(&["restore", "shop@t4"]).output().unwrap();
    assert!(
        !restore.status.success(),
        "an ephemeral fork's history went with it"
    );
    assert_eq!(
        code(s.post(
            "/v1/sessions",
            json!({"db": "shop", "fork_ephemeral": true})
        )),
        (400, "invalid_input".into())
    );

    // Bound to an owner process: closes when it dies.
    let mut owner = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let o = s
        .post(
            "/v1/sessions",
            json!({"db": "shop", "branch": "t2", "fork_from": "main", "owner_pid": owner.id()}),
        )
        .unwrap();
    let oid = o.body["id"].as_str().unwrap().to_string();
    owner.kill().unwrap();
    owner.wait().unwrap();
    // Idle: closes after its timeout.
    let i = s
        .post(
            "/v1/sessions",
            json!({"db": "shop", "branch": "t3", "fork_from": "main", "idle_timeout": "1s"}),
        )
        .unwrap();
    let iid = i.body["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    while !s.get("/v1/sessions")["sessions"]
        .as_array()
        .unwrap()
        .is_empty()
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "sessions did not end: {}",
            s.get("/v1/sessions")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut reasons = std::collections::BTreeMap::new();
    s.client()
        .events(Some(0), true, |e| {
            if e.event == "session_closed" {
                let v: serde_json::Value = serde_json::from_str(&e.data).unwrap();
                reasons.insert(
                    v["data"]["id"].as_str().unwrap().to_string(),
                    v["data"]["reason"].as_str().unwrap().to_string(),
                );
            }
            !(reasons.contains_key(&oid) && reasons.contains_key(&iid))
        })
        .unwrap();
    assert_eq!(reasons[&oid], "owner_exited");
    assert_eq!(reasons[&iid], "idle_timeout");
}

#[test]
fn sigterm_flushes_and_closes_every_session_then_exits_zero() {
    let (_d, mut s) = served(30, &["--flush-every", "1h"]);
    let opened = s.post("/v1/sessions", json!({"db": "shop"})).unwrap();
    let path = std::path::PathBuf::from(opened.body["path"].as_str().unwrap());
    sqlite3(&path, "INSERT INTO items(name, qty) VALUES ('kept', 7);");
    assert_eq!(s.terminate(), 0, "{}", s.log());
    assert!(!s.socket.exists(), "the socket is removed on the way out");
    let out = s.export("shop");
    assert_eq!(
        rows(&out, "SELECT count(*) FROM items WHERE name = 'kept'"),
        1
    );
    // Nothing holds the branch any more.
    s.scion(&["checkpoint", "shop", "after-stop"]);
}

#[test]
fn a_session_whose_lease_is_broken_is_fenced_and_says_why() {
    let (_d, s) = served(10, &["--flush-every", "1h"]);
    let opened = s.post("/v1/sessions", json!({"db": "shop"})).unwrap();
    let id = opened.body["id"].as_str().unwrap().to_string();
    let path = std::path::PathBuf::from(opened.body["path"].as_str().unwrap());
    // Someone breaks the lease and takes the branch.
    s.scion(&["lease", "release", "shop", "--force"]);
    s.cmd(&["lease", "acquire", "shop", "--ttl", "10m"])
        .env("SCION_HOLDER", "intruder")
        .output()
        .unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("INSERT INTO items(name, qty) VALUES ('late', 1)", [])
        .unwrap();
    assert_eq!(
        code(s.post(&format!("/v1/sessions/{id}/flush"), json!({}))),
        (409, "fenced".into())
    );
    let info = s.get(&format!("/v1/sessions/{id}"));
    assert_eq!(info["state"], "fenced");
    assert!(info["fenced_reason"].as_str().unwrap().contains("changed"));
    let mut fenced = false;
    s.client()
        .events(Some(0), true, |e| {
            fenced = e.event == "fenced";
            !fenced
        })
        .unwrap();
    assert!(fenced);
    // Closing still works; the branch stays the intruder's.
    s.client()
        .request("DELETE", &format!("/v1/sessions/{id}"), None, &[])
        .unwrap();
    let b = s.get("/v1/branches/shop@main");
    assert_eq!(b["version"], 1, "nothing was committed over the new holder");
}

#[test]
fn the_janitor_reaps_expired_branches_but_never_one_with_a_session() {
    let (_d, s) = served(
        10,
        &[
            "--janitor-every",
            "1s",
            "--gc-every",
            "never",
            "--lease-ttl",
            "3s",
        ],
    );
    s.post(
        "/v1/branches",
        json!({"source": "shop", "name": "short", "ttl": "1s"}),
    )
    .unwrap();
    let held = s
        .post(
            "/v1/sessions",
            json!({"db": "shop", "branch": "held", "fork_from": "main", "ttl": "1h"}),
        )
        .unwrap();
    s.post("/v1/branches/shop@held/touch", json!({"ttl": "1s"}))
        .unwrap();
    let started = Instant::now();
    let mut reaped = Vec::new();
    s.client()
        .events(Some(0), true, |e| {
            if e.event == "reaped" {
                let v: serde_json::Value = serde_json::from_str(&e.data).unwrap();
                reaped.push(v["data"]["branch"].as_str().unwrap().to_string());
            }
            reaped.is_empty() && started.elapsed() < Duration::from_secs(30)
        })
        .unwrap();
    assert_eq!(reaped, ["shop@short"]);
    // Several janitor rounds later the session's branch is still there.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(s.get("/v1/branches/shop@held")["branch"], "held");
    let id = held.body["id"].as_str().unwrap();
    s.client()
        .request("DELETE", &format!("/v1/sessions/{id}"), None, &[])
        .unwrap();
    let metrics = s.client().raw("GET", "/metrics", None, &[]).unwrap();
    assert!(metrics
        .body
        .as_str()
        .unwrap()
        .contains("scion_janitor_reaped_total 1"));
}

/// With --compact-fragmented the janitor compacts a branch small commits fragmented, once
/// idle: a `compacted` event, the metric, the same rows, and the head's history names it.
#[test]
fn the_janitor_compacts_a_fragmented_idle_branch_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = served::Served::prepare(dir.path(), 5000);
    for i in 0..4 {
        s.scion(&[
            "sql",
            "shop",
            &format!("UPDATE items SET qty = qty + 1 WHERE id = {}", 1 + i * 1200),
        ]);
    }
    let before = rows(&s.export("shop"), "SELECT sum(qty) FROM items");
    s.start(&[
        "--janitor-every",
        "1s",
        "--gc-every",
        "never",
        "--compact-fragmented",
        "5%",
        "--compact-idle",
        "0s",
    ]);
    let started = Instant::now();
    let mut compacted = Vec::new();
    s.client()
        .events(Some(0), true, |e| {
            if e.event == "compacted" {
                let v: serde_json::Value = serde_json::from_str(&e.data).unwrap();
                compacted.push(v["data"].clone());
            }
            compacted.is_empty() && started.elapsed() < Duration::from_secs(30)
        })
        .unwrap();
    assert_eq!(compacted.len(), 1, "{compacted:?}");
    assert_eq!(compacted[0]["branch"], "shop@main");
    assert_eq!(compacted[0]["scope"], "scattered");
    assert!(compacted[0]["before"]["small_segments"].as_u64().unwrap() >= 2);
    // Later rounds find nothing more to do.
    std::thread::sleep(Duration::from_secs(3));
    let metrics = s.client().raw("GET", "/metrics", None, &[]).unwrap();
    assert!(metrics
        .body
        .as_str()
        .unwrap()
        .contains("scion_janitor_compacted_total 1"));
    assert_eq!(
        rows(&s.export("shop"), "SELECT sum(qty) FROM items"),
        before
    );
    let log = s.scion(&["log", "shop", "--json"]);
    assert!(log.contains("compact"), "{log}");
}

/// A writer that never pauses, under a session with and without the second tier: the
/// session says how it kept the WAL short (PASSIVE checkpoints; barriers only when asked
/// for), and everything committed is durable after a flush.
#[test]
fn a_session_reports_how_it_recycled_the_wal() {
    for second_tier in [false, true] {
        let mut args = vec!["--flush-every", "100ms"];
        if second_tier {
            args.extend(["--barrier-frames", "50"]);
        }
        let (_d, s) = served(20, &args);
        let opened = s.post("/v1/sessions", json!({"db": "shop"})).unwrap();
        let id = opened.body["id"].as_str().unwrap().to_string();
        let path = std::path::PathBuf::from(opened.body["path"].as_str().unwrap());
        let c = rusqlite::Connection::open(&path).unwrap();
        c.busy_timeout(Duration::from_secs(5)).unwrap();
        let end = Instant::now() + Duration::from_millis(1500);
        let mut n = 0i64;
        while Instant::now() < end || n < 500 {
            c.execute("INSERT INTO marks(writer, seq) VALUES ('w', ?1)", [n])
                .unwrap();
            n += 1;
        }
        drop(c);
        s.post(&format!("/v1/sessions/{id}/flush"), json!({}))
            .unwrap();
        let info = s.get(&format!("/v1/sessions/{id}"));
        let r = &info["recycling"];
        let count = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {info}"));
        assert!(count("passive_checkpoints") >= 1, "{info}");
        let listed = s.cmd(&["session", "list"]).output().unwrap();
        let listed = String::from_utf8_lossy(&listed.stdout).to_string();
        if second_tier {
            assert!(count("barriers") + count("barriers_skipped") >= 1, "{info}");
            assert_eq!(
                count("barrier_max_hold_us") > 0,
                count("barriers") > 0,
                "{info}"
            );
            let shown = format!(
                "barriers {} ({} skipped)",
                count("barriers"),
                count("barriers_skipped")
            );
            assert!(listed.contains(&shown), "{listed}");
        } else {
            assert!(!listed.contains("barriers"), "{listed}");
            assert_eq!(count("barriers") + count("barriers_skipped"), 0, "{info}");
            assert_eq!(count("barrier_max_hold_us"), 0, "{info}");
        }
        s.client()
            .request("DELETE", &format!("/v1/sessions/{id}"), None, &[])
            .unwrap();
        let out = s.export("shop");
        assert_eq!(
            rows(&out, "SELECT count(*) FROM marks"),
            n,
            "tier 2: {second_tier}"
        );
    }
}

/// A session is named by its id or by its branch, in the CLI and the API alike.
#[test]
fn sessions_by_name() {
    let (_d, s) = served(20, &["--flush-every", "1h"]);
    let opened = s
        .post(
            "/v1/sessions",
            json!({"db": "shop", "branch": "ux", "fork_from": "main"}),
        )
        .unwrap();
    let id = opened.body["id"].as_str().unwrap().to_string();
    let path = std::path::PathBuf::from(opened.body["path"].as_str().unwrap());
    assert_eq!(s.get("/v1/sessions/shop@ux")["id"], id.as_str());
    sqlite3(&path, "INSERT INTO items(name, qty) VALUES ('by-name', 1);");
    let cli = s
        .cmd(&["session", "flush", "shop@ux", "--checkpoint", "named"])
        .output()
        .unwrap();
    assert!(cli.status.success(), "{cli:?}");
    let out = s.export("shop@ux@named");
    assert_eq!(
        rows(&out, "SELECT count(*) FROM items WHERE name = 'by-name'"),
        1
    );
    // A branch without a session, and a name that is no branch, are "no session".
    assert_eq!(
        code(s.post("/v1/sessions/shop@main/flush", json!({}))),
        (404, "session_not_found".into())
    );
    let bad = s
        .cmd(&["session", "close", "shop@nosuch"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(3), "{bad:?}");
    let closed = s.cmd(&["session", "close", "shop@ux"]).output().unwrap();
    assert!(closed.status.success(), "{closed:?}");
    assert!(s.get("/v1/sessions")["sessions"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// A session closed on its branch leaves the checkout recorded as holding the durable
/// version, WAL and all: a fork right after does not warn that the file was written since
/// its last checkpoint, while a commit made after the close still makes it warn.
#[test]
fn a_closed_session_leaves_a_checkout_that_needs_no_warning() {
    let (_d, s) = served(10, &[]);
    let out = s.scion(&["session", "open", "shop"]);
    let path = std::path::PathBuf::from(out.trim());
    sqlite3(&path, "UPDATE items SET qty = qty + 1");
    s.scion(&["session", "close", "shop"]);
    let forked = s.cmd(&["fork", "shop", "x"]).output().unwrap();
    assert!(forked.status.success());
    let note = String::from_utf8_lossy(&forked.stderr).to_string();
    assert!(!note.contains("was written to"), "{note}");
    sqlite3(&path, "UPDATE items SET qty = qty + 1");
    let forked = s.cmd(&["fork", "shop", "y"]).output().unwrap();
    let note = String::from_utf8_lossy(&forked.stderr).to_string();
    assert!(
        note.contains("was written to since its last checkpoint"),
        "{note}"
    );
}
