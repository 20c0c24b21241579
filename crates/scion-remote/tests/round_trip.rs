//! Push, pull and clone between real stores: two local directories, a directory and the
//! test S3 server, S3 and Azurite. Data compared by the sqlite3 CLI's `.dump`, both sides
//! verified, the version graph checked by the merge base a merge after a pull finds.

mod common;

use common::{azure_location, items, s3_location, silent, store_at, Store};
use scion_core::BranchRef;
use scion_remote::{
    clone, pull, push, CloneOptions, PullOptions, PullOutcome, PushOptions, PushOutcome,
    RemoteError,
};

fn b(s: &str) -> BranchRef {
    s.parse().unwrap()
}

fn dir_store(dir: &std::path::Path, name: &str) -> Store {
    store_at(dir.join(name).to_str().unwrap())
}

/// The laptop → bucket → second store → merge back workflow, on any two locations.
fn laptop_bucket_second_store_merge_back(remote_location: &str, second_location: Option<&str>) {
    let tmp = tempfile::tempdir().unwrap();
    let laptop = dir_store(tmp.path(), "laptop");
    let bucket = store_at(remote_location);
    laptop.create(tmp.path(), "shop", &items(3000));
    laptop.write(
        "shop",
        "INSERT INTO items VALUES (9001, 'laptop seed', 'x')",
    );
    let origin = laptop.remote("origin", &bucket);

    let first = push(
        &laptop.scion,
        &origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    assert_eq!(first.outcome, PushOutcome::Created);
    assert!(first.transfer.stats.objects_sent >= 1);
    assert_eq!(
        bucket.dump(tmp.path(), "shop"),
        laptop.dump(tmp.path(), "shop")
    );
    assert_eq!(bucket.root("shop"), laptop.root("shop"));
    assert_eq!(laptop.root("shop@origin~main"), laptop.root("shop"));
    let pushed_root = laptop.root("shop");

    // A second store cloned from the bucket works on a fork and pushes it.
    let second_dir = tmp.path().join("second");
    let second = match second_location {
        None => {
            let (s, cloned) = clone(
                &bucket.location,
                &second_dir,
                &CloneOptions::default(),
                silent(),
            )
            .unwrap();
            assert_eq!(cloned.databases, vec!["shop".to_string()]);
            assert_eq!(cloned.branches.len(), 1);
            Store {
                location: s.engine().location().to_string(),
                scion: s,
            }
        }
        Some(loc) => {
            let s = store_at(loc);
            let o = s.remote("origin", &bucket);
            let got = pull(
                &s.scion,
                &o,
                &b("shop"),
                &PullOptions::default(),
                &*silent(),
            )
            .unwrap();
            assert_eq!(got.outcome, PullOutcome::Created);
            s
        }
    };
    assert_eq!(
        second.dump(tmp.path(), "shop"),
        laptop.dump(tmp.path(), "shop")
    );
    second.fork("shop", "try");
    second.write(
        "shop@try",
        "INSERT INTO items VALUES (9002, 'from the fleet', 'y')",
    );
    second.write(
        "shop@try",
        "UPDATE items SET name = 'renamed by the fleet' WHERE id = 7",
    );
    let second_origin =
        scion_remote::Remote::open(&second.scion, &"origin".parse().unwrap(), silent()).unwrap();
    let pushed = push(
        &second.scion,
        &second_origin,
        &b("shop@try"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    assert_eq!(pushed.outcome, PushOutcome::Created);

    // Meanwhile the laptop moved on; pulling `try` into main merges both.
    laptop.write(
        "shop",
        "INSERT INTO items VALUES (9003, 'laptop again', 'z')",
    );
    let opts = PullOptions {
        into: Some("main".parse().unwrap()),
        merge: scion_merge::MergeOptions {
            allow_protected: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let pulled = pull(&laptop.scion, &origin, &b("shop@try"), &opts, &*silent()).unwrap();
    assert_eq!(pulled.outcome, PullOutcome::Merged, "{pulled:?}");
    let merge = pulled.merge.as_ref().unwrap();
    // The base is the version the laptop pushed, which the fleet forked: found in the
    // version graph that travelled with the pull.
    assert_eq!(merge.base.root, pushed_root);
    assert_eq!(laptop.count("shop", "items"), 3003);
    let names: String = laptop
        .open("shop")
        .query_row("SELECT name FROM items WHERE id = 7", [], |r| r.get(0))
        .unwrap();
    assert_eq!(names, "renamed by the fleet");

    // Back to the bucket: a fast-forward of main there.
    let back = push(
        &laptop.scion,
        &origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    assert_eq!(back.outcome, PushOutcome::FastForward);
    assert_eq!(
        bucket.dump(tmp.path(), "shop"),
        laptop.dump(tmp.path(), "shop")
    );
    laptop.assert_verifies();
    bucket.assert_verifies();
    second.assert_verifies();
}

#[test]
fn local_to_local_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let bucket = tmp.path().join("bucket");
    laptop_bucket_second_store_merge_back(bucket.to_str().unwrap(), None);
}

#[test]
fn local_to_s3_round_trip() {
    laptop_bucket_second_store_merge_back(&s3_location("rt"), None);
}

#[test]
fn s3_to_azure_round_trip() {
    // The "laptop" is local here; the remote is S3 and the second store Azure.
    laptop_bucket_second_store_merge_back(&s3_location("s3az"), Some(&azure_location("s3az")));
}

#[test]
fn a_push_after_a_one_row_commit_sends_one_small_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let laptop = dir_store(tmp.path(), "laptop");
    let bucket = dir_store(tmp.path(), "bucket");
    laptop.create(tmp.path(), "shop", &items(20_000));
    let origin = laptop.remote("origin", &bucket);
    push(
        &laptop.scion,
        &origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    laptop.write("shop", "UPDATE items SET name = 'one row' WHERE id = 12345");
    let second = push(
        &laptop.scion,
        &origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    assert_eq!(second.outcome, PushOutcome::FastForward);
    // One commit's segment; with the ref, two objects written.
    assert_eq!(
        second.transfer.stats.objects_sent, 1,
        "{:?}",
        second.transfer
    );
    assert!(
        second.transfer.stats.bytes_sent <= 16 * 1024,
        "{:?}",
        second.transfer
    );
    assert_eq!(
        second.transfer.ancestors, 0,
        "the parent is the remote's head"
    );
    // Again: nothing to send.
    let third = push(
        &laptop.scion,
        &origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    assert_eq!(third.outcome, PushOutcome::UpToDate);
    assert_eq!(third.transfer.stats.objects_sent, 0);
    // And the pull the other way of one more commit made there.
    bucket.write("shop", "UPDATE items SET name = 'one more' WHERE id = 54");
    let pulled = pull(
        &laptop.scion,
        &origin,
        &b("shop"),
        &PullOptions {
            merge: scion_merge::MergeOptions {
                allow_protected: true,
                ..Default::default()
            },
            ..Default::default()
        },
        &*silent(),
    )
    .unwrap();
    assert_eq!(pulled.outcome, PullOutcome::FastForward);
    assert_eq!(
        pulled.transfer.stats.objects_sent, 1,
        "{:?}",
        pulled.transfer
    );
    assert!(
        pulled.transfer.stats.bytes_sent <= 16 * 1024,
        "{:?}",
        pulled.transfer
    );
    assert_eq!(
        laptop.dump(tmp.path(), "shop"),
        bucket.dump(tmp.path(), "shop")
    );
}

#[test]
fn a_divergent_push_is_refused_and_the_remote_ref_is_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let a = dir_store(tmp.path(), "a");
    let bucket = dir_store(tmp.path(), "bucket");
    a.create(tmp.path(), "shop", &items(100));
    let a_origin = a.remote("origin", &bucket);
    push(
        &a.scion,
        &a_origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    let (second, _) = clone(
        &bucket.location,
        &tmp.path().join("b"),
        &CloneOptions::default(),
        silent(),
    )
    .unwrap();
    let bs = Store {
        location: second.engine().location().to_string(),
        scion: second,
    };
    let b_origin =
        scion_remote::Remote::open(&bs.scion, &"origin".parse().unwrap(), silent()).unwrap();

    a.write("shop", "INSERT INTO items VALUES (500, 'a', 'a')");
    bs.write("shop", "INSERT INTO items VALUES (600, 'b', 'b')");
    let won = push(
        &bs.scion,
        &b_origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    assert_eq!(won.outcome, PushOutcome::FastForward);
    let before = std::fs::read(tmp.path().join("bucket/refs/shop/main")).unwrap();

    let refused = push(
        &a.scion,
        &a_origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap_err();
    assert!(
        matches!(
            refused,
            RemoteError::Engine(scion_core::EngineError::NotFastForward { .. })
        ),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("pull and merge first"),
        "{refused}"
    );
    // --force-with-lease: a's tracking branch saw the head before b's push.
    let lease = PushOptions {
        force_with_lease: true,
        force: true,
        ..Default::default()
    };
    let moved = push(&a.scion, &a_origin, &b("shop"), &lease, &*silent()).unwrap_err();
    assert!(
        matches!(
            moved,
            RemoteError::Engine(scion_core::EngineError::RemoteMoved { .. })
        ),
        "{moved}"
    );
    assert_eq!(
        std::fs::read(tmp.path().join("bucket/refs/shop/main")).unwrap(),
        before
    );

    // Pull and merge first, then the push is a fast-forward.
    let merged = pull(
        &a.scion,
        &a_origin,
        &b("shop"),
        &PullOptions {
            merge: scion_merge::MergeOptions {
                allow_protected: true,
                ..Default::default()
            },
            ..Default::default()
        },
        &*silent(),
    )
    .unwrap();
    assert_eq!(merged.outcome, PullOutcome::Merged);
    let after = push(
        &a.scion,
        &a_origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    assert_eq!(after.outcome, PushOutcome::FastForward);
    assert_eq!(bucket.count("shop", "items"), 102);
    bucket.assert_verifies();
}

#[test]
fn force_with_lease_replaces_the_version_last_seen_only() {
    let tmp = tempfile::tempdir().unwrap();
    let a = dir_store(tmp.path(), "a");
    let bucket = dir_store(tmp.path(), "bucket");
    a.create(tmp.path(), "shop", &items(100));
    a.fork("shop", "alt");
    a.write("shop", "INSERT INTO items VALUES (500, 'main', 'a')");
    let origin = a.remote("origin", &bucket);
    push(
        &a.scion,
        &origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    a.write("shop@alt", "INSERT INTO items VALUES (501, 'alt', 'a')");
    let as_main = PushOptions {
        as_branch: Some("main".parse().unwrap()),
        ..Default::default()
    };
    assert!(push(&a.scion, &origin, &b("shop@alt"), &as_main, &*silent()).is_err());
    let forced = PushOptions {
        force_with_lease: true,
        force: true,
        ..as_main
    };
    let report = push(&a.scion, &origin, &b("shop@alt"), &forced, &*silent()).unwrap();
    assert_eq!(report.outcome, PushOutcome::Forced);
    assert_eq!(bucket.root("shop"), a.root("shop@alt"));
    let entry = bucket
        .scion
        .engine()
        .read_ref(&b("shop"))
        .unwrap()
        .0
        .history
        .last()
        .cloned()
        .unwrap();
    assert_eq!(entry.op.as_str(), "push");
}

#[test]
fn a_protected_branch_at_the_remote_takes_fast_forwards_and_needs_force_to_be_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let a = dir_store(tmp.path(), "a");
    let bucket = dir_store(tmp.path(), "bucket");
    a.create(tmp.path(), "shop", &items(50));
    a.fork("shop", "alt");
    let origin = a.remote("origin", &bucket);
    push(
        &a.scion,
        &origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    assert!(
        bucket
            .scion
            .engine()
            .read_ref(&b("shop"))
            .unwrap()
            .0
            .protected
    );
    a.write("shop", "INSERT INTO items VALUES (500, 'x', 'x')");
    let ff = push(
        &a.scion,
        &origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    assert_eq!(ff.outcome, PushOutcome::FastForward);
    a.write("shop@alt", "INSERT INTO items VALUES (501, 'y', 'y')");
    let lease = PushOptions {
        as_branch: Some("main".parse().unwrap()),
        force_with_lease: true,
        ..Default::default()
    };
    let e = push(&a.scion, &origin, &b("shop@alt"), &lease, &*silent()).unwrap_err();
    assert!(
        matches!(
            e,
            RemoteError::Engine(scion_core::EngineError::Protected { .. })
        ),
        "{e}"
    );
    let forced = PushOptions {
        force: true,
        ..lease
    };
    let ok = push(&a.scion, &origin, &b("shop@alt"), &forced, &*silent()).unwrap();
    assert_eq!(ok.outcome, PushOutcome::Forced);
}

#[test]
fn a_tracking_branch_takes_no_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let a = dir_store(tmp.path(), "a");
    let bucket = dir_store(tmp.path(), "bucket");
    a.create(tmp.path(), "shop", &items(10));
    let origin = a.remote("origin", &bucket);
    push(
        &a.scion,
        &origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    let e = a.try_write(
        "shop@origin~main",
        "INSERT INTO items VALUES (99, 'no', 'no')",
    );
    assert!(e.is_err(), "a commit onto a tracking branch was taken");
    assert_eq!(a.count("shop@origin~main", "items"), 10);
    // It can be forked to be written on.
    a.fork("shop@origin~main", "mine");
    a.write("shop@mine", "INSERT INTO items VALUES (99, 'yes', 'yes')");
    // A fork cannot take a tracking name.
    let taken = a.scion.engine().fork(
        &b("shop"),
        &"origin~other".parse().unwrap(),
        Default::default(),
    );
    assert!(taken.is_err());
}

#[test]
fn checkpoints_travel_with_push_checkpoints_and_clone() {
    let tmp = tempfile::tempdir().unwrap();
    let a = dir_store(tmp.path(), "a");
    let bucket = dir_store(tmp.path(), "bucket");
    a.create(tmp.path(), "shop", &items(100));
    a.fork("shop", "try");
    a.write("shop@try", "INSERT INTO items VALUES (500, 'v1', 'x')");
    a.scion
        .checkpoint(
            &b("shop@try"),
            &"first".parse().unwrap(),
            Default::default(),
        )
        .unwrap();
    a.write("shop@try", "INSERT INTO items VALUES (501, 'v2', 'x')");
    let origin = a.remote("origin", &bucket);
    let opts = PushOptions {
        checkpoints: true,
        ..Default::default()
    };
    let pushed = push(&a.scion, &origin, &b("shop@try"), &opts, &*silent()).unwrap();
    assert_eq!(pushed.checkpoints.len(), 1, "{pushed:?}");
    assert_eq!(bucket.count("shop@try@first", "items"), 101);
    // Again: the checkpoint is there already, naming the same version.
    let again = push(&a.scion, &origin, &b("shop@try"), &opts, &*silent()).unwrap();
    assert_eq!(
        again.checkpoints[0].1,
        scion_core::ops::receive::CheckpointReceipt::Same
    );
    let (cloned, report) = clone(
        &bucket.location,
        &tmp.path().join("c"),
        &CloneOptions::default(),
        silent(),
    )
    .unwrap();
    let c = Store {
        location: cloned.engine().location().to_string(),
        scion: cloned,
    };
    assert_eq!(report.branches.len(), 1, "only try was pushed: {report:?}");
    assert_eq!(c.count("shop@try@first", "items"), 101);
    assert_eq!(c.count("shop@try", "items"), 102);
    assert_eq!(c.root("shop@try"), a.root("shop@try"));
    c.assert_verifies();
    // A clone into a directory that holds something is refused, and leaves it alone.
    let busy = tmp.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("keep.txt"), "mine").unwrap();
    let refused = clone(&bucket.location, &busy, &CloneOptions::default(), silent());
    assert!(matches!(
        refused,
        Err(RemoteError::CloneTargetExists { .. })
    ));
    assert_eq!(
        std::fs::read_to_string(busy.join("keep.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn what_an_interrupted_push_left_is_swept_by_the_receivers_gc() {
    let tmp = tempfile::tempdir().unwrap();
    let a = dir_store(tmp.path(), "a");
    let bucket = dir_store(tmp.path(), "bucket");
    a.create(tmp.path(), "shop", &items(100));
    for i in 0..6 {
        a.write(
            "shop",
            &format!("INSERT INTO items VALUES ({}, 'x', 'x')", 1000 + i),
        );
    }
    let root = a.scion.engine().read_ref(&b("shop")).unwrap().0.root;
    let plan = a
        .scion
        .engine()
        .plan_transfer(bucket.scion.engine(), &[root], None)
        .unwrap();
    assert!(plan.missing.len() >= 4, "{plan:?}");
    // Cut short: the first half of the segments arrived, no ref moved.
    let partial = scion_core::ops::transfer::TransferPlan {
        missing: plan.missing[..plan.missing.len() / 2].to_vec(),
        ..Default::default()
    };
    let sent = a
        .scion
        .engine()
        .send_segments(bucket.scion.engine(), &partial, &*silent())
        .unwrap();
    assert_eq!(sent.objects_sent as usize, partial.missing.len());
    let segments = |s: &Store| {
        std::fs::read_dir(std::path::Path::new(&s.location).join("segments"))
            .map_or(0, |d| d.count())
    };
    assert_eq!(segments(&bucket), partial.missing.len());
    for _ in 0..2 {
        bucket.scion.gc(std::time::Duration::ZERO, true).unwrap();
    }
    assert_eq!(segments(&bucket), 0, "nothing referenced them");
    bucket.assert_verifies();
}
