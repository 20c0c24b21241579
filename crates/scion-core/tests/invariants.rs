//! The invariants of ARCHITECTURE.md, one test (or more) per invariant, named after it.

mod common;

use std::sync::Arc;

use common::*;
use scion_core::{CoreError, EngineError};
use scion_store::{Backend, CountingBackend, LocalBackend, PutMode};

#[test]
fn invariant_1_objects_are_create_only() {
    let e = env();
    create_shop(&e, 100);
    let segments = e.scion.engine().backend().list("segments/").unwrap();
    assert!(!segments.is_empty());
    let key = &segments[0].key;
    let before = e.scion.engine().backend().get(key).unwrap().0;
    let err = e
        .scion
        .engine()
        .backend()
        .put(key, b"overwrite", PutMode::Create)
        .unwrap_err();
    assert!(matches!(err, scion_store::StoreError::AlreadyExists { .. }));
    assert_eq!(e.scion.engine().backend().get(key).unwrap().0, before);
    // Checkpoints are create-only too: a name is bound once.
    e.scion.checkout(&br("shop"), false).unwrap();
    e.scion
        .checkpoint(&br("shop"), &"v1".parse().unwrap(), Default::default())
        .unwrap();
    assert!(matches!(
        e.scion
            .checkpoint(&br("shop"), &"v1".parse().unwrap(), Default::default()),
        Err(CoreError::Engine(EngineError::CheckpointExists { .. }))
    ));
}

#[test]
fn invariant_2_ref_moves_only_by_compare_and_swap() {
    let e = env();
    create_shop(&e, 100);
    let b = br("shop");
    let path = e.scion.checkout(&b, false).unwrap().path;
    exec(&path, "UPDATE items SET price = 0 WHERE id = 1;");
    // Another writer moves the branch between our read and our publish.
    let (r, etag) = e.scion.engine().read_ref(&b).unwrap();
    let mut moved = r.clone();
    moved.touched_at = scion_core::clock::StoreTime::from_store_clock(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(946_684_800),
    );
    e.scion
        .engine()
        .backend()
        .put(
            "refs/shop/main",
            &moved.encode(),
            PutMode::Update(etag.clone()),
        )
        .unwrap();
    let err = e
        .scion
        .engine()
        .backend()
        .put("refs/shop/main", &r.encode(), PutMode::Update(etag))
        .unwrap_err();
    assert!(matches!(err, scion_store::StoreError::Conflict { .. }));
    // The loser's update is refused, the winner's stands.
    assert_eq!(
        e.scion.engine().read_ref(&b).unwrap().0.touched_at,
        moved.touched_at
    );
}

#[test]
fn invariant_3_a_version_never_changes() {
    let e = env();
    create_shop(&e, 300);
    let b = br("shop");
    let v1 = e.dump_target(&e.scion, "shop");
    e.scion
        .engine()
        .fork(&b, &"try".parse().unwrap(), Default::default())
        .unwrap();
    let path = e.scion.checkout(&br("shop@try"), false).unwrap().path;
    exec(&path, "DELETE FROM items WHERE id % 2 = 0; VACUUM;");
    e.scion
        .checkpoint(
            &br("shop@try"),
            &"half".parse().unwrap(),
            Default::default(),
        )
        .unwrap();
    assert_eq!(
        e.dump_target(&e.scion, "shop"),
        v1,
        "the parent's version is untouched"
    );
    assert_eq!(
        e.dump_target(&e.scion, "shop@try@fork"),
        v1,
        "the fork point is untouched"
    );
    assert_ne!(e.dump_target(&e.scion, "shop@try"), v1);
}

#[test]
fn invariant_4_reads_never_follow_a_parent() {
    // Read cost of a deep fork equals that of its source: count store requests.
    let e = env();
    create_shop(&e, 500);
    let mut prev = "shop@main".to_string();
    for i in 0..20 {
        let name = format!("d{i}");
        e.scion
            .engine()
            .fork(&br(&prev), &name.parse().unwrap(), Default::default())
            .unwrap();
        prev = format!("shop@{name}");
    }
    let counted = |target: &str| {
        let c = Arc::new(CountingBackend::new(Arc::new(
            LocalBackend::open(e.store_dir()).unwrap(),
        )));
        let s = e.reopen_with(c.clone());
        let out = e.path(&format!("{}.db", unique()));
        s.export(&target.parse().unwrap(), &out, false).unwrap();
        c.counts().ranged_gets
    };
    assert_eq!(counted("shop@main"), counted(&prev));
}

