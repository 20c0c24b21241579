//! The head history: every head move recorded, `undo` and `restore` along it, destroyed
//! branches brought back, `gc` keeping what the history names for the store's retention,
//! and protection that an agent cannot talk its way around.

mod common;

use std::time::Duration;

use common::*;
use scion_core::history::{HeadOp, INLINE_MAX};
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::{CoreError, EngineError, StoreSettings};

fn force() -> MoveOptions {
    MoveOptions {
        force: true,
        ..Default::default()
    }
}

/// `shop@b` forked from main, with one checkpoint `c<n>` per price in `prices`.
fn branch_with_commits(e: &common::Env, b: &str, prices: &[u32]) {
    e.scion
        .engine()
        .fork(&br("shop"), &b.parse().unwrap(), Default::default())
        .unwrap();
    let target = br(&format!("shop@{b}"));
    let p = e.scion.checkout(&target, false).unwrap().path;
    for n in prices {
        exec(&p, &format!("UPDATE items SET price = {n};"));
        e.scion
            .checkpoint(
                &target,
                &format!("c{n}").parse().unwrap(),
                Default::default(),
            )
            .unwrap();
    }
}

fn price(e: &common::Env, target: &str) -> String {
    let out = e.path(&format!("price-{}.db", unique()));
    e.scion
        .export(&target.parse().unwrap(), &out, false)
        .unwrap();
    let c = rusqlite::Connection::open(&out).unwrap();
    c.query_row("SELECT group_concat(DISTINCT price) FROM items", [], |r| {
        r.get(0)
    })
    .unwrap()
}

/// The prices `create_shop` seeded.
fn seeded(e: &common::Env) -> String {
    price(e, "shop@main@init")
}

fn ops(e: &common::Env, b: &str) -> Vec<HeadOp> {
    let h = e.scion.engine().head_history(&br(b), None).unwrap();
    h.entries.iter().rev().map(|e| e.op).collect()
}

#[test]
fn every_head_move_is_recorded_with_the_heads_before_and_after() {
    let e = env();
    create_shop(&e, 20);
    branch_with_commits(&e, "w", &[1, 2]);
    let w = br("shop@w");
    let before = e.scion.engine().read_ref(&w).unwrap().0;
    e.scion
        .rollback(&w, &"c1".parse().unwrap(), &Default::default())
        .unwrap();
    e.scion.compact(&w, false).unwrap();
    e.scion
        .promote(&w, &"main".parse().unwrap(), &force())
        .unwrap();
    assert_eq!(
        ops(&e, "shop@w"),
        [
            HeadOp::Commit,
            HeadOp::Commit,
            HeadOp::Rollback,
            HeadOp::Compact
        ]
    );
    assert_eq!(ops(&e, "shop@main"), [HeadOp::Promote]);
    let h = e.scion.engine().head_history(&w, None).unwrap();
    let rollback = &h.entries[1];
    assert_eq!(rollback.seq, 3);
    assert_eq!(rollback.old, Some(before.root));
    assert_eq!(rollback.old_version, before.version);
    assert_eq!(rollback.new_version, before.version + 1);
    assert_eq!(rollback.detail.as_deref(), Some("shop@w@c1"));
    assert_eq!(rollback.holder, e.scion.engine().holder());
    // Consecutive entries chain: each starts where the one before it ended.
    for pair in h.entries.windows(2) {
        assert_eq!(pair[0].old, pair[1].new, "{pair:?}");
    }
}

