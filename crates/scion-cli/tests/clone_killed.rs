//! `scion clone` killed with SIGKILL at random moments: the store it leaves is either whole
//! or says it is unfinished (`verify`), and the same clone run again finishes it.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn a_killed_clone_says_it_is_unfinished_and_the_same_clone_finishes_it() {
    let seed_value = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill -9 clone seed {seed_value}");
    let mut rng = Rng(seed_value);
    let s = Session::new();
    seed(&s.path("shop.db"), 3000);
    s.ok(&["--store", "src", "init"]);
    s.ok(&["--store", "src", "create", "shop", "--from", "shop.db"]);
    let mut want = vec!["main".to_string()];
    for i in 0..6 {
        let b = format!("b{i}");
        s.ok(&["--store", "src", "fork", "shop", &b]);
        s.ok(&[
            "--store",
            "src",
            "sql",
            &format!("shop@{b}"),
            &format!(
                "UPDATE items SET price = price + {i} WHERE id % 3 = {}",
                i % 3
            ),
        ]);
        want.push(b);
    }
    want.sort();
    let started = Instant::now();
    s.ok(&["clone", "src", "whole"]);
    let span = started.elapsed().max(Duration::from_millis(40));
    let branches = |dir: &str| -> Vec<String> {
        let v = s.json(&["--store", dir, "branches", "shop"]);
        let mut names: Vec<String> = v["branches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["branch"].as_str().unwrap().to_string())
            .filter(|b| !b.contains('~'))
            .collect();
        names.sort();
        names
    };
    assert_eq!(branches("whole/.scion"), want);
    let (mut unfinished, mut finished, mut never_began) = (0, 0, 0);
    for round in 0..30 {
        let dir = format!("c{round}");
        let mut child = s
            .cmd(&["clone", "src", &dir])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.next() % span.as_micros() as u64));
        let _ = child.kill();
        let done = child.wait().unwrap().success();
        let store = format!("{dir}/.scion");
        let path = s.path(&store);
        if !path.join("scion.json").exists() {
            never_began += 1;
        } else if done {
            finished += 1;
            s.ok(&["--store", &store, "verify"]);
        } else {
            let v = s.run(&["--store", &store, "verify"]);
            if path.join("clone").join("unfinished").exists() {
                unfinished += 1;
                assert_ne!(v.code, 0, "round {round}: an unfinished clone verified");
                assert!(
                    v.stdout.contains("did not finish") || v.stderr.contains("did not finish"),
                    "round {round}: {}{}",
                    v.stdout,
                    v.stderr
                );
            } else {
                // Killed after its last step: whole.
                finished += 1;
                assert_eq!(v.code, 0, "round {round}: {}{}", v.stdout, v.stderr);
            }
        }
        // The same clone again, into what the killed one left.
        if path.join("scion.json").exists() && path.join("clone").join("unfinished").exists() {
            s.ok(&["clone", "src", &dir]);
        } else if !path.join("scion.json").exists() {
            // Killed before it made the store: what it left is no store, and no obstacle.
            s.ok(&["clone", "src", &dir]);
        }
        assert!(!path.join("clone").join("unfinished").exists());
        s.ok(&["--store", &store, "verify"]);
        assert_eq!(branches(&store), want, "round {round}");
    }
    eprintln!(
        "30 kills: {unfinished} left an unfinished clone (finished by a rerun), {finished} after it ended, {never_began} before it made the store"
    );
}
