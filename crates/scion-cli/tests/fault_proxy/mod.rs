//! An HTTP proxy between scion and an object-storage server that injects faults: a 500,
//! a cut body, a stall, or a ref write that lands but whose answer is lost. It forwards to
//! the one upstream it is given, on loopback, and serves one request per connection.
//! Each test binary that includes it uses some of the faults.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Between scion and the server: every `every`-th request gets a fault.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    ServerError,
    CutBody,
    Stall,
    /// Every other PUT of a ref reaches the store, but the client is told 500: its retry
    /// then meets the precondition its own write changed (the lost-answer case).
    LoseRefPutAnswers,
}

/// Flips on each ref PUT under [`Fault::LoseRefPutAnswers`]: odd ones lose their answer.
static LOSE_NEXT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

pub fn proxy(upstream: String, fault: Fault, every: usize) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let counter = count.clone();
    let up = upstream.trim_start_matches("http://").to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            let up = up.clone();
            std::thread::spawn(move || {
                let _ = serve(
                    conn,
                    &up,
                    if n.is_multiple_of(every) {
                        Some(fault)
                    } else {
                        None
                    },
                );
            });
        }
    });
    (format!("http://{addr}"), count)
}

/// Read one HTTP message (head + Content-Length body) from `s`. The answer to a HEAD
/// request names the length of a body it does not carry: `bodiless` reads the head alone
/// (waiting for that body would last until the server drops the connection).
fn read_message(s: &mut TcpStream, bodiless: bool) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            let len = if bodiless { 0 } else { len };
            while buf.len() < end + 4 + len {
                let n = s.read(&mut tmp)?;
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            return Ok(buf);
        }
        let n = s.read(&mut tmp)?;
        if n == 0 {
            return Ok(buf);
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

fn serve(mut client: TcpStream, upstream: &str, fault: Option<Fault>) -> std::io::Result<()> {
    let request = read_message(&mut client, false)?;
    if request.is_empty() {
        return Ok(());
    }
    // One request per connection: ask for the connection to close.
    let text = String::from_utf8_lossy(&request);
    let head_end = text.find("\r\n\r\n").unwrap_or(text.len());
    let request = [
        text[..head_end].replace("keep-alive", "close").as_bytes(),
        &request[head_end..],
    ]
    .concat();
    match fault {
        Some(Fault::ServerError) => {
            client.write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
            return Ok(());
        }
        Some(Fault::Stall) => {
            std::thread::sleep(Duration::from_millis(1500));
            return Ok(());
        }
        _ => {}
    }
    let mut server = TcpStream::connect(upstream)?;
    server.write_all(&request)?;
    let is_head = request.starts_with(b"HEAD ");
    let response = closing(read_message(&mut server, is_head)?);
    if let Some(Fault::LoseRefPutAnswers) = fault {
        let line = text.lines().next().unwrap_or("");
        if line.starts_with("PUT ")
            && line.contains("/refs/")
            && LOSE_NEXT.fetch_xor(true, Ordering::SeqCst)
        {
            client.write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
            return Ok(());
        }
    }
    if let Some(Fault::CutBody) = fault {
        let head_end = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|p| p + 4)
            .unwrap_or(0);
        let body = response.len() - head_end;
        client.write_all(&response[..head_end + body / 2])?;
        return Ok(());
    }
    client.write_all(&response)
}

/// `response` with its head saying the connection closes: the proxy serves one request
/// per connection, and a server that answers "keep-alive" anyway (Azurite does) would have
/// the client send its next request down a connection the proxy has closed.
fn closing(response: Vec<u8>) -> Vec<u8> {
    let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
        return response;
    };
    let head = String::from_utf8_lossy(&response[..end]);
    let mut lines: Vec<&str> = head
        .split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .collect();
    lines.push("Connection: close");
    [lines.join("\r\n").as_bytes(), &response[end..]].concat()
}

