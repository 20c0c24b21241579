//! Real processes racing one branch, and SIGKILL during gc.

mod common;

use std::process::{Child, Stdio};
use std::time::Duration;

use common::*;

fn spawn(s: &Session, args: &[&str]) -> Child {
    s.cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn verify_all(s: &Session) {
    let out = s.ok(&["--json", "branches", "shop"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for b in v["branches"].as_array().unwrap() {
        let name = b["branch"].as_str().unwrap();
        s.ok(&["export", &format!("shop@{name}"), "verify.db", "--force"]);
    }
}

#[test]
fn two_processes_racing_one_branch() {
    let s = Session::new();
    seed(&s.path("shop.db"), 3000);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "y"]);
    let py = s.ok(&["checkout", "shop@y"]);
    sqlite(
        std::path::Path::new(py.trim()),
        "DELETE FROM items WHERE id > 1000",
    );
    s.ok(&["checkpoint", "shop@y", "small"]);
    let races: [(&[&str], &[&str]); 4] = [
        (
            &["rollback", "shop@x", "--to", "c1", "--force"],
            &["promote", "shop@y", "--onto", "x", "--force"],
        ),
        (
            &["checkpoint", "shop@x", "n"],
            &["rollback", "shop@x", "--to", "fork", "--force"],
        ),
        (
            &["destroy", "shop@x", "--force"],
            &["promote", "shop@y", "--onto", "x", "--force"],
        ),
        (
            &["checkpoint", "shop@x", "n"],
            &["destroy", "shop@x", "--force"],
        ),
    ];
    for (round, (a, b)) in races.iter().cycle().take(12).enumerate() {
        let _ = s.run(&["destroy", "shop@x", "--force"]);
        s.ok(&["fork", "shop", "x"]);
        let px = s.ok(&["checkout", "shop@x"]);
        let px = std::path::PathBuf::from(px.trim());
        sqlite(
            &px,
            &format!("UPDATE items SET price = {} WHERE id = 1", 5000 + round),
        );
        s.ok(&["checkpoint", "shop@x", "c1"]);
        sqlite(
            &px,
            &format!("UPDATE items SET price = {} WHERE id = 2", 6000 + round),
        );
        let (ca, cb) = (spawn(&s, a), spawn(&s, b));
        let (oa, ob) = (
            ca.wait_with_output().unwrap(),
            cb.wait_with_output().unwrap(),
        );
        let codes = [oa.status.code().unwrap(), ob.status.code().unwrap()];
        assert!(
            codes.contains(&0),
            "round {round} {a:?} vs {b:?}: nobody won: {codes:?}\n{}\n{}",
            String::from_utf8_lossy(&oa.stderr),
            String::from_utf8_lossy(&ob.stderr)
        );
        for (code, out) in [(codes[0], &oa), (codes[1], &ob)] {
            // 0 ok, 3 gone (destroyed by the winner), 5 conflict, 6 refused (busy checkout).
            assert!(
                [0, 3, 5, 6].contains(&code),
                "round {round}: exit {code}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        verify_all(&s);
    }
}

#[test]
fn kill_9_during_gc_leaves_a_consistent_store() {
    let s = Session::new();
    seed(&s.path("shop.db"), 20_000);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    for round in 0..6 {
        // Make garbage: forks with their own commits, then destroyed.
        for i in 0..4 {
            let b = format!("g{round}-{i}");
            s.ok(&["fork", "shop", &b]);
            let p = s.ok(&["checkout", &format!("shop@{b}")]);
            sqlite(
                std::path::Path::new(p.trim()),
                &format!("UPDATE items SET price = {i} WHERE id % {} = 0", i + 2),
            );
            s.ok(&["checkpoint", &format!("shop@{b}"), "c"]);
            s.ok(&["destroy", &format!("shop@{b}")]);
        }
        let mut child = spawn(&s, &["gc", "--grace", "0", "--force"]);
        std::thread::sleep(Duration::from_millis(3 + round * 4));
        let _ = child.kill();
        let _ = child.wait();
        verify_all(&s);
        s.ok(&["gc", "--grace", "0", "--force"]);
        let v: serde_json::Value = serde_json::from_str(&s.ok(&["--json", "verify"])).unwrap();
        assert_eq!(
            v["unreachable_bytes"], 0,
            "a full gc after the kill reclaims everything dead"
        );
        verify_all(&s);
    }
}

#[test]
fn eight_processes_checking_out_forking_and_listing_the_same_branches() {
    // The pattern of a harness with many workers reconnecting to each other's branches:
    // every command must succeed, whatever the others are doing at the same moment.
    let s = Session::new();
    seed(&s.path("shop.db"), 2000);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    let shared = ["a", "b", "c"];
    for b in shared {
        s.ok(&["fork", "shop", b]);
    }
    const WORKERS: usize = 8;
    const ROUNDS: usize = 12;
    let failures = std::sync::Mutex::new(Vec::new());
    let runs = std::sync::atomic::AtomicUsize::new(0);
    let barrier = std::sync::Barrier::new(WORKERS);
    std::thread::scope(|scope| {
        for w in 0..WORKERS {
            let (s, failures, runs, barrier) = (&s, &failures, &runs, &barrier);
            scope.spawn(move || {
                for round in 0..ROUNDS {
                    let target = format!("shop@{}", shared[(w + round) % shared.len()]);
                    let mine = format!("w{w}r{round}");
                    // A branch nobody has checked out yet, which all eight check out at
                    // once: eight writers of one checkout file.
                    let fresh = format!("fresh{round}");
                    if w == 0 {
                        s.ok(&["fork", "shop", &fresh]);
                    }
                    barrier.wait();
                    let fresh = format!("shop@{fresh}");
                    let steps: [Vec<&str>; 6] = [
                        vec!["checkout", &fresh],
                        vec!["checkout", &target],
                        vec!["fork", &target, &mine],
                        vec!["checkout", "--json", &target],
                        vec!["--json", "branches", "shop"],
                        vec!["status"],
                    ];
                    for args in &steps {
                        runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let out = s.cmd(args).output().unwrap();
                        if !out.status.success() {
                            failures.lock().unwrap().push(format!(
                                "{args:?}: exit {:?}: {}",
                                out.status.code(),
                                String::from_utf8_lossy(&out.stderr)
                            ));
                        }
                    }
                    // Every worker reads what the others checked out.
                    let path = s.ok(&["checkout", &target]);
                    let n = sqlite(
                        std::path::Path::new(path.trim()),
                        "SELECT count(*) FROM items",
                    );
                    if n.trim() != "Integer(2000)" {
                        failures.lock().unwrap().push(format!("{target}: {n} rows"));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    let runs = runs.into_inner();
    assert!(
        failures.is_empty(),
        "{} of {runs} commands failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(runs, WORKERS * ROUNDS * 6);
    s.ok(&["verify"]);
}