#[test]
fn undo_walks_back_one_move_at_a_time_and_restore_redoes() {
    let e = env();
    create_shop(&e, 20);
    branch_with_commits(&e, "w", &[1, 2, 3]);
    let w = br("shop@w");
    e.scion
        .rollback(&w, &"c1".parse().unwrap(), &Default::default())
        .unwrap();
    assert_eq!(price(&e, "shop@w"), "1.0");
    let undone = e.scion.undo(&w, &Default::default()).unwrap();
    assert_eq!(price(&e, "shop@w"), "3.0", "the rollback is undone");
    assert_eq!(undone.history_entry, 5);
    e.scion.undo(&w, &Default::default()).unwrap();
    assert_eq!(price(&e, "shop@w"), "2.0", "then the third commit");
    e.scion.undo(&w, &Default::default()).unwrap();
    e.scion.undo(&w, &Default::default()).unwrap();
    assert_eq!(price(&e, "shop@w"), seeded(&e), "back at the fork point");
    // The fork itself is not a move: there is nothing older to undo.
    let err = e.scion.undo(&w, &Default::default()).unwrap_err();
    assert!(
        matches!(err, CoreError::Engine(EngineError::NothingToUndo { .. })),
        "{err}"
    );
    // Entry 3 left the third commit's head: restore puts it back, recorded too.
    let r = e.scion.restore(&w, Some(3), &Default::default()).unwrap();
    assert_eq!(price(&e, "shop@w"), "3.0");
    assert_eq!(ops(&e, "shop@w").last(), Some(&HeadOp::Restore));
    e.scion.undo(&w, &Default::default()).unwrap();
    assert_eq!(price(&e, "shop@w"), seeded(&e), "the restore is undone");
    assert!(r.version > 3);
    let err = e
        .scion
        .restore(&w, Some(99), &Default::default())
        .unwrap_err();
    assert!(
        matches!(
            err,
            CoreError::Engine(EngineError::HistoryEntryNotFound { entry: 99, .. })
        ),
        "{err}"
    );
}

#[test]
fn a_destroyed_branch_is_restored_by_name_while_its_history_lasts() {
    let e = env();
    create_shop(&e, 20);
    branch_with_commits(&e, "gone", &[7, 8]);
    let gone = br("shop@gone");
    e.scion
        .engine()
        .touch(&gone, Some(Some(Duration::from_secs(3600))))
        .unwrap();
    e.scion.destroy(&gone, false).unwrap();
    assert!(matches!(
        e.scion.engine().read_ref(&gone),
        Err(EngineError::BranchNotFound { .. })
    ));
    let h = e.scion.engine().head_history(&gone, None).unwrap();
    assert!(!h.live);
    assert_eq!(h.entries[0].op, HeadOp::Destroy);
    // gc with no grace: the branch's data is kept by its history.
    e.scion.gc(Duration::ZERO, true).unwrap();
    e.scion.gc(Duration::ZERO, true).unwrap();
    let r = e.scion.restore(&gone, None, &Default::default()).unwrap();
    assert_eq!(price(&e, "shop@gone"), "8.0");
    let back = e.scion.engine().read_ref(&gone).unwrap().0;
    assert_eq!(back.ttl_secs, Some(3600), "the branch comes back as it was");
    assert_eq!(back.parent.as_ref().unwrap().branch, "main");
    assert_eq!(r.version, back.version);
    assert_eq!(price(&e, "shop@gone@fork"), seeded(&e));
    assert_eq!(
        ops(&e, "shop@gone"),
        [
            HeadOp::Commit,
            HeadOp::Commit,
            HeadOp::Destroy,
            HeadOp::Restore
        ]
    );
    // An earlier entry of a destroyed branch, by number.
    e.scion.destroy(&gone, false).unwrap();
    e.scion
        .restore(&gone, Some(1), &Default::default())
        .unwrap();
    assert_eq!(price(&e, "shop@gone"), "7.0");
    // A name that never existed has no history.
    let err = e
        .scion
        .restore(&br("shop@never"), None, &Default::default())
        .unwrap_err();
    assert!(
        matches!(err, CoreError::Engine(EngineError::BranchNotFound { .. })),
        "{err}"
    );
}

