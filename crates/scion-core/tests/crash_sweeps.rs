//! Crash sweeps over every operation that writes: each write of the operation in turn is
//! made to crash the process (it and everything after it never happen), to fail (no
//! effect), or to land while its answer is lost (the caller sees a precondition failure
//! or a transient error). After every round the store passes `verify`, every head and
//! checkpoint exports, an operation that reported success really happened, and a write
//! that landed is never reported as failed.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::{DbName, LeaseChange, Scion};
use scion_store::{FaultPlan, FaultyBackend, LocalBackend, LostAnswer};

fn faulty(e: &Env, plan: FaultPlan) -> (Arc<FaultyBackend>, Scion) {
    let f = Arc::new(FaultyBackend::new(
        Arc::new(LocalBackend::open(e.store_dir()).unwrap()),
        plan,
    ));
    let s = e.reopen_with(f.clone());
    (f, s)
}

fn plans(k: usize) -> [FaultPlan; 4] {
    [
        FaultPlan::CrashAfter(k),
        FaultPlan::FailWrite(k),
        FaultPlan::ApplyThenFail(k, LostAnswer::Precondition),
        FaultPlan::ApplyThenFail(k, LostAnswer::Transient),
    ]
}

/// Every head and checkpoint exports, and `verify` finds nothing wrong.
fn store_is_whole(e: &Env, what: &str) {
    let s = e.reopen();
    let report = s.verify().unwrap();
    assert!(report.ok(), "{what}: verify found {:?}", report.problems);
    export_every_version(e);
}

/// Run `op` once cleanly to learn its writes, then once per write and fault. `check` gets
/// the store after each round and whether the operation reported success. Returns the
/// number of rounds.
fn sweep<E: std::fmt::Debug + std::fmt::Display>(
    name: &str,
    setup: impl Fn() -> Env,
    op: impl Fn(&Scion) -> Result<(), E>,
    check: impl Fn(&Env, bool),
) -> usize {
    let e = setup();
    let (f, s) = faulty(&e, FaultPlan::None);
    op(&s).unwrap_or_else(|err| panic!("{name}: fault-free run failed: {err}"));
    check(&e, true);
    let log = f.write_log();
    assert!(!log.is_empty(), "{name} writes something");
    let mut rounds = 0;
    for (k, write) in log.iter().enumerate() {
        for plan in plans(k) {
            let what = format!("{name}: {plan:?} at write #{k} ({write})");
            let e = setup();
            let (_, s) = faulty(&e, plan);
            let result = op(&s);
            if matches!(plan, FaultPlan::ApplyThenFail(..)) && write.starts_with("put ") {
                assert!(
                    result.is_ok(),
                    "{what}: a write that landed was reported as failed: {:?}",
                    result.err()
                );
            }
            eprintln!("round: {what}");
            store_is_whole(&e, &what);
            check(&e, result.is_ok());
            rounds += 1;
        }
    }
    eprintln!("crash sweep {name}: {} writes, {rounds} rounds", log.len());
    rounds
}

fn shop() -> Env {
    let e = env();
    create_shop(&e, 200);
    e
}

/// `shop` with a fork `work` holding checkpoints `c1` (price 1) and `c2` (price 2).
fn shop_with_history() -> Env {
    let e = shop();
    fork_work_with_two_checkpoints(&e);
    e
}

/// The safety fork a completed move of `shop@{of}` made.
fn safety_fork_of(e: &Env, of: &str) -> String {
    let s = e.reopen();
    let forks: Vec<String> = s
        .engine()
        .list_branches(&"shop".parse().unwrap())
        .unwrap()
        .into_iter()
        .filter(|(_, r)| r.safety.as_ref().is_some_and(|m| m.of == of))
        .map(|(name, _)| format!("shop@{name}"))
        .collect();
    assert_eq!(forks.len(), 1, "one safety fork of {of}: {forks:?}");
    forks[0].clone()
}

fn prices(e: &Env, target: &str) -> String {
    let s = e.reopen();
    let out = e.path(&format!("prices-{}.db", unique()));
    s.export(&target.parse().unwrap(), &out, false).unwrap();
    let c = rusqlite::Connection::open(&out).unwrap();
    c.query_row("SELECT group_concat(DISTINCT price) FROM items", [], |r| {
        r.get(0)
    })
    .unwrap()
}

#[test]
fn crash_sweep_create() {
    let rounds = sweep(
        "create",
        || {
            let e = env();
            seed(&e.path("src.db"), 300);
            e
        },
        |s| {
            s.engine()
                .create(&DbName::new("shop").unwrap(), Some(&common_src(s)))
                .map(drop)
        },
        |e, ok| {
            let dbs = e.reopen().engine().list_databases().unwrap();
            if ok {
                assert_eq!(dbs.len(), 1, "a reported create exists");
            }
        },
    );
    assert!(rounds >= 8);
}

