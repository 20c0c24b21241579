//! `scion serve` as a real process: every endpoint's success and refusal, idempotent
//! retries, who may connect, events and their replay, sessions end to end, SIGTERM.

mod common;
mod served;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::json;
use served::{code, rows, served, Served};

#[test]
fn the_at_rest_api_answers_and_refuses_like_the_cli() {
    let (_d, s) = served(100, &[]);
    assert_eq!(s.get("/v1/databases")["databases"], json!(["shop"]));
    assert_eq!(
        code(s.post("/v1/databases", json!({"name": "Bad Name"}))),
        (400, "invalid_name".into())
    );
    assert_eq!(
        code(s.post("/v1/databases", json!({"name": "shop"}))),
        (409, "database_exists".into())
    );
    let created = s.post("/v1/databases", json!({"name": "empty"})).unwrap();
    assert_eq!(created.status, 201);

    // fork, branch, checkpoints
    let fork = s
        .post(
            "/v1/branches",
            json!({"source": "shop", "name": "try", "ttl": "1h"}),
        )
        .unwrap();
    assert_eq!(fork.status, 201);
    assert_eq!(
        code(s.post("/v1/branches", json!({"source": "shop", "name": "try"}))),
        (409, "branch_exists".into())
    );
    assert_eq!(
        code(s.post("/v1/branches", json!({"source": "nope", "name": "x"}))),
        (404, "database_not_found".into())
    );
    assert_eq!(
        code(s.post(
            "/v1/branches",
            json!({"source": "shop", "name": "x", "bogus": 1})
        )),
        (400, "invalid_input".into())
    );
    let b = s.get("/v1/branches/shop@try");
    assert_eq!(b["branch"], "try");
    assert_eq!(b["ttl_secs"], 3600);
    let branches = s.get("/v1/databases/shop/branches");
    assert_eq!(branches["branches"].as_array().unwrap().len(), 2);

    // checkout, write, checkpoint, diff, rollback
    let co = s.post("/v1/branches/shop@try/checkout", json!({})).unwrap();
    let path = std::path::PathBuf::from(co.body["path"].as_str().unwrap());
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("DELETE FROM items WHERE id <= 10", [])
        .unwrap();
    // Before the checkpoint the versions agree; `working` reads the checkout's changes.
    let committed = s.get("/v1/diff?from=shop@main&to=shop@try");
    assert_eq!(
        committed["unsaved_checkouts"],
        json!(["shop@try"]),
        "{committed}"
    );
    let working = s.get("/v1/diff?from=shop@main&to=shop@try&working=true");
    assert_eq!(working["tables"][0]["removed"], 10, "{working}");
    assert_eq!(working["working_files"], json!(["shop@try"]), "{working}");
    let cp = s
        .post(
            "/v1/branches/shop@try/checkpoints",
            json!({"name": "trimmed"}),
        )
        .unwrap();
    assert_eq!(cp.status, 201);
    assert_eq!(
        code(s.post(
            "/v1/branches/shop@try/checkpoints",
            json!({"name": "trimmed"})
        )),
        (409, "checkpoint_exists".into())
    );
    let list = s.get("/v1/branches/shop@try/checkpoints");
    assert_eq!(list["checkpoints"][0]["name"], "trimmed");
    let diff = s.get("/v1/diff?from=shop@main&to=shop@try&rows=true&limit=3");
    assert_eq!(diff["tables"][0]["removed"], 10);
    assert_eq!(
        code(s.client().request("GET", "/v1/diff?from=shop", None, &[])),
        (400, "invalid_input".into())
    );
    let rb = s
        .post("/v1/branches/shop@try/rollback", json!({"to": "fork"}))
        .unwrap();
    assert_eq!(rb.status, 200);
    assert_eq!(
        code(s.post(
            "/v1/branches/shop@try/rollback",
            json!({"to": "never-made"})
        )),
        (404, "checkpoint_not_found".into())
    );

    // touch, protect, promote, export, destroy, gc
    s.post("/v1/branches/shop@try/touch", json!({"ttl": "2h"}))
        .unwrap();
    assert_eq!(s.get("/v1/branches/shop@try")["ttl_secs"], 7200);
    s.post("/v1/branches/shop@try/protect", json!({"protected": true}))
        .unwrap();
    assert_eq!(
        code(
            s.client()
                .request("DELETE", "/v1/branches/shop@try", None, &[])
        ),
        (409, "protected".into())
    );
    s.post("/v1/branches/shop@try/protect", json!({"protected": false}))
        .unwrap();
    assert_eq!(
        code(s.post("/v1/branches/shop@try/promote", json!({"onto": "main"}))),
        (409, "protected".into())
    );
    let promoted = s
        .post(
            "/v1/branches/shop@try/promote",
            json!({"onto": "main", "force": true}),
        )
        .unwrap();
    assert_eq!(promoted.status, 200);
    let out = s.dir.join("out.db");
    s.post("/v1/export", json!({"target": "shop@main", "path": out}))
        .unwrap();
    assert_eq!(rows(&out, "SELECT count(*) FROM items"), 100);
    assert_eq!(
        code(s.post("/v1/export", json!({"target": "shop@main", "path": out}))),
        (409, "output_exists".into())
    );
    assert_eq!(
        code(
            s.client()
                .request("DELETE", "/v1/branches/shop@main", None, &[])
        ),
        (409, "protected".into())
    );
    let gone = s
        .client()
        .request("DELETE", "/v1/branches/shop@try", None, &[])
        .unwrap();
    assert_eq!(gone.status, 200);
    assert_eq!(
        code(
            s.client()
                .request("GET", "/v1/branches/shop@try", None, &[])
        ),
        (404, "branch_not_found".into())
    );
    assert_eq!(
        code(s.post("/v1/gc", json!({"grace": "1s"}))),
        (409, "grace_below_minimum".into())
    );
    assert_eq!(s.post("/v1/gc", json!({})).unwrap().status, 200);

    // the rest
    assert_eq!(
        code(s.client().request("GET", "/v1/nothing", None, &[])),
        (404, "no_such_endpoint".into())
    );
    let bad = s
        .client()
        .raw(
            "POST",
            "/v1/branches",
            None,
            &[("content-type", "application/json")],
        )
        .unwrap();
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body["error"]["code"], "invalid_input");
    assert_eq!(
        s.client().raw("GET", "/readyz", None, &[]).unwrap().status,
        200
    );
    let status = s.get("/v1/status");
    assert!(status["databases"].as_array().unwrap().len() == 2);
}