#[test]
fn gc_keeps_every_head_the_history_names_until_the_retention_passes() {
    let e = env();
    create_shop(&e, 400);
    branch_with_commits(&e, "w", &[1]);
    let w = br("shop@w");
    // A move with no safety fork and no checkpoint left: only the history names the head.
    e.scion
        .engine()
        .delete_checkpoint(&w, &"c1".parse().unwrap())
        .unwrap();
    let no_backup = MoveOptions {
        no_backup: true,
        ..Default::default()
    };
    e.scion
        .rollback(&w, &"fork".parse().unwrap(), &no_backup)
        .unwrap();
    e.scion.gc(Duration::ZERO, true).unwrap();
    let second = e.scion.gc(Duration::ZERO, true).unwrap();
    assert_eq!(second.deleted_segments, 0, "the abandoned head is kept");
    // And gc says so: bytes only the history keeps, free when the retention passes.
    let kept = &second.kept_by_history;
    assert!(kept.bytes > 0 && kept.segments > 0, "{kept:?}");
    let retention = scion_core::history::DEFAULT_HISTORY_RETENTION;
    let free = kept.all_free_at.unwrap().as_system_time();
    let soonest = std::time::SystemTime::now() + retention - Duration::from_secs(3600);
    assert!(
        free > soonest,
        "frees up a retention after the move: {kept:?}"
    );
    e.scion.undo(&w, &no_backup).unwrap();
    assert_eq!(price(&e, "shop@w"), "1.0");
    e.scion
        .rollback(&w, &"fork".parse().unwrap(), &no_backup)
        .unwrap();
    // With no retention the history keeps nothing: two marks later the head is gone.
    e.scion
        .engine()
        .set_history_retention(Duration::ZERO)
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let swept = e.scion.gc(Duration::ZERO, true).unwrap();
    assert!(swept.deleted_segments > 0, "{swept:?}");
    assert_eq!(swept.kept_by_history.bytes, 0, "{swept:?}");
    let err = e.scion.undo(&w, &no_backup).unwrap_err();
    assert!(
        matches!(
            err,
            CoreError::Engine(EngineError::Store(_))
                | CoreError::Engine(EngineError::Corrupt { .. })
        ),
        "the undone-to head's data is gone: {err}"
    );
    e.scion.verify().unwrap();
}

#[test]
fn older_entries_spill_into_history_objects_and_read_back_in_order() {
    let e = env();
    create_shop(&e, 20);
    let prices: Vec<u32> = (1..=40).collect();
    branch_with_commits(&e, "w", &prices);
    let r = e.scion.engine().read_ref(&br("shop@w")).unwrap().0;
    assert!(r.history.len() <= INLINE_MAX, "{}", r.history.len());
    // Spills at the 17th and 30th moves (13 entries each), 14 entries left in the ref.
    assert_eq!(r.history.len(), 14);
    let objects = e.scion.engine().backend().list("history/shop/w/").unwrap();
    assert_eq!(objects.len(), 2, "{objects:?}");
    let h = e.scion.engine().head_history(&br("shop@w"), None).unwrap();
    let seqs: Vec<u64> = h.entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=40).rev().collect::<Vec<_>>());
    assert!(!h.more && !h.expired_before);
    let limited = e
        .scion
        .engine()
        .head_history(&br("shop@w"), Some(5))
        .unwrap();
    assert_eq!(limited.entries.len(), 5);
    assert!(limited.more);
    // Undo reaches into the spilled entries.
    for _ in 0..30 {
        e.scion.undo(&br("shop@w"), &Default::default()).unwrap();
    }
    assert_eq!(price(&e, "shop@w"), "10.0");
}

#[test]
fn rollback_of_a_protected_branch_needs_force() {
    let e = env();
    create_shop(&e, 20);
    let main = br("shop");
    let p = e.scion.checkout(&main, false).unwrap().path;
    exec(&p, "UPDATE items SET price = 9;");
    e.scion
        .checkpoint(&main, &"v1".parse().unwrap(), Default::default())
        .unwrap();
    for opts in [
        MoveOptions::default(),
        MoveOptions {
            no_backup: true,
            ..Default::default()
        },
    ] {
        let err = e
            .scion
            .rollback(&main, &"init".parse().unwrap(), &opts)
            .unwrap_err();
        assert!(
            matches!(err, CoreError::Engine(EngineError::Protected { .. })),
            "{err}"
        );
    }
    for err in [
        e.scion.undo(&main, &Default::default()).unwrap_err(),
        e.scion
            .restore(&main, Some(1), &Default::default())
            .unwrap_err(),
    ] {
        assert!(
            matches!(err, CoreError::Engine(EngineError::Protected { .. })),
            "{err}"
        );
    }
    assert_eq!(price(&e, "shop"), "9.0");
    e.scion
        .rollback(&main, &"init".parse().unwrap(), &force())
        .unwrap();
    e.scion.undo(&main, &force()).unwrap();
    assert_eq!(price(&e, "shop"), "9.0");
}

