//! Commands meant to be O(1) stay O(1): on a database of 64 MiB with its checkout present,
//! each reads a bounded number of bytes, counted (never timed) from this thread's read
//! syscalls (`/proc/thread-self/io`: checkout files, records and a local store alike) and
//! from the store through a counting backend.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::{LeaseChange, Scion};
use scion_store::{Backend, CountingBackend, LocalBackend};

/// Bytes this thread has read through read syscalls so far.
fn thread_read_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").expect("Linux /proc");
    io.lines()
        .find_map(|l| l.strip_prefix("rchar:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("rchar line")
}

/// A bound far below the 64 MiB file and its 128 KiB of page hashes.
const BOUND: u64 = 32 * 1024;

#[test]
fn o1_commands_read_a_bounded_number_of_bytes_whatever_the_size() {
    let e = env();
    let src = e.path("big.db");
    exec(
        &src,
        "CREATE TABLE blobs(id INTEGER PRIMARY KEY, data BLOB);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 17000)
         INSERT INTO blobs(data) SELECT randomblob(4000) FROM n;",
    );
    assert!(std::fs::metadata(&src).unwrap().len() >= 64 << 20);
    e.scion
        .engine()
        .create(&scion_core::DbName::new("big").unwrap(), Some(&src))
        .unwrap();
    let main = br("big");
    let checkout = e.scion.checkout(&main, false).unwrap().path;
    e.scion
        .checkpoint(&main, &"c1".parse().unwrap(), Default::default())
        .unwrap();
    e.scion
        .engine()
        .fork(&main, &"side".parse().unwrap(), Default::default())
        .unwrap();
    let counter = Arc::new(CountingBackend::new(Arc::new(
        LocalBackend::open(e.store_dir()).unwrap(),
    )));
    let s: Scion = e.reopen_with(counter.clone() as Arc<dyn Backend>);
    let mut audit = Vec::new();
    let mut measure = |what: &str, f: &mut dyn FnMut()| {
        let (files, store) = (thread_read_bytes(), counter.counts().bytes_read);
        f();
        let files = thread_read_bytes() - files;
        let store = counter.counts().bytes_read - store;
        audit.push(format!(
            "{what}: {files} B read from files, {store} B from the store"
        ));
        assert!(
            files <= BOUND,
            "{what} read {files} B from files:\n{}",
            audit.join("\n")
        );
        assert!(
            store <= BOUND,
            "{what} read {store} B from the store:\n{}",
            audit.join("\n")
        );
    };
    let n = std::sync::atomic::AtomicUsize::new(0);
    let next = || n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    measure("fork of a checked-out branch", &mut || {
        s.engine()
            .fork(
                &main,
                &format!("f{}", next()).parse().unwrap(),
                Default::default(),
            )
            .unwrap();
    });
    measure("fork at a checkpoint", &mut || {
        s.engine()
            .fork(
                &main,
                &format!("g{}", next()).parse().unwrap(),
                scion_core::ForkOptions {
                    at: Some("c1".parse().unwrap()),
                    ..Default::default()
                },
            )
            .unwrap();
    });
    measure("checkpoint of a clean checkout", &mut || {
        s.checkpoint(
            &main,
            &format!("k{}", next()).parse().unwrap(),
            Default::default(),
        )
        .unwrap();
    });
    measure("re-checkout of a clean checkout", &mut || {
        assert_eq!(s.checkout(&main, false).unwrap().path, checkout);
    });
    measure(
        "checkout may have been written (the fork's note)",
        &mut || {
            assert!(!s.checkout_maybe_written(&main).unwrap());
        },
    );
    let side = br("big@side");
    measure("rollback without a checkout", &mut || {
        s.rollback(&side, &"fork".parse().unwrap(), &MoveOptions::default())
            .unwrap();
    });
    measure("promote without a checkout", &mut || {
        let opts = MoveOptions {
            force: true,
            ..MoveOptions::default()
        };
        s.promote(&br("big@f0"), &"side".parse().unwrap(), &opts)
            .unwrap();
    });
    measure("touch", &mut || {
        s.engine()
            .touch(&side, Some(Some(Duration::from_secs(3600))))
            .unwrap();
    });
    measure("protect", &mut || {
        s.engine().set_protected(&side, true).unwrap()
    });
    measure("lease acquire", &mut || {
        s.engine()
            .lease(
                &side,
                s.engine().holder(),
                LeaseChange::Acquire {
                    ttl: Duration::from_secs(30),
                },
            )
            .unwrap();
    });
    measure("status", &mut || {
        s.status().unwrap();
    });
    eprintln!("{}", audit.join("\n"));
}

/// Listing a database's branches lists the store a fixed number of times, however many
/// branches it has: the checkpoints of all of them are counted from one listing (on a
/// bucket each listing is a round trip), and each branch's count is its own.
#[test]
fn listing_branches_lists_the_store_a_fixed_number_of_times() {
    let e = env();
    create_shop(&e, 20);
    let main = br("shop");
    let lists_for = |branches: usize| {
        for i in 0..branches {
            let name = format!("b-{branches}-{i}");
            e.scion
                .engine()
                .fork(&main, &name.parse().unwrap(), Default::default())
                .unwrap();
            for c in 0..(i % 3) {
                e.scion
                    .checkpoint(
                        &br(&format!("shop@{name}")),
                        &format!("c{c}").parse().unwrap(),
                        Default::default(),
                    )
                    .unwrap();
            }
        }
        let counter = Arc::new(CountingBackend::new(Arc::new(
            LocalBackend::open(e.store_dir()).unwrap(),
        )));
        let s: Scion = e.reopen_with(counter.clone() as Arc<dyn Backend>);
        let before = counter.counts().lists;
        let listed = s.branch_statuses(&"shop".parse().unwrap()).unwrap();
        let lists = counter.counts().lists - before;
        for b in &listed {
            let name = b.branch.to_string();
            let want = match name.rsplit_once('-') {
                Some((_, i)) if name.starts_with("b-") => i.parse::<usize>().unwrap() % 3,
                _ => 0,
            };
            assert_eq!(b.checkpoints, want, "{name}");
        }
        (listed.len(), lists)
    };
    let (few, lists_few) = lists_for(3);
    let (many, lists_many) = lists_for(30);
    println!("branches {few}: {lists_few} listings; branches {many}: {lists_many} listings");
    assert!(many > few + 25);
    assert_eq!(lists_few, lists_many);
}