/// The import source beside the store of `s`.
fn common_src(s: &Scion) -> std::path::PathBuf {
    s.checkouts_dir()
        .parent()
        .and_then(|store| store.parent())
        .unwrap()
        .join("src.db")
}

#[test]
fn crash_sweep_checkpoint() {
    sweep(
        "checkpoint",
        || {
            let e = shop();
            let p = e.scion.checkout(&br("shop"), false).unwrap().path;
            exec(&p, "UPDATE items SET price = 777777 WHERE id % 3 = 0;");
            e
        },
        |s| {
            s.checkpoint(&br("shop"), &"v1".parse().unwrap(), Default::default())
                .map(drop)
        },
        |e, ok| {
            let head = prices(e, "shop");
            if ok {
                assert!(head.contains("777777"), "a reported commit is never lost");
            }
            let s = e.reopen();
            let (r, _) = s.engine().read_ref(&br("shop")).unwrap();
            let state = s.checkout_state(&br("shop"), &r.root).unwrap();
            let expect = if head.contains("777777") {
                scion_core::CheckoutState::Clean
            } else {
                scion_core::CheckoutState::Dirty
            };
            assert_eq!(state, expect, "the checkout's record follows the head");
        },
    );
}

#[test]
fn crash_sweep_fork() {
    sweep(
        "fork",
        shop,
        |s| {
            s.engine()
                .fork(&br("shop"), &"f".parse().unwrap(), Default::default())
                .map(drop)
        },
        |e, ok| {
            if ok {
                e.reopen().engine().read_ref(&br("shop@f")).unwrap();
            }
        },
    );
}

#[test]
fn crash_sweep_rollback() {
    sweep(
        "rollback",
        shop_with_history,
        |s| {
            s.rollback(
                &br("shop@work"),
                &"c1".parse().unwrap(),
                &MoveOptions::default(),
            )
            .map(drop)
        },
        |e, ok| {
            let head = prices(e, "shop@work");
            assert!(head == "1.0" || head == "2.0", "old or new head: {head}");
            if ok {
                assert_eq!(head, "1.0");
                assert_eq!(prices(e, &safety_fork_of(e, "work")), "2.0");
                // The head history names the abandoned head too.
                let log = e
                    .reopen()
                    .engine()
                    .head_history(&br("shop@work"), Some(1))
                    .unwrap();
                assert_eq!(log.entries[0].op, scion_core::history::HeadOp::Rollback);
            }
        },
    );
}

#[test]
fn crash_sweep_promote() {
    sweep(
        "promote",
        shop_with_history,
        |s| {
            let force = MoveOptions {
                force: true,
                ..Default::default()
            };
            s.promote(&br("shop@work"), &"main".parse().unwrap(), &force)
                .map(drop)
        },
        |e, ok| {
            if ok {
                assert_eq!(prices(e, "shop"), "2.0");
            }
        },
    );
}

#[test]
fn crash_sweep_destroy() {
    sweep(
        "destroy",
        shop_with_history,
        |s| s.destroy(&br("shop@work"), false).map(drop),
        |e, ok| {
            let s = e.reopen();
            if ok {
                assert!(s.engine().read_ref(&br("shop@work")).is_err());
            }
            // An interrupted destroy is finished by the next one.
            if s.engine().read_ref_any(&br("shop@work")).is_ok() {
                s.destroy(&br("shop@work"), true).unwrap();
            }
            assert!(s.engine().list_checkpoints(&br("shop@work")).is_err());
            // Whatever point the destroy reached, the branch can be brought back.
            s.restore(&br("shop@work"), None, &MoveOptions::default())
                .unwrap();
            assert_eq!(prices(e, "shop@work"), "2.0");
        },
    );
}

/// Undo a rollback: the head goes back, or stays; the history says which.
#[test]
fn crash_sweep_undo() {
    let setup = || {
        let e = shop_with_history();
        e.scion
            .rollback(
                &br("shop@work"),
                &"c1".parse().unwrap(),
                &MoveOptions::default(),
            )
            .unwrap();
        e
    };
    sweep(
        "undo",
        setup,
        |s| s.undo(&br("shop@work"), &MoveOptions::default()).map(drop),
        |e, ok| {
            let head = prices(e, "shop@work");
            let newest = e
                .reopen()
                .engine()
                .head_history(&br("shop@work"), Some(1))
                .unwrap()
                .entries[0]
                .op;
            if ok || head == "2.0" {
                assert_eq!(head, "2.0");
                assert_eq!(newest, scion_core::history::HeadOp::Undo);
            } else {
                assert_eq!(head, "1.0");
                assert_eq!(newest, scion_core::history::HeadOp::Rollback);
            }
        },
    );
}

