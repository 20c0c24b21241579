//! The token file under attack: concurrent `scion token` processes, a file put back with
//! its old mtime, one others may write, tokens revoked while a stream is open, and tokens
//! that are no tokens (empty, nameless, expired when made).

mod served;
mod token_rig;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Stdio};

use served::Served;
use token_rig::Rig;

fn names_in(file: &std::path::Path) -> BTreeSet<String> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    v["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn token_create_and_revoke_from_4_processes_200_rounds_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::prepare(dir.path(), 1);
    let file = dir.path().join("cfg").join("tokens.json");
    let f = file.to_str().unwrap();
    const ROUNDS: usize = 200;
    for i in 0..ROUNDS {
        let name = format!("old-{i}");
        s.scion(&[
            "token",
            "create",
            &name,
            "--grant",
            "shop:read",
            "--tokens",
            f,
        ]);
    }
    let spawn = |args: &[&str]| -> Child {
        s.cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (mut printed, mut revoked, mut failed) = (0, 0, Vec::new());
    for i in 0..ROUNDS {
        let (a, b, old) = (
            format!("new-{i}-a"),
            format!("new-{i}-b"),
            format!("old-{i}"),
        );
        let children = [
            spawn(&["token", "create", &a, "--grant", "shop:read", "--tokens", f]),
            spawn(&["token", "revoke", &old, "--tokens", f]),
            spawn(&[
                "token",
                "create",
                &b,
                "--grant",
                "shop@x-*:write",
                "--tokens",
                f,
            ]),
            spawn(&["token", "list", "--tokens", f]),
        ];
        for (k, c) in children.into_iter().enumerate() {
            let out = c.wait_with_output().unwrap();
            if !out.status.success() {
                failed.push(format!(
                    "round {i} process {k}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
                continue;
            }
            match k {
                0 | 2 => {
                    assert!(String::from_utf8_lossy(&out.stdout).starts_with("scion_"));
                    printed += 1;
                }
                1 => revoked += 1,
                _ => {}
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
    let kept = names_in(&file);
    let lost: Vec<String> = (0..ROUNDS)
        .flat_map(|i| [format!("new-{i}-a"), format!("new-{i}-b")])
        .filter(|n| !kept.contains(n))
        .collect();
    let revived: Vec<&String> = kept.iter().filter(|n| n.starts_with("old-")).collect();
    eprintln!(
        "{ROUNDS} rounds: {printed} tokens printed, {} kept; {revoked} revoked, {} still there",
        printed - lost.len(),
        revived.len()
    );
    assert!(lost.is_empty(), "printed but not kept: {lost:?}");
    assert!(revived.is_empty(), "revoked but still kept: {revived:?}");
    assert_eq!((printed, revoked), (2 * ROUNDS, ROUNDS));
}

#[test]
fn a_token_file_put_back_with_its_old_mtime_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::new(dir.path(), &[]);
    let t = rig.token("ci", &["shop:read"], None);
    let (st, _) = rig.call(&t, "GET", "/v1/branches/shop@main", None);
    assert_eq!(st, 200);
    // Revoke by putting back an earlier copy of the file, with the mtime it had then.
    let before = std::fs::read(&rig.tokens).unwrap();
    let mtime = std::fs::metadata(&rig.tokens).unwrap().modified().unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&before).unwrap();
    v["tokens"] = serde_json::json!([]);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&rig.tokens)
        .unwrap();
    serde_json::to_writer(&f, &v).unwrap();
    // Same size too, so only the ctime tells.
    let pad = before.len() - std::fs::metadata(&rig.tokens).unwrap().len() as usize;
    std::io::Write::write_all(&mut &f, " ".repeat(pad).as_bytes()).unwrap();
    f.set_modified(mtime).unwrap();
    drop(f);
    assert_eq!(
        std::fs::metadata(&rig.tokens).unwrap().modified().unwrap(),
        mtime
    );
    let (st, v) = rig.call(&t, "GET", "/v1/branches/shop@main", None);
    assert_eq!(st, 401, "{v}");
}

#[test]
fn a_token_file_others_may_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::new(dir.path(), &[]);
    let t = rig.token("ci", &["shop:read"], None);
    std::fs::set_permissions(&rig.tokens, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (st, v) = rig.call(&t, "GET", "/v1/branches/shop@main", None);
    assert_eq!(st, 401, "{v}");
    let out = rig
        .s
        .cmd(&["token", "list", "--tokens", rig.tokens.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("chmod 600"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::set_permissions(&rig.tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (st, _) = rig.call(&t, "GET", "/v1/branches/shop@main", None);
    assert_eq!(st, 200);
}

#[test]
fn an_events_stream_ends_when_its_token_is_revoked() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::new(dir.path(), &[]);
    let t = rig.token("watcher", &["*:admin"], None);
    let mut conn = std::os::unix::net::UnixStream::connect(&rig.s.socket).unwrap();
    write!(
        conn,
        "GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {t}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.contains("200"), "{status}");
    rig.s.scion(&[
        "token",
        "revoke",
        "watcher",
        "--tokens",
        rig.tokens.to_str().unwrap(),
    ]);
    // An event after the revocation is not delivered: the stream ends.
    rig.s.scion(&["fork", "shop", "after-revoke"]);
    let mut rest = String::new();
    let started = std::time::Instant::now();
    loop {
        // Keep-alive comments arrive every 15 s: a stream left open reads forever.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the stream stayed open after the revocation:\n{rest}"
        );
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => rest.push_str(&line),
            Err(e) => panic!("the stream stayed open after the revocation: {e}\n{rest}"),
        }
    }
    assert!(!rest.contains("after-revoke"), "{rest}");
}

#[test]
fn an_empty_token_file_or_token_is_no_token() {
    let dir = tempfile::tempdir().unwrap();
    let s = Served::prepare(dir.path(), 1);
    let empty = dir.path().join("empty.token");
    std::fs::write(&empty, "\n").unwrap();
    let out = s
        .cmd(&["serve", "--token-file", empty.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is empty"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = dir.path().join("tokens.json");
    let f = file.to_str().unwrap();
    for (args, says) in [
        (
            vec!["token", "create", "", "--grant", "shop:read"],
            "needs a name",
        ),
        (
            vec!["token", "create", "z", "--grant", "shop:read", "--ttl", "0"],
            "expired when made",
        ),
    ] {
        let mut all = args.clone();
        all.extend(["--tokens", f]);
        let out = s.cmd(&all).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn an_empty_bearer_or_page_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::new(dir.path(), &[]);
    for (path, auth) in [
        ("/v1/databases", Some("Bearer ")),
        ("/ui?token=", None),
        ("/ui?token=&x=1", None),
    ] {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("authorization", a)).into_iter().collect();
        let r = rig.s.client().raw("GET", path, None, &headers).unwrap();
        assert_eq!(r.status, 401, "{path} {auth:?}: {}", r.body);
    }
}