#[test]
fn invariant_6_every_byte_read_is_verified() {
    let e = env();
    create_shop(&e, 400);
    let seg = e.scion.engine().backend().list("segments/").unwrap()[0]
        .key
        .clone();
    let file = e.store_dir().join(&seg);
    let mut bytes = std::fs::read(&file).unwrap();
    // Flip one byte in the middle of the frame area.
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let err = e
        .scion
        .export(&"shop".parse().unwrap(), &e.path("out.db"), false)
        .unwrap_err();
    assert!(
        matches!(err, CoreError::Engine(EngineError::Corrupt { .. })),
        "{err}"
    );
    assert!(!e.path("out.db").exists(), "no partial output");
    // A missing segment is loud as well.
    std::fs::remove_file(&file).unwrap();
    let err = e
        .scion
        .export(&"shop".parse().unwrap(), &e.path("out.db"), false)
        .unwrap_err();
    assert!(
        matches!(err, CoreError::Engine(EngineError::Corrupt { .. })),
        "{err}"
    );
}

#[test]
fn invariant_7_checkout_path_never_rewritten_under_a_live_connection() {
    let e = env();
    create_shop(&e, 100);
    let b = br("shop");
    let path = e.scion.checkout(&b, false).unwrap().path;
    exec(&path, "UPDATE items SET price = -1;");
    // A live connection in another process holds the file.
    let mut child = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1]); c.execute('select 1 from items').fetchall(); print('open', flush=True); time.sleep(30)",
            path.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "open");
    let inode_before = std::fs::metadata(&path)
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap();
    let err = e.scion.checkout(&b, true).unwrap_err();
    assert!(matches!(err, CoreError::CheckoutBusy { .. }), "{err}");
    let inode_after = std::fs::metadata(&path)
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap();
    assert_eq!(inode_before, inode_after, "the file was not replaced");
    child.kill().unwrap();
    child.wait().unwrap();
    // With the connection gone, --force replaces it by rename (a new inode).
    e.scion.checkout(&b, true).unwrap();
    let inode_new = std::fs::metadata(&path)
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap();
    assert_ne!(inode_before, inode_new);
    assert!(!dump(&path).contains("-1.0"));
}

#[test]
fn invariant_10_cost_follows_change_not_size() {
    let e = env();
    create_shop(&e, 20_000);
    let c = Arc::new(CountingBackend::new(Arc::new(
        LocalBackend::open(e.store_dir()).unwrap(),
    )));
    let s = e.reopen_with(c.clone());
    let before = c.counts();
    s.engine()
        .fork(&br("shop"), &"f".parse().unwrap(), Default::default())
        .unwrap();
    let fork = c.counts();
    assert_eq!(fork.puts - before.puts, 1, "a fork is one object write");
    assert!(
        fork.bytes_written - before.bytes_written <= 512,
        "a fork writes at most 512 B"
    );
    let path = s.checkout(&br("shop@f"), false).unwrap().path;
    exec(&path, "UPDATE items SET price = 1 WHERE id = 777;");
    let before = c.counts();
    let report = s
        .checkpoint(&br("shop@f"), &"one".parse().unwrap(), Default::default())
        .unwrap();
    let after = c.counts();
    assert!(report.committed);
    assert!(report.pages_changed <= 2, "{report:?}");
    // Lease on the ref, segment, ref (head moved, lease released), checkpoint object.
    assert_eq!(after.puts - before.puts, 4);
    assert!(
        after.bytes_written - before.bytes_written < 3072,
        "{}",
        after.bytes_written - before.bytes_written
    );
}

/// A checkout whose file was touched but holds the same pages commits nothing, and takes no
/// lease for it: the checkpoint's one write is its name.
#[test]
fn a_checkpoint_with_nothing_to_commit_writes_only_its_name() {
    let e = env();
    create_shop(&e, 2_000);
    let c = Arc::new(CountingBackend::new(Arc::new(
        LocalBackend::open(e.store_dir()).unwrap(),
    )));
    let s = e.reopen_with(c.clone());
    s.engine()
        .fork(&br("shop"), &"f".parse().unwrap(), Default::default())
        .unwrap();
    let path = s.checkout(&br("shop@f"), false).unwrap().path;
    // Same bytes, new modification time: the fingerprint no longer proves it clean.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let before = c.counts();
    let report = s
        .checkpoint(&br("shop@f"), &"same".parse().unwrap(), Default::default())
        .unwrap();
    let after = c.counts();
    assert!(!report.committed, "{report:?}");
    assert_eq!(after.puts - before.puts, 1, "only the checkpoint's name");
    let (r, _) = s.engine().read_ref(&br("shop@f")).unwrap();
    assert!(r.lease.is_none() && r.history.is_empty(), "{r:?}");
}
