//! Power loss at every step of every writing operation, in the style of ALICE: the local
//! backend records the file-system operations that decide durability, and for a crash
//! after each of them the tree a disk could hold is rebuilt twice (entries not fsynced into
//! their directory dropped; or every entry kept with data not fsynced dropped). Every such
//! store must open, pass `verify`, and hold each branch before or after the operation; one
//! the operation reported done must hold it after.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::Scion;
use scion_store::powerloss::{crash_state, CrashModel, FsLog};
use scion_store::LocalBackend;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn open(store: &Path) -> Scion {
    Scion::open(
        Arc::new(LocalBackend::open(store).unwrap()),
        "test",
        local_options(store),
    )
    .unwrap()
}

/// The prices of a target (distinct), or None if it does not exist. (`store` is the
/// crashed store's directory: the export goes beside it, never inside it.)
fn prices(s: &Scion, store: &Path, target: &str) -> Option<String> {
    let out = store.with_extension(format!("p-{}.db", unique()));
    s.export(&target.parse().ok()?, &out, false).ok()?;
    let c = rusqlite::Connection::open(&out).unwrap();
    c.query_row("SELECT group_concat(DISTINCT price) FROM items", [], |r| {
        r.get(0)
    })
    .ok()
}

/// `shop` with a branch `work` at price 2.0 and checkpoints c1 (1.0) and c2 (2.0).
fn setup() -> Env {
    let e = env();
    create_shop(&e, 30);
    fork_work_with_two_checkpoints(&e);
    e
}

/// Run `op` on a copy of a fresh `setup()` store with its file-system operations recorded,
/// then check every crash state after every prefix of them with `check(store, done)`.
fn sweep<E: std::fmt::Display>(
    name: &str,
    prepare: impl Fn(&Env),
    op: impl Fn(&Scion) -> Result<(), E>,
    check: impl Fn(&Scion, &Path, bool),
) -> usize {
    let e = setup();
    prepare(&e);
    let before = e.path("before");
    copy_dir(&e.store_dir(), &before);
    let log = FsLog::new();
    let s = Scion::open(
        Arc::new(
            LocalBackend::open(e.store_dir())
                .unwrap()
                .with_fs_log(log.clone()),
        ),
        "test",
        e.options(),
    )
    .unwrap();
    op(&s).unwrap_or_else(|err| panic!("{name}: {err}"));
    let ops = log.ops();
    assert!(!ops.is_empty(), "{name} writes something");
    let mut states = 0;
    for k in 0..=ops.len() {
        for model in [CrashModel::EntriesDropped, CrashModel::DataDropped] {
            let out = e.path(&format!("crash-{k}-{model:?}"));
            crash_state(&before, &ops, k, model, &out).unwrap();
            let crashed = open(&out);
            let what = format!("{name}: power lost after {k} of {} ({model:?})", ops.len());
            let report = crashed.verify().unwrap();
            assert!(report.ok(), "{what}: {:?}", report.problems);
            check(&crashed, &out, k == ops.len());
            let _ = std::fs::remove_dir_all(&out);
            states += 1;
        }
    }
    eprintln!(
        "power loss {name}: {} operations, {states} crash states",
        ops.len()
    );
    states
}

#[test]
fn power_loss_during_a_checkpoint() {
    sweep(
        "checkpoint",
        |e| {
            let p = e.scion.checkout(&br("shop@work"), false).unwrap().path;
            exec(&p, "UPDATE items SET price = 3;");
        },
        |s| {
            s.checkpoint(&br("shop@work"), &"c3".parse().unwrap(), Default::default())
                .map(drop)
        },
        |s, dir, done| {
            let head = prices(s, dir, "shop@work").expect("the branch is there");
            assert!(head == "2.0" || head == "3.0", "old or new: {head}");
            if done {
                assert_eq!(head, "3.0");
                assert_eq!(prices(s, dir, "shop@work@c3").as_deref(), Some("3.0"));
            }
        },
    );
}

#[test]
fn power_loss_during_a_fork() {
    sweep(
        "fork",
        |_| {},
        |s| {
            s.engine()
                .fork(&br("shop@work"), &"f".parse().unwrap(), Default::default())
                .map(drop)
        },
        |s, dir, done| {
            let f = prices(s, dir, "shop@f");
            assert!(f.is_none() || f.as_deref() == Some("2.0"), "{f:?}");
            if done {
                assert_eq!(f.as_deref(), Some("2.0"));
            }
        },
    );
}

#[test]
fn power_loss_during_a_rollback() {
    sweep(
        "rollback",
        |_| {},
        |s| {
            s.rollback(
                &br("shop@work"),
                &"c1".parse().unwrap(),
                &MoveOptions::default(),
            )
            .map(drop)
        },
        |s, dir, done| {
            let head = prices(s, dir, "shop@work").unwrap();
            assert!(head == "1.0" || head == "2.0", "{head}");
            if done {
                assert_eq!(head, "1.0");
                // The history names the abandoned head, and undo brings it back.
                s.undo(&br("shop@work"), &MoveOptions::default()).unwrap();
                assert_eq!(prices(s, dir, "shop@work").as_deref(), Some("2.0"));
            }
        },
    );
}

#[test]
fn power_loss_during_a_destroy_and_a_restore() {
    sweep(
        "destroy",
        |_| {},
        |s| s.destroy(&br("shop@work"), false).map(drop),
        |s, dir, done| {
            let head = prices(s, dir, "shop@work");
            if done {
                assert!(head.is_none(), "destroyed: {head:?}");
            }
            // Whatever the destroy reached, the branch comes back with its head.
            if s.engine().read_ref_any(&br("shop@work")).is_ok() {
                s.destroy(&br("shop@work"), true).unwrap();
            }
            s.restore(&br("shop@work"), None, &MoveOptions::default())
                .unwrap();
            assert_eq!(prices(s, dir, "shop@work").as_deref(), Some("2.0"));
        },
    );
    sweep(
        "restore",
        |e| {
            e.scion.destroy(&br("shop@work"), false).unwrap();
        },
        |s| {
            s.restore(&br("shop@work"), None, &MoveOptions::default())
                .map(drop)
        },
        |s, dir, done| {
            let head = prices(s, dir, "shop@work");
            assert!(head.is_none() || head.as_deref() == Some("2.0"), "{head:?}");
            if done {
                assert_eq!(head.as_deref(), Some("2.0"));
            }
        },
    );
}

#[test]
fn power_loss_during_gc() {
    sweep(
        "gc",
        |e| {
            // Garbage for the gc to delete: a fork made and destroyed, with no history kept.
            e.scion
                .engine()
                .set_history_retention(std::time::Duration::ZERO)
                .unwrap();
            e.scion
                .engine()
                .fork(&br("shop@work"), &"g".parse().unwrap(), Default::default())
                .unwrap();
            let p = e.scion.checkout(&br("shop@g"), false).unwrap().path;
            exec(&p, "UPDATE items SET price = 9;");
            e.scion
                .checkpoint(&br("shop@g"), &"nine".parse().unwrap(), Default::default())
                .unwrap();
            e.scion.destroy(&br("shop@g"), false).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        },
        |s| s.gc(std::time::Duration::ZERO, true).map(drop),
        |s, dir, _| {
            assert_eq!(prices(s, dir, "shop@work").as_deref(), Some("2.0"));
            assert_eq!(prices(s, dir, "shop@work@c1").as_deref(), Some("1.0"));
        },
    );
}