#[test]
fn a_safety_fork_is_never_overwritten() {
    let e = env();
    create_shop(&e, 20);
    branch_with_commits(&e, "a", &[1]);
    branch_with_commits(&e, "b", &[2]);
    let main = br("shop");
    let first = e
        .scion
        .promote(&br("shop@a"), &"main".parse().unwrap(), &force())
        .unwrap();
    let second = e
        .scion
        .promote(&br("shop@b"), &"main".parse().unwrap(), &force())
        .unwrap();
    let (f1, f2) = (first.safety_fork.unwrap(), second.safety_fork.unwrap());
    assert_ne!(f1, f2);
    assert_eq!(
        price(&e, &f1),
        seeded(&e),
        "the head the first promote replaced"
    );
    assert_eq!(
        price(&e, &f2),
        "1.0",
        "the head the second promote replaced"
    );
    assert_eq!(price(&e, "shop"), "2.0");
    e.scion.undo(&main, &force()).unwrap();
    assert_eq!(price(&e, "shop"), "1.0");
}

#[test]
fn a_safety_fork_holding_the_only_recent_head_of_a_protected_branch_is_protected() {
    // With no retention, main's history keeps nothing: the safety fork is the only copy.
    let e = env_with(StoreSettings {
        history_retention: Duration::ZERO,
        ..Default::default()
    });
    create_shop(&e, 20);
    let main = br("shop");
    let p = e.scion.checkout(&main, false).unwrap().path;
    exec(&p, "UPDATE items SET price = 9;");
    e.scion
        .checkpoint(&main, &"v1".parse().unwrap(), Default::default())
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let r = e
        .scion
        .rollback(&main, &"init".parse().unwrap(), &force())
        .unwrap();
    let fork = br(r.safety_fork.as_deref().unwrap());
    let err = e.scion.destroy(&fork, false).unwrap_err();
    assert!(
        matches!(err, CoreError::Engine(EngineError::Protected { .. })),
        "{err}"
    );
    // With the default retention the history holds it, and the fork may go.
    e.scion
        .engine()
        .set_history_retention(scion_core::history::DEFAULT_HISTORY_RETENTION)
        .unwrap();
    e.scion.destroy(&fork, false).unwrap();
}

/// A branch forked as ephemeral (a test's fork) takes its history with it when destroyed:
/// gc reclaims its pages at once, where a plain fork's are kept for `restore`.
#[test]
fn an_ephemeral_fork_leaves_nothing_for_gc_to_keep_once_destroyed() {
    let e = env();
    create_shop(&e, 2000);
    let main = br("shop@main");
    let mut written = Vec::new();
    for (name, ephemeral) in [("kept", false), ("test-1", true)] {
        let options = scion_core::ForkOptions {
            ephemeral,
            ..Default::default()
        };
        e.scion
            .engine()
            .fork(&main, &name.parse().unwrap(), options)
            .unwrap();
        let b = br(&format!("shop@{name}"));
        let path = e.scion.checkout(&b, false).unwrap().path;
        exec(&path, "UPDATE items SET name = hex(randomblob(40))");
        e.scion
            .checkpoint(&b, &"c".parse().unwrap(), Default::default())
            .unwrap();
        e.scion.destroy(&b, false).unwrap();
        let gc = e.scion.gc(Duration::ZERO, true).unwrap();
        written.push((name, gc.kept_by_history.bytes, gc.deleted_segments));
        e.scion.gc(Duration::ZERO, true).unwrap();
    }
    let (_, kept_bytes, kept_deleted) = written[0];
    assert!(kept_bytes > 0 && kept_deleted == 0, "{written:?}");
    let (_, eph_bytes, eph_deleted) = written[1];
    assert_eq!(
        eph_bytes, kept_bytes,
        "only the plain fork's pages are still kept: {written:?}"
    );
    assert!(
        eph_deleted > 0,
        "the ephemeral fork's pages went: {written:?}"
    );
    let restored = e
        .scion
        .restore(&br("shop@test-1"), None, &MoveOptions::default());
    assert!(
        restored.is_err(),
        "an ephemeral branch's history went with it"
    );
    e.scion.verify().unwrap();
}