#[test]
fn a_retry_with_the_same_idempotency_key_gets_the_first_answer() {
    let (_d, s) = served(10, &[]);
    let c = s.client();
    let body = json!({"source": "shop", "name": "once"});
    let first = c
        .request(
            "POST",
            "/v1/branches",
            Some(&body),
            &[("idempotency-key", "k1")],
        )
        .unwrap();
    let again = c
        .request(
            "POST",
            "/v1/branches",
            Some(&body),
            &[("idempotency-key", "k1")],
        )
        .unwrap();
    assert_eq!(first.status, 201);
    assert_eq!(
        again.status, 201,
        "the retry is answered, not refused as a duplicate"
    );
    assert!(again.replayed && !first.replayed);
    assert_eq!(first.body, again.body);
    let other = json!({"source": "shop", "name": "twice"});
    assert_eq!(
        code(c.request(
            "POST",
            "/v1/branches",
            Some(&other),
            &[("idempotency-key", "k1")]
        )),
        (422, "invalid_input".into())
    );
    // Without a key, the same request is a real second attempt.
    assert_eq!(
        code(c.request("POST", "/v1/branches", Some(&body), &[])),
        (409, "branch_exists".into())
    );
    let events = s.get("/v1/branches/shop@once");
    assert_eq!(events["branch"], "once");
}