/// Bring a destroyed branch back: it exists with its last head, or not at all.
#[test]
fn crash_sweep_restore_a_destroyed_branch() {
    let setup = || {
        let e = shop_with_history();
        e.scion.destroy(&br("shop@work"), false).unwrap();
        e
    };
    sweep(
        "restore",
        setup,
        |s| {
            s.restore(&br("shop@work"), None, &MoveOptions::default())
                .map(drop)
        },
        |e, ok| {
            let back = e.reopen().engine().read_ref(&br("shop@work")).is_ok();
            assert!(back || !ok, "a restore reported done left no branch");
            if back {
                assert_eq!(prices(e, "shop@work"), "2.0");
            }
        },
    );
}

#[test]
fn crash_sweep_gc() {
    sweep(
        "gc",
        || {
            let e = shop_with_history();
            e.scion.destroy(&br("shop@work"), true).unwrap();
            e
        },
        |s| s.gc(Duration::ZERO, true).map(drop),
        |e, ok| {
            if ok {
                assert_eq!(e.reopen().verify().unwrap().unreachable_segments, 0);
            }
        },
    );
}

#[test]
fn crash_sweep_compact() {
    sweep(
        "compact",
        shop_with_history,
        |s| s.compact(&br("shop@work"), false).map(drop),
        |e, _| assert_eq!(prices(e, "shop@work"), "2.0"),
    );
}

#[test]
fn crash_sweep_compact_scattered() {
    let rounds = sweep(
        "compact --scattered",
        shop_with_history,
        |s| {
            s.compact_scope(
                &br("shop@work"),
                false,
                scion_core::ops::compact::CompactScope::Scattered,
            )
            .map(drop)
        },
        |e, _| assert_eq!(prices(e, "shop@work"), "2.0"),
    );
    assert!(
        rounds > 2,
        "the head is scattered: compaction writes ({rounds} rounds)"
    );
}

#[test]
fn crash_sweep_protect_touch_and_lease() {
    let mut rounds = sweep(
        "protect",
        shop,
        |s| s.engine().set_protected(&br("shop"), false),
        |e, ok| {
            if ok {
                assert!(
                    !e.reopen()
                        .engine()
                        .read_ref(&br("shop"))
                        .unwrap()
                        .0
                        .protected
                );
            }
        },
    );
    rounds += sweep(
        "touch",
        shop,
        |s| {
            s.engine()
                .touch(&br("shop"), Some(Some(Duration::from_secs(3600))))
                .map(drop)
        },
        |e, ok| {
            if ok {
                assert_eq!(
                    e.reopen()
                        .engine()
                        .read_ref(&br("shop"))
                        .unwrap()
                        .0
                        .ttl_secs,
                    Some(3600)
                );
            }
        },
    );
    rounds += sweep(
        "lease",
        shop,
        |s| {
            s.engine()
                .lease(
                    &br("shop"),
                    s.engine().holder(),
                    LeaseChange::Acquire {
                        ttl: Duration::from_secs(30),
                    },
                )
                .map(drop)
        },
        |e, ok| {
            if ok {
                assert!(e
                    .reopen()
                    .engine()
                    .read_ref(&br("shop"))
                    .unwrap()
                    .0
                    .lease
                    .is_some());
            }
        },
    );
    assert_eq!(rounds, 12, "one write each, four faults each");
}

/// The page commit live capture uses (`commit_pages`): a crash, a failure, or a lost answer
/// at any write leaves a whole store, and a reported commit is in the head.
#[test]
fn crash_sweep_commit_pages() {
    use scion_core::ops::pages::PageChanges;
    use std::collections::BTreeMap;
    // The changed database: the head exported, one update applied, its pages read.
    let changed_pages = |s: &Scion| -> PageChanges {
        let scratch = tempfile::tempdir().unwrap();
        let out = scratch.path().join("changed.db");
        s.export(&"shop".parse().unwrap(), &out, false).unwrap();
        exec(&out, "UPDATE items SET price = 888888 WHERE id % 4 = 0;");
        let bytes = std::fs::read(&out).unwrap();
        let page_size = u16::from_be_bytes([bytes[16], bytes[17]]) as u32;
        let mut pages = BTreeMap::new();
        for (i, page) in bytes.chunks(page_size as usize).enumerate() {
            let mut page = page.to_vec();
            if i == 0 {
                scion_core::format::normalize_page1(&mut page);
            }
            pages.insert(i as u32 + 1, page);
        }
        PageChanges {
            page_size,
            page_count: pages.len() as u32,
            pages,
            spilled: Default::default(),
        }
    };
    sweep(
        "commit_pages",
        shop,
        |s| {
            let changes = changed_pages(s);
            let (r, etag) = s.engine().read_ref(&br("shop"))?;
            let b = br("shop");
            s.engine()
                .commit_pages(scion_core::ops::pages::PageCommit::onto(
                    &b, &r, etag, &changes,
                ))
                .map(drop)
        },
        |e, ok| {
            let head = prices(e, "shop");
            if ok {
                assert!(head.contains("888888"), "a reported commit is never lost");
            }
        },
    );
}
