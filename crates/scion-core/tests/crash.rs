//! Crash safety with a fault-injecting backend: stop (or fail) each operation after each of
//! its writes in turn. Afterwards every ref is at its old or its new version, every version
//! materializes and verifies, nothing reported committed is lost, and a retry succeeds.

mod common;

use std::sync::Arc;

use common::*;
use scion_core::{CheckoutState, DbName};
use scion_store::{Backend, FaultPlan, FaultyBackend, LocalBackend};

fn faulty(e: &Env, plan: FaultPlan) -> (Arc<FaultyBackend>, scion_core::Scion) {
    let f = Arc::new(FaultyBackend::new(
        Arc::new(LocalBackend::open(e.store_dir()).unwrap()),
        plan,
    ));
    let s = e.reopen_with(f.clone());
    (f, s)
}

fn plans(writes: usize) -> Vec<FaultPlan> {
    (0..writes)
        .flat_map(|n| [FaultPlan::CrashAfter(n), FaultPlan::FailWrite(n)])
        .collect()
}

#[test]
fn import_stopped_after_each_write() {
    let setup = || {
        let e = env();
        seed(&e.path("src.db"), 3000);
        e
    };
    let e = setup();
    let (f, s) = faulty(&e, FaultPlan::None);
    s.engine()
        .create(&DbName::new("shop").unwrap(), Some(&e.path("src.db")))
        .unwrap();
    let writes = f.writes_attempted();
    let expected = dump(&e.path("src.db"));
    for plan in plans(writes) {
        let e = setup();
        let (_, s) = faulty(&e, plan);
        assert!(
            s.engine()
                .create(&DbName::new("shop").unwrap(), Some(&e.path("src.db")))
                .is_err(),
            "{plan:?}"
        );
        let s = e.reopen();
        assert!(
            s.engine().list_databases().unwrap().is_empty(),
            "{plan:?}: no half-created database"
        );
        if matches!(plan, FaultPlan::FailWrite(_)) && plan != FaultPlan::FailWrite(writes - 1) {
            assert!(
                s.engine().backend().list("segments/").unwrap().is_empty(),
                "{plan:?}: failure cleaned up"
            );
        }
        s.engine()
            .create(&DbName::new("shop").unwrap(), Some(&e.path("src.db")))
            .unwrap();
        assert_eq!(e.dump_target(&s, "shop"), expected, "{plan:?}: retry works");
    }
}

#[test]
fn fork_stopped_after_each_write() {
    let e = env();
    seed(&e.path("src.db"), 100);
    e.scion
        .engine()
        .create(&DbName::new("shop").unwrap(), Some(&e.path("src.db")))
        .unwrap();
    for plan in plans(1) {
        let (_, s) = faulty(&e, plan);
        assert!(s
            .engine()
            .fork(&br("shop"), &"f".parse().unwrap(), Default::default())
            .is_err());
        let s = e.reopen();
        assert_eq!(
            s.engine()
                .list_branches(&DbName::new("shop").unwrap())
                .unwrap()
                .len(),
            1,
            "{plan:?}: no ref left"
        );
    }
    e.scion
        .engine()
        .fork(&br("shop"), &"f".parse().unwrap(), Default::default())
        .unwrap();
    export_every_version(&e);
}

#[test]
fn checkpoint_stopped_after_each_write() {
    let setup = || {
        let e = env();
        seed(&e.path("src.db"), 2000);
        e.scion
            .engine()
            .create(&DbName::new("shop").unwrap(), Some(&e.path("src.db")))
            .unwrap();
        let path = e.scion.checkout(&br("shop"), false).unwrap().path;
        let old = dump(&path);
        exec(
            &path,
            "UPDATE items SET price = -5 WHERE id % 7 = 0; DELETE FROM items WHERE id > 1900;",
        );
        (e, old, dump(&path))
    };
    let (e, _, _) = setup();
    let (f, s) = faulty(&e, FaultPlan::None);
    s.checkpoint(&br("shop"), &"v1".parse().unwrap(), Default::default())
        .unwrap();
    let writes = f.writes_attempted();
    assert_eq!(writes, 4, "lease, segment, ref, checkpoint object");
    for plan in plans(writes) {
        let (e, old, new) = setup();
        let (_, s) = faulty(&e, plan);
        let result = s.checkpoint(&br("shop"), &"v1".parse().unwrap(), Default::default());
        let s = e.reopen();
        let (r, _) = s.engine().read_ref(&br("shop")).unwrap();
        let head = e.dump_target(&s, "shop");
        assert!(
            head == old || head == new,
            "{plan:?}: head is the old or the new version"
        );
        if result.is_ok() {
            assert_eq!(head, new, "{plan:?}: a reported commit is never lost");
        }
        let state = s.checkout_state(&br("shop"), &r.root).unwrap();
        if head == new {
            assert_eq!(
                state,
                CheckoutState::Clean,
                "{plan:?}: the published version's record is adopted"
            );
        } else {
            assert_eq!(
                state,
                CheckoutState::Dirty,
                "{plan:?}: the changes are still there to checkpoint"
            );
        }
        export_every_version(&e);
        // A retry of the same checkpoint finishes the job.
        match s.checkpoint(&br("shop"), &"v1".parse().unwrap(), Default::default()) {
            Ok(_) => {}
            Err(scion_core::CoreError::Engine(scion_core::EngineError::CheckpointExists {
                ..
            })) => {
                assert!(result.is_ok() || matches!(plan, FaultPlan::FailWrite(2)))
            }
            Err(other) => panic!("{plan:?}: retry failed: {other}"),
        }
        assert_eq!(e.dump_target(&s, "shop@main@v1"), new, "{plan:?}");
    }
}