#[test]
fn only_this_user_may_use_the_socket_and_tcp_needs_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Served::prepare(dir.path(), 10);
    let token = dir.path().join("token");
    std::fs::write(&token, "sekrit-token\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    s.start(&["--listen", &addr, "--token-file", token.to_str().unwrap()]);
    let sock_mode = std::fs::metadata(&s.socket).unwrap().permissions().mode() & 0o777;
    let dir_mode = std::fs::metadata(s.socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!((sock_mode, dir_mode), (0o600, 0o700));

    // Another uid, let through the file modes on purpose, is refused by its credentials.
    std::fs::set_permissions(
        s.socket.parent().unwrap(),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(&s.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let as_nobody = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import os, socket, sys\nos.setgid(65534); os.setuid(65534)\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ns.sendall(b'GET /v1/databases HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n')\nprint(s.recv(65536).decode().split('\\r\\n')[0])",
        )
        .arg(&s.socket)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&as_nobody.stdout);
    assert!(
        said.contains("403"),
        "{said}{}",
        String::from_utf8_lossy(&as_nobody.stderr)
    );

    // TCP: no token, a wrong one, the right one.
    let tcp = |auth: Option<&str>| -> String {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        let header = auth
            .map(|a| format!("Authorization: Bearer {a}\r\n"))
            .unwrap_or_default();
        write!(
            c,
            "GET /v1/databases HTTP/1.1\r\nHost: x\r\n{header}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    };
    let status = |out: &str| out.lines().next().unwrap_or_default().to_string();
    let missing = tcp(None);
    assert!(status(&missing).contains("401"), "{missing}");
    assert!(missing.contains("a bearer token is required"), "{missing}");
    let wrong = tcp(Some("wrong-token!"));
    assert!(status(&wrong).contains("401"), "{wrong}");
    assert!(
        wrong.contains("invalid token") && !wrong.contains("is required"),
        "a wrong token is not answered as a missing one: {wrong}"
    );
    assert!(status(&tcp(Some("sekrit-token"))).contains("200"));
    // Exports name daemon-host paths: never over TCP.
    {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        let body = r#"{"target":"shop","path":"/tmp/x.db"}"#;
        write!(c, "POST /v1/export HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekrit-token\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    }
    let metrics = s.client().raw("GET", "/metrics", None, &[]).unwrap();
    let text = metrics.body.as_str().unwrap().to_string();
    for reason in ["other_uid", "missing_token", "wrong_token"] {
        assert!(
            text.contains(&format!(
                "scion_refused_requests_total{{reason=\"{reason}\"}} 1"
            )),
            "{reason} not counted:\n{text}"
        );
    }
}

#[test]
fn tcp_without_a_token_or_on_a_public_address_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::prepare(dir.path(), 1);
    let out = s
        .cmd(&["serve", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token-file"));
    let token = dir.path().join("t");
    std::fs::write(&token, "x").unwrap();
    let out = s
        .cmd(&[
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--token-file",
            token.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-remote"));
}

#[test]
fn events_come_in_order_and_replay_from_last_event_id() {
    let (_d, s) = served(10, &[]);
    s.post("/v1/branches", json!({"source": "shop", "name": "a"}))
        .unwrap();
    s.post("/v1/branches/shop@a/checkpoints", json!({"name": "one"}))
        .unwrap();
    s.client()
        .request("DELETE", "/v1/branches/shop@a", None, &[])
        .unwrap();
    let mut seen = Vec::new();
    s.client()
        .events(Some(0), true, |e| {
            seen.push((e.id.unwrap(), e.event));
            seen.len() < 3
        })
        .unwrap();
    let kinds: Vec<&str> = seen.iter().map(|(_, k)| k.as_str()).collect();
    assert_eq!(kinds, ["forked", "checkpointed", "destroyed"]);
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0));
    // Replay after the first: the second and third, then what happens live.
    let first = seen[0].0;
    let live = std::thread::spawn({
        let socket = s.socket.clone();
        move || {
            let mut got = Vec::new();
            scion_daemon::client::DaemonClient::new(socket)
                .events(Some(first), true, |e| {
                    got.push(e.event);
                    got.len() < 3
                })
                .unwrap();
            got
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    s.post("/v1/branches", json!({"source": "shop", "name": "b"}))
        .unwrap();
    assert_eq!(
        live.join().unwrap(),
        ["checkpointed", "destroyed", "forked"]
    );
    // The Last-Event-ID header works as ?since= does.
    let raw = s
        .client()
        .raw("GET", "/healthz", None, &[("last-event-id", "2")])
        .unwrap();
    assert_eq!(raw.status, 200);
}

#[test]
fn the_openapi_document_is_served_and_names_exactly_the_routes() {
    let (_d, s) = served(5, &[]);
    let served_doc = s
        .client()
        .raw("GET", "/v1/openapi.json", None, &[])
        .unwrap();
    let checked_in: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/openapi.json")).unwrap();
    assert_eq!(served_doc.body, checked_in);
    let paths = checked_in["paths"].as_object().unwrap();
    // Every route the router has is documented...
    let router = include_str!("../../scion-daemon/src/api/mod.rs");
    let mut routed = Vec::new();
    for line in router.lines() {
        let line = line.trim();
        if let Some(rest) = line
            .strip_prefix(".route(\"")
            .or_else(|| line.strip_prefix('"').filter(|_| line.ends_with("\",")))
        {
            let p = rest.split('"').next().unwrap();
            if p.starts_with('/') {
                routed.push(p.to_string());
            }
        }
    }
    assert!(routed.len() >= 20, "{routed:?}");
    for p in &routed {
        assert!(
            paths.contains_key(p),
            "route {p} is not in docs/openapi.json"
        );
    }
    // ...and every documented operation reaches a handler (no 404 for the route itself,
    // no 405 for the method).
    for (path, ops) in paths {
        assert!(routed.contains(path), "{path} is documented but not routed");
        let concrete = common::concrete_route(path);
        for method in ops.as_object().unwrap().keys() {
            let m = method.to_uppercase();
            if path == "/v1/events" {
                continue; // a stream: exercised by the events tests
            }
            let r = s.client().raw(&m, &concrete, None, &[]).unwrap();
            assert_ne!(r.status, 405, "{m} {path}");
            assert_ne!(r.body["error"]["code"], "no_such_endpoint", "{m} {path}");
        }
    }
}

/// The curl examples of docs/daemon.md, run as written.
#[test]
fn the_curl_examples_in_the_docs_run_as_written() {
    let (_d, s) = served(10, &[]);
    let doc = include_str!("../../../docs/daemon.md");
    let blocks: Vec<&str> = doc
        .split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .filter(|b| b.starts_with("# run\n"))
        .collect();
    assert!(!blocks.is_empty());
    for block in blocks {
        let out = std::process::Command::new("bash")
            .arg("-euo")
            .arg("pipefail")
            .arg("-c")
            .arg(block)
            .current_dir(&s.dir)
            .env("SCION_STORE", &s.store)
            .env("SCION_SOCKET", &s.socket)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{block}\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!stdout.contains("\"error\":{"), "{stdout}");
        // Every JSON answer ends its line: the next answer starts on a line of its own.
        for expect in [
            "\"databases\":[\"shop\"]}\n{",
            "\"branch\":\"shop@try-curl\"",
            "shop@t-curl@one-row",
            "\"destroyed\":true",
            "scion_sessions_open 0",
            "event: session_opened",
        ] {
            assert!(stdout.contains(expect), "{expect} missing from:\n{stdout}");
        }
    }
}

/// A `scion config` made by another process while the daemon runs reaches the daemon
/// within a janitor round: its status reports the new page compression, and its log says
/// so. (That a handle which reloaded commits the new way is the engine's
/// `a_handle_that_reloads_its_settings_commits_the_new_way`.)
#[test]
fn the_daemon_follows_a_page_compression_change_made_while_it_runs() {
    let (_d, s) = served(10, &["--janitor-every", "200ms", "--gc-every", "never"]);
    assert_eq!(s.get("/v1/status")["page_compression"], "lz4");
    s.scion(&["config", "--page-compression", "none"]);
    let asked = std::time::Instant::now();
    while s.get("/v1/status")["page_compression"] != "none" {
        assert!(
            asked.elapsed() < Duration::from_secs(30),
            "the daemon never followed the change: {}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        s.log().contains("the store's page compression changed"),
        "{}",
        s.log()
    );
}

/// Without `XDG_RUNTIME_DIR` the socket goes under the user's state directory, which no
/// other user can make first; a socket directory others can write to is refused by the
/// daemon, and a client says so instead of "No such file or directory".
#[test]
fn the_default_socket_is_in_a_directory_no_other_user_can_squat() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::prepare(dir.path(), 3);
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let cmd = |args: &[&str]| {
        let mut c = s.cmd(args);
        c.env_remove("SCION_SOCKET")
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("XDG_STATE_HOME")
            .env("HOME", &home);
        c
    };
    // No daemon has run yet: the client names that, once.
    let out = cmd(&["session", "list"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{err}");
    assert!(err.contains(".local/state/scion/run"), "{err}");
    assert!(err.contains("no daemon has listened here"), "{err}");
    assert_eq!(err.matches("os error").count(), 0, "{err}");
    // A squatted (world-writable) socket directory: serve refuses it, the client says why.
    let run = home.join(".local/state/scion/run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
    let serve = cmd(&["serve"]).output().unwrap();
    assert!(!serve.status.success());
    assert!(
        String::from_utf8_lossy(&serve.stderr).contains("writable by others"),
        "{}",
        String::from_utf8_lossy(&serve.stderr)
    );
    let out = cmd(&["session", "list"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("writable by other users"), "{err}");
    // A private directory: serve listens there and the client finds it.
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut child = cmd(&["serve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let listed = loop {
        let out = cmd(&["session", "list"]).output().unwrap();
        if out.status.success() || started.elapsed() > std::time::Duration::from_secs(30) {
            break out;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(listed.status.success(), "{listed:?}");
    let sockets: Vec<_> = std::fs::read_dir(&run).unwrap().flatten().collect();
    assert_eq!(sockets.len(), 1, "{sockets:?}");
}

/// `scion events` prints what the daemon kept and exits; `--follow` keeps the stream open.
#[test]
fn events_print_what_is_kept_and_exit_unless_followed() {
    let (_d, s) = served(5, &[]);
    s.post("/v1/branches", json!({"source": "shop", "name": "e1"}))
        .unwrap();
    let out = s
        .cmd(&["events"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let out = out.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "it ended by itself"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.contains(" forked ")), "{text}");
    let mut follow = s
        .cmd(&["events", "--follow"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        follow.try_wait().unwrap().is_none(),
        "--follow keeps the stream open"
    );
    follow.kill().unwrap();
    let _ = follow.wait();
}