/// The lost-answer round, on any store: with `env` reaching the store at `endpoint_var`,
/// seed `shop`, then through a proxy that loses the answer of every other ref write (the
/// write lands, the client is told 500), fork, check out, change, checkpoint and lease
/// four branches. Read straight from the store afterwards, every head holds its commit and
/// the store verifies: a lost answer is decided by reading the ref back, never taken for a
/// conflict that deletes the new version's data.
pub fn commits_survive_lost_ref_write_answers(
    s: &crate::common::Session,
    mut env: Vec<(&'static str, String)>,
    endpoint_var: &str,
) {
    use crate::common::{seed, sqlite};
    seed(&s.path("shop.db"), 2000);
    s.ok_with(&env, &["init"]);
    s.ok_with(&env, &["create", "shop", "--from", "shop.db"]);
    let direct = env.clone();
    let real = endpoint_of(&direct, endpoint_var);
    let (faulty, count) = proxy(real, Fault::LoseRefPutAnswers, 1);
    for (k, v) in env.iter_mut() {
        if *k == endpoint_var {
            *v = faulty.clone();
        }
    }
    for i in 0..4 {
        let b = format!("shop@t{i}");
        s.ok_with(&env, &["fork", "shop", &format!("t{i}")]);
        let path = s.ok_with(&env, &["checkout", &b]);
        sqlite(
            Path::new(path.trim()),
            &format!("UPDATE items SET price = {} WHERE id <= 100", 1_000_000 + i),
        );
        s.ok_with(&env, &["checkpoint", &b, "c"]);
        for step in ["acquire", "release"] {
            s.ok_with(&env, &["--holder", "agent", "lease", step, &b]);
        }
    }
    assert!(
        count.load(Ordering::SeqCst) > 0,
        "requests went through the proxy"
    );
    for i in 0..4 {
        s.ok_with(
            &direct,
            &["export", &format!("shop@t{i}"), "v.db", "--force"],
        );
        let q = format!("SELECT count(*) FROM items WHERE price = {}", 1_000_000 + i);
        assert_eq!(sqlite(&s.path("v.db"), &q), "Integer(100)");
    }
    let out = s.ok_with(&direct, &["verify"]);
    assert!(out.trim_end().ends_with("ok"), "{out}");
}

/// The fault rounds, on any store: for a 500 on every 3rd request, a body cut in half on
/// every 4th and a stall past the client's timeout (`timeout_var`, set to 1 s) on every 5th,
/// a fresh `session()` forks, checks out, changes and checkpoints branches through a proxy
/// in front of the store at `endpoint_var`. Each command succeeds or fails with a typed
/// exit code; read straight from the store afterwards, every branch and checkpoint that
/// exists exports.
pub fn faults_fail_or_retry_cleanly(
    session: impl Fn() -> (crate::common::Session, Vec<(&'static str, String)>),
    endpoint_var: &str,
    timeout_var: &'static str,
) {
    use crate::common::{seed, sqlite};
    for (fault, every) in [
        (Fault::ServerError, 3),
        (Fault::CutBody, 4),
        (Fault::Stall, 5),
    ] {
        let (s, mut env) = session();
        seed(&s.path("shop.db"), 3000);
        s.ok_with(&env, &["init"]);
        s.ok_with(&env, &["create", "shop", "--from", "shop.db"]);
        let direct = env.clone();
        let real = endpoint_of(&direct, endpoint_var);
        let (faulty, count) = proxy(real, fault, every);
        for (k, v) in env.iter_mut() {
            if *k == endpoint_var {
                *v = faulty.clone();
            }
        }
        env.push((timeout_var, "1s".into()));
        let mut outcomes = Vec::new();
        let rounds = if matches!(fault, Fault::Stall) { 2 } else { 5 };
        for i in 0..rounds {
            let b = format!("b{i}");
            let steps: Vec<Vec<String>> = vec![
                vec!["fork".into(), "shop".into(), b.clone()],
                vec!["checkout".into(), format!("shop@{b}")],
            ];
            for args in steps {
                let a: Vec<&str> = args.iter().map(String::as_str).collect();
                let r = s.run_with(&env, &a);
                // Success, or a typed failure: transient (9), store error (1), conflict/not found.
                assert!(
                    [0, 1, 3, 4, 5, 9].contains(&r.code),
                    "{fault:?} {a:?}: exit {} {}",
                    r.code,
                    r.stderr
                );
                outcomes.push(r.code);
                if a[0] == "checkout" && r.code == 0 {
                    sqlite(
                        Path::new(r.stdout.trim()),
                        &format!("UPDATE items SET price = {i} WHERE id = 1"),
                    );
                    let r = s.run_with(&env, &["checkpoint", &format!("shop@{b}"), "c"]);
                    assert!(
                        [0, 1, 3, 4, 5, 6, 9].contains(&r.code),
                        "{fault:?} checkpoint: exit {} {}",
                        r.code,
                        r.stderr
                    );
                    outcomes.push(r.code);
                }
            }
        }
        assert!(
            count.load(Ordering::SeqCst) > 0,
            "requests went through the proxy"
        );
        // Through the real endpoint: every branch and checkpoint that exists verifies.
        let out = s.ok_with(&direct, &["--json", "branches", "shop"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        for b in v["branches"].as_array().unwrap() {
            let name = b["branch"].as_str().unwrap();
            s.ok_with(
                &direct,
                &["export", &format!("shop@{name}"), "v.db", "--force"],
            );
            if b["checkpoints"].as_u64().unwrap() > 0 {
                s.ok_with(
                    &direct,
                    &["export", &format!("shop@{name}@c"), "v.db", "--force"],
                );
            }
        }
        eprintln!("{fault:?} every {every}: exit codes {outcomes:?}");
    }
}

/// The value of `var` in a session's environment.
fn endpoint_of(env: &[(&'static str, String)], var: &str) -> String {
    env.iter()
        .find(|(k, _)| *k == var)
        .map(|(_, v)| v.clone())
        .expect("the session names the store's endpoint")
}
