//! Branch lifecycle in the engine: races between head moves, GC racing forks and
//! checkpoints, TTL reaping, and costs of rollback and promote.

mod common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::*;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::{CoreError, DbName, EngineError, LeaseChange, Scion};
use scion_store::{CountingBackend, LocalBackend};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Checkpoint,
    Rollback,
    Promote,
    Destroy,
}

fn run_op(s: &Scion, op: Op, round: usize) -> Result<(), CoreError> {
    let force = MoveOptions {
        force: true,
        ..Default::default()
    };
    match op {
        Op::Checkpoint => s
            .checkpoint(
                &br("shop@x"),
                &format!("n{round}").parse().unwrap(),
                Default::default(),
            )
            .map(drop),
        Op::Rollback => s
            .rollback(&br("shop@x"), &"c1".parse().unwrap(), &force)
            .map(drop),
        Op::Promote => s
            .promote(&br("shop@y"), &"x".parse().unwrap(), &force)
            .map(drop),
        Op::Destroy => s.destroy(&br("shop@x"), true).map(drop),
    }
}

/// Two "processes" (separate engine instances) race two head moves of one branch from
/// the same state: at least one wins, a loser gets a typed conflict (never a silent
/// no-op), and the store verifies afterwards.
#[test]
fn racing_head_moves_have_one_winner_and_lose_nothing() {
    let ops = [Op::Checkpoint, Op::Rollback, Op::Promote, Op::Destroy];
    for (i, a) in ops.iter().enumerate() {
        for b in &ops[i + 1..] {
            for round in 0..4 {
                let e = env();
                create_shop(&e, 400);
                e.scion
                    .engine()
                    .fork(&br("shop"), &"x".parse().unwrap(), Default::default())
                    .unwrap();
                e.scion
                    .engine()
                    .fork(&br("shop"), &"y".parse().unwrap(), Default::default())
                    .unwrap();
                let px = e.scion.checkout(&br("shop@x"), false).unwrap().path;
                exec(&px, "UPDATE items SET price = 1001 WHERE id = 1;");
                e.scion
                    .checkpoint(&br("shop@x"), &"c1".parse().unwrap(), Default::default())
                    .unwrap();
                exec(&px, "UPDATE items SET price = 1002 WHERE id = 2;");
                e.scion
                    .checkpoint(&br("shop@x"), &"c2".parse().unwrap(), Default::default())
                    .unwrap();
                exec(&px, "UPDATE items SET price = 1003 WHERE id = 3;");
                let py = e.scion.checkout(&br("shop@y"), false).unwrap().path;
                exec(&py, "DELETE FROM items WHERE id > 200;");
                e.scion
                    .checkpoint(&br("shop@y"), &"small".parse().unwrap(), Default::default())
                    .unwrap();
                let before = e.scion.engine().read_ref(&br("shop@x")).unwrap().0;
                let barrier = Arc::new(Barrier::new(2));
                let results: Vec<(Op, Result<(), CoreError>)> = std::thread::scope(|scope| {
                    let hs: Vec<_> = [*a, *b]
                        .into_iter()
                        .map(|op| {
                            let s = e.reopen();
                            let barrier = barrier.clone();
                            scope.spawn(move || {
                                barrier.wait();
                                (op, run_op(&s, op, round))
                            })
                        })
                        .collect();
                    hs.into_iter().map(|h| h.join().unwrap()).collect()
                });
                let wins = results.iter().filter(|(_, r)| r.is_ok()).count();
                assert!(wins >= 1, "{a:?} vs {b:?}: nobody won: {results:?}");
                for (op, r) in &results {
                    if let Err(err) = r {
                        assert!(
                            matches!(
                                err,
                                CoreError::Engine(EngineError::Conflict { .. })
                                    | CoreError::Engine(EngineError::BeingDestroyed { .. })
                                    | CoreError::Engine(EngineError::BranchNotFound { .. })
                                    | CoreError::Engine(EngineError::LeaseHeld { .. })
                                    | CoreError::CheckoutBusy { .. }
                            ),
                            "{op:?} lost with an untyped error: {err:?}"
                        );
                    }
                }
                // What the final state says must match a winner's effect.
                let s = e.reopen();
                let destroy_won = results
                    .iter()
                    .any(|(op, r)| *op == Op::Destroy && r.is_ok());
                match s.engine().read_ref(&br("shop@x")) {
                    Err(_) => assert!(
                        destroy_won,
                        "{a:?} vs {b:?}: x vanished without a winning destroy"
                    ),
                    Ok((after, _)) => {
                        assert!(
                            !destroy_won || results.iter().all(|(_, r)| r.is_ok()),
                            "x survived a lone winning destroy"
                        );
                        assert_ne!(
                            after.root, before.root,
                            "{a:?} vs {b:?}: a reported win left no trace: {results:?}"
                        );
                        e.dump_target(&s, "shop@x");
                    }
                }
                for (branch, _) in s
                    .engine()
                    .list_branches(&DbName::new("shop").unwrap())
                    .unwrap()
                {
                    e.dump_target(&s, &format!("shop@{branch}"));
                }
            }
        }
    }
}

#[test]
fn gc_racing_forks_and_checkpoints_never_leaves_a_dangling_branch() {
    let e = env();
    create_shop(&e, 1500);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::scope(|scope| {
        let gc_store = e.reopen();
        let stop2 = stop.clone();
        let gc = scope.spawn(move || {
            let mut runs = 0;
            while !stop2.load(std::sync::atomic::Ordering::SeqCst) {
                gc_store.gc(Duration::from_millis(300), true).unwrap();
                runs += 1;
            }
            runs
        });
        let s = e.reopen();
        let mut prev = "main".to_string();
        for i in 0..25 {
            let name = format!("g{i}");
            s.engine()
                .fork(
                    &br(&format!("shop@{prev}")),
                    &name.parse().unwrap(),
                    Default::default(),
                )
                .unwrap();
            let p = s
                .checkout(&br(&format!("shop@{name}")), false)
                .unwrap()
                .path;
            exec(
                &p,
                &format!("UPDATE items SET price = {i} WHERE id % 5 = {};", i % 5),
            );
            s.checkpoint(
                &br(&format!("shop@{name}")),
                &"c".parse().unwrap(),
                Default::default(),
            )
            .unwrap();
            if prev != "main" {
                s.destroy(&br(&format!("shop@{prev}")), true).unwrap();
            }
            prev = name;
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(gc.join().unwrap() > 0);
    });
    let s = e.reopen();
    s.gc(Duration::ZERO, true).unwrap();
    for (branch, _) in s
        .engine()
        .list_branches(&DbName::new("shop").unwrap())
        .unwrap()
    {
        e.dump_target(&s, &format!("shop@{branch}"));
        e.dump_target(&s, &format!("shop@{branch}@fork"));
    }
    let space = s.engine().space().unwrap();
    assert_eq!(
        space.reclaimable_bytes, 0,
        "gc --grace 0 with nothing running reclaims everything dead"
    );
}

#[test]
fn expired_branches_are_reaped_and_protected_or_leased_ones_never() {
    let e = env();
    create_shop(&e, 50);
    for name in ["short", "long", "kept", "leased"] {
        let ttl = if name == "long" { 3600 } else { 1 };
        e.scion
            .engine()
            .fork(
                &br("shop"),
                &name.parse().unwrap(),
                scion_core::ForkOptions {
                    ttl: Some(Duration::from_secs(ttl)),
                    ..Default::default()
                },
            )
            .unwrap();
    }
    e.scion
        .engine()
        .set_protected(&br("shop@kept"), true)
        .unwrap();
    let holder = e.reopen();
    holder
        .engine()
        .lease(
            &br("shop@leased"),
            holder.engine().holder(),
            LeaseChange::Acquire {
                ttl: Duration::from_secs(60),
            },
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(2100));
    let report = e.scion.gc(Duration::from_secs(3600), false).unwrap();
    assert_eq!(report.reaped, vec!["shop@short".to_string()]);
    let names: Vec<String> = e
        .scion
        .engine()
        .list_branches(&DbName::new("shop").unwrap())
        .unwrap()
        .into_iter()
        .map(|(b, _)| b.to_string())
        .collect();
    assert_eq!(names, vec!["kept", "leased", "long", "main"]);
}

#[test]
fn touch_restarts_the_ttl_clock() {
    let e = env();
    create_shop(&e, 50);
    e.scion
        .engine()
        .fork(
            &br("shop"),
            &"t".parse().unwrap(),
            scion_core::ForkOptions {
                ttl: Some(Duration::from_secs(2)),
                ..Default::default()
            },
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    e.scion.engine().touch(&br("shop@t"), None).unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    assert!(e
        .scion
        .gc(Duration::from_secs(3600), false)
        .unwrap()
        .reaped
        .is_empty());
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(
        e.scion.gc(Duration::from_secs(3600), false).unwrap().reaped,
        vec!["shop@t".to_string()]
    );
}

#[test]
fn rollback_and_promote_write_at_most_two_small_objects() {
    let e = env();
    create_shop(&e, 5000);
    e.scion
        .engine()
        .fork(&br("shop"), &"w".parse().unwrap(), Default::default())
        .unwrap();
    let p = e.scion.checkout(&br("shop@w"), false).unwrap().path;
    exec(&p, "DELETE FROM items WHERE id > 10;");
    e.scion
        .checkpoint(&br("shop@w"), &"small".parse().unwrap(), Default::default())
        .unwrap();
    std::fs::remove_file(&p).unwrap();
    let c = Arc::new(CountingBackend::new(Arc::new(
        LocalBackend::open(e.store_dir()).unwrap(),
    )));
    let s = e.reopen_with(c.clone());
    let before = c.counts();
    s.rollback(
        &br("shop@w"),
        &"fork".parse().unwrap(),
        &MoveOptions::default(),
    )
    .unwrap();
    let after = c.counts();
    assert_eq!(after.puts - before.puts, 2, "safety fork + ref");
    // The ref carries the branch's newest history entries (a bounded number of them).
    let history_bytes = |s: &Scion, b: &str| {
        serde_json::to_vec(&s.engine().read_ref(&br(b)).unwrap().0.history)
            .unwrap()
            .len() as u64
    };
    assert!(after.bytes_written - before.bytes_written <= 1024 + history_bytes(&s, "shop@w"));
    let before = c.counts();
    let promoted = s
        .promote(
            &br("shop@w"),
            &"main".parse().unwrap(),
            &MoveOptions {
                force: true,
                ..Default::default()
            },
        )
        .unwrap();
    let after = c.counts();
    assert_eq!(after.puts - before.puts, 2, "safety fork + ref");
    assert!(after.bytes_written - before.bytes_written <= 1024 + history_bytes(&s, "shop@main"));
    assert_eq!(e.dump_target(&s, "shop@main"), e.dump_target(&s, "shop@w"));
    assert_eq!(
        promoted.safety_fork.as_deref(),
        Some("shop@main-pre-promote-v1")
    );
    assert_eq!(
        e.dump_target(&s, "shop@main-pre-promote-v1"),
        e.dump_target(&s, "shop@main@init")
    );
}

#[test]
fn user_meta_travels_with_forks_and_checkpoints_and_scions_own_keys_are_refused() {
    let e = env();
    create_shop(&e, 10);
    let meta = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let main = br("shop@main");
    e.scion
        .engine()
        .fork(
            &main,
            &"run".parse().unwrap(),
            scion_core::ForkOptions {
                meta: meta(&[("pytest_nodeid", "t::a"), ("worker", "gw0")]),
                ..Default::default()
            },
        )
        .unwrap();
    let status = e.scion.branch_status(&br("shop@run")).unwrap();
    assert_eq!(
        status.meta,
        meta(&[("pytest_nodeid", "t::a"), ("worker", "gw0")])
    );
    // scion's own entries stay out of the user's view, and out of the user's hands.
    for bad in [
        meta(&[("scion.capture", "v1")]),
        meta(&[("", "empty key")]),
        meta(&[("k", &"x".repeat(5000))]),
    ] {
        let err = e
            .scion
            .engine()
            .fork(
                &main,
                &"bad".parse().unwrap(),
                scion_core::ForkOptions {
                    meta: bad,
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert!(matches!(err, EngineError::InvalidInput { .. }), "{err}");
    }
    assert!(e.scion.engine().read_ref(&br("shop@bad")).is_err());
    let report = e
        .scion
        .checkpoint(
            &br("shop@run"),
            &"c".parse().unwrap(),
            scion_core::CheckpointOptions {
                meta: meta(&[("why", "x")]),
            },
        )
        .unwrap();
    assert_eq!(report.version, status.version);
    let (_, c) = e
        .scion
        .engine()
        .list_checkpoints(&br("shop@run"))
        .unwrap()
        .remove(0);
    assert_eq!(c.meta, meta(&[("why", "x")]));
    let err = e
        .scion
        .checkpoint(
            &br("shop@run"),
            &"d".parse().unwrap(),
            scion_core::CheckpointOptions {
                meta: meta(&[("scion.x", "1")]),
            },
        )
        .unwrap_err();
    assert!(
        matches!(err, CoreError::Engine(EngineError::InvalidInput { .. })),
        "{err}"
    );
}
