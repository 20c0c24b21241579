//! One owner for a checkout's files: every replacement and removal of a database, its
//! SQLite journals and scion's records goes through it. Each test is named after the
//! defect it pins.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use common::*;
use rusqlite::Connection;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::progress::{Progress, ProgressSink};
use scion_core::{CheckoutState, CoreError, Scion, Target};
use scion_store::LocalBackend;

fn count(path: &Path, sql: &str) -> i64 {
    let c = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// A store with database `shop` of `rows` rows and its main branch checked out.
fn shop_checked_out(rows: usize) -> (Env, scion_core::BranchRef, PathBuf) {
    let e = env();
    create_shop(&e, rows);
    let b = br("shop");
    let path = e.scion.checkout(&b, false).unwrap().path;
    (e, b, path)
}

fn side(path: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", path.display()))
}

/// Leave a real WAL holding an uncommitted-to-the-file row (`id = 999999`) beside `db`,
/// as a connection does when its process dies: copied while the connection is open.
fn stale_wal_for(db: &Path) -> Vec<u8> {
    let c = Connection::open(db).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
         INSERT INTO items(id, name, price) VALUES (999999, 'from-a-stale-wal', 1);",
    )
    .unwrap();
    let wal = std::fs::read(side(db, "-wal")).unwrap();
    assert!(!wal.is_empty());
    drop(c);
    wal
}

#[test]
fn stale_wal_beside_a_missing_checkout_is_never_replayed() {
    let (e, b, path) = shop_checked_out(50);
    let wal = stale_wal_for(&path);
    // "A cache, safe to delete": the user removes the file; the WAL stays behind.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(side(&path, "-wal"), &wal).unwrap();
    let report = e.scion.checkout(&b, false).unwrap();
    assert_eq!(report.path, path);
    assert!(!side(&path, "-wal").exists(), "the stale WAL was removed");
    assert_eq!(
        count(&path, "SELECT count(*) FROM items WHERE id = 999999"),
        0
    );
    let cp = e
        .scion
        .checkpoint(&b, &"after".parse().unwrap(), Default::default())
        .unwrap();
    assert!(!cp.committed, "nothing from the stale WAL was committed");
}

#[test]
fn stale_journal_beside_a_missing_checkout_is_removed() {
    let (e, b, path) = shop_checked_out(20);
    std::fs::remove_file(&path).unwrap();
    std::fs::write(side(&path, "-journal"), vec![7u8; 4096]).unwrap();
    std::fs::write(side(&path, "-shm"), vec![0u8; 32768]).unwrap();
    e.scion.checkout(&b, false).unwrap();
    assert!(!side(&path, "-journal").exists());
    assert!(!side(&path, "-shm").exists());
    assert_eq!(count(&path, "SELECT count(*) FROM items"), 20);
}

#[test]
fn export_refuses_leftover_journals_beside_the_target_unless_forced() {
    let e = env();
    create_shop(&e, 30);
    let wal = stale_wal_for(&e.path("shop.db"));
    let out = e.path("out.db");
    std::fs::write(side(&out, "-wal"), &wal).unwrap();
    let t: Target = "shop".parse().unwrap();
    match e.scion.export(&t, &out, false) {
        Err(CoreError::JournalLeftovers { files, .. }) => assert_eq!(files, "out.db-wal"),
        other => panic!("expected JournalLeftovers, got {other:?}"),
    }
    assert!(!out.exists(), "nothing was written");
    e.scion.export(&t, &out, true).unwrap();
    assert!(!side(&out, "-wal").exists());
    assert_eq!(
        count(&out, "SELECT count(*) FROM items WHERE id = 999999"),
        0
    );
    assert_eq!(count(&out, "SELECT count(*) FROM items"), 30);
}

#[test]
fn export_refuses_targets_inside_the_store_and_checkout_trees() {
    let (e, _, checkout) = shop_checked_out(5);
    let t: Target = "shop".parse().unwrap();
    let manifest = e.store_dir().join("scion.json");
    let before = std::fs::read(&manifest).unwrap();
    for target in [
        manifest.clone(),
        e.store_dir().join("checkouts/../scion.json"),
        checkout.clone(),
        e.store_dir().join("checkouts-ro/new.db"),
    ] {
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        match e.scion.export(&t, &target, true) {
            Err(CoreError::InsideStore { .. }) => {}
            other => panic!("{}: expected InsideStore, got {other:?}", target.display()),
        }
    }
    assert_eq!(
        std::fs::read(&manifest).unwrap(),
        before,
        "the manifest is intact"
    );
    e.reopen().status().unwrap();
}

#[test]
fn export_refuses_a_directory_even_with_force() {
    let e = env();
    create_shop(&e, 5);
    let out = e.path("somewhere");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep.txt"), b"mine").unwrap();
    match e.scion.export(&"shop".parse().unwrap(), &out, true) {
        Err(CoreError::OutputIsDirectory { .. }) => {}
        other => panic!("expected OutputIsDirectory, got {other:?}"),
    }
    assert_eq!(std::fs::read(out.join("keep.txt")).unwrap(), b"mine");
}

#[test]
fn destroy_removes_journals_records_and_lock_file_with_the_database() {
    let e = env();
    create_shop(&e, 10);
    e.scion
        .engine()
        .fork(&br("shop"), &"tmp".parse().unwrap(), Default::default())
        .unwrap();
    let b = br("shop@tmp");
    let path = e.scion.checkout(&b, false).unwrap().path;
    let wal = stale_wal_for(&path);
    std::fs::write(side(&path, "-wal"), &wal).unwrap();
    std::fs::write(side(&path, "-journal"), b"x").unwrap();
    e.scion.destroy(&b, true).unwrap();
    let dir = path.parent().unwrap();
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tmp.db"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    // A new branch of the same name starts from its own head only.
    e.scion
        .engine()
        .fork(&br("shop"), &"tmp".parse().unwrap(), Default::default())
        .unwrap();
    let again = e.scion.checkout(&b, false).unwrap().path;
    assert_eq!(
        count(&again, "SELECT count(*) FROM items WHERE id = 999999"),
        0
    );
}

/// Runs `action` once, the first time a phase named `phase` starts: a write landing in
/// the middle of a long operation.
struct OnPhase {
    phase: &'static str,
    action: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Progress for OnPhase {
    fn start(&self, what: &'static str, _: u64) {
        if what == self.phase {
            if let Some(f) = self.action.lock().unwrap().take() {
                f();
            }
        }
    }
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// The store of `e` opened again with a hook that writes `sql` into `path` once the new
/// checkout starts being written.
fn with_write_during_materialize(e: &Env, path: &Path, sql: &'static str) -> Scion {
    let mut options = e.options();
    let p = path.to_path_buf();
    options.progress = ProgressSink(Arc::new(OnPhase {
        phase: "writing",
        action: Mutex::new(Some(Box::new(move || exec(&p, sql)))),
    }));
    Scion::open(
        Arc::new(LocalBackend::open(e.store_dir()).unwrap()),
        "test",
        options,
    )
    .unwrap()
}

/// Roll `shop` back while a row (`id = 777777`) is written into its checkout, between the
/// moment the refresh judged the file and the moment it would replace it.
fn rollback_with_a_write_landing(
    force: bool,
) -> (Env, PathBuf, scion_core::ops::lifecycle::MoveReport) {
    let (e, b, path) = shop_checked_out(200);
    // Rolling a protected main back would need force, which is what this compares against.
    e.scion.engine().set_protected(&b, false).unwrap();
    exec(&path, "UPDATE items SET price = 12345 WHERE id = 1;");
    e.scion
        .checkpoint(&b, &"one".parse().unwrap(), Default::default())
        .unwrap();
    let s = with_write_during_materialize(
        &e,
        &path,
        "INSERT INTO items(id, name, price) VALUES (777777, 'landed-mid-rollback', 1);",
    );
    let opts = MoveOptions {
        force,
        ..MoveOptions::default()
    };
    let report = s.rollback(&b, &"init".parse().unwrap(), &opts).unwrap();
    (e, path, report)
}

#[test]
fn a_write_during_rollback_is_kept_not_silently_discarded() {
    let (e, path, report) = rollback_with_a_write_landing(false);
    assert!(!report.discarded_changes);
    assert!(
        !report.warnings.is_empty(),
        "the report says the checkout was left as it was"
    );
    assert_eq!(
        count(&path, "SELECT count(*) FROM items WHERE id = 777777"),
        1,
        "the row written during the rollback is still in the checkout"
    );
    let head = e.scion.engine().read_ref(&br("shop")).unwrap().0.root;
    assert_eq!(
        e.scion.checkout_state(&br("shop"), &head).unwrap(),
        CheckoutState::Dirty
    );
}

#[test]
fn a_write_during_a_forced_rollback_is_reported_discarded() {
    let (_e, path, report) = rollback_with_a_write_landing(true);
    assert!(report.discarded_changes, "the discarded row is reported");
    assert_eq!(
        count(&path, "SELECT count(*) FROM items WHERE id = 777777"),
        0
    );
    assert_eq!(
        count(&path, "SELECT price = 12345 FROM items WHERE id = 1"),
        0,
        "the checkout holds the version rolled back to"
    );
}

#[test]
fn a_file_created_while_a_checkout_is_written_is_never_clobbered() {
    let (e, b, path) = shop_checked_out(100);
    // The user deletes the cached file; the next checkout writes it again from the store.
    std::fs::remove_file(&path).unwrap();
    let s =
        with_write_during_materialize(&e, &path, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    // The hook makes a new file where there was none: the checkout must not clobber it.
    // (It sits beside the deleted file's record, so it reads as that file's working copy.)
    match s.checkout(&b, false) {
        Err(CoreError::UnknownCheckout { .. } | CoreError::DirtyCheckout { .. }) => {}
        Ok(r) if r.dirty && r.action == scion_core::CheckoutAction::Reused => {}
        other => panic!("expected the new file kept, got {other:?}"),
    }
    assert_eq!(count(&path, "SELECT count(*) FROM t"), 1);
}

#[test]
fn checkout_force_repairs_an_unreadable_checkout() {
    let (e, b, path) = shop_checked_out(30);
    let head = e.scion.engine().read_ref(&b).unwrap().0.root;
    for damage in ["garbage", "directory"] {
        std::fs::remove_file(&path).ok();
        std::fs::remove_dir_all(&path).ok();
        match damage {
            "garbage" => std::fs::write(&path, vec![0xA5u8; 12288]).unwrap(),
            _ => {
                std::fs::create_dir(&path).unwrap();
                std::fs::write(path.join("inner"), b"x").unwrap();
            }
        }
        // One bad file does not take status down, and it is named for what it is.
        let statuses = e.scion.branch_statuses(&"shop".parse().unwrap()).unwrap();
        let main = statuses.iter().find(|s| s.branch == "main").unwrap();
        assert_eq!(main.checkout, CheckoutState::Unknown, "{damage}");
        assert_eq!(
            e.scion.checkout_state(&b, &head).unwrap(),
            CheckoutState::Unknown
        );
        assert!(matches!(
            e.scion.checkout(&b, false),
            Err(CoreError::UnknownCheckout { .. })
        ));
        let repaired = e.scion.checkout(&b, true).unwrap();
        assert_eq!(repaired.discarded, Some(CheckoutState::Unknown), "{damage}");
        assert_eq!(count(&path, "SELECT count(*) FROM items"), 30, "{damage}");
        assert_eq!(
            e.scion.checkout_state(&b, &head).unwrap(),
            CheckoutState::Clean
        );
    }
}

#[test]
fn a_record_from_another_boot_is_checked_by_hashing() {
    use scion_core::checkout::Sidecar;
    let e = env();
    create_shop(&e, 100);
    let b = br("shop");
    let head = e.scion.engine().read_ref(&b).unwrap().0.root;
    let path = e.scion.checkout(&b, false).unwrap().path;
    let record_path = side(&path, ".scion");
    // What a machine crash can leave: metadata that says the file was written, pages that
    // never reached the disk (same size, mtime and inode; other bytes).
    let md = std::fs::metadata(&path).unwrap();
    let len = md.len() as usize;
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &vec![0u8; len - 4096], 4096).unwrap();
    f.set_modified(md.modified().unwrap()).unwrap();
    drop(f);
    // A crash leaves the ctime too as the record has it (a write from user space cannot
    // put it back: the record is given the file's).
    let mut record = Sidecar::decode(&std::fs::read(&record_path).unwrap()).unwrap();
    record.fingerprint.ctime_ns = scion_core::checkout::Fingerprint::of(&path)
        .unwrap()
        .unwrap()
        .ctime_ns;
    std::fs::write(&record_path, record.encode()).unwrap();
    // In the boot the record was made in, the fingerprint vouches for the file.
    assert_eq!(
        e.scion.checkout_state(&b, &head).unwrap(),
        CheckoutState::Clean
    );
    // A record from another boot does not.
    let mut record = Sidecar::decode(&std::fs::read(&record_path).unwrap()).unwrap();
    record.fingerprint.boot ^= 1;
    std::fs::write(&record_path, record.encode()).unwrap();
    assert_eq!(
        e.scion.checkout_state(&b, &head).unwrap(),
        CheckoutState::Dirty
    );
}

#[test]
fn a_read_only_checkout_of_the_version_is_a_clone_source() {
    let (e, b, path) = shop_checked_out(300);
    exec(&path, "UPDATE items SET price = 1 WHERE id < 50;");
    e.scion
        .checkpoint(&b, &"c1".parse().unwrap(), Default::default())
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    let ro = e
        .scion
        .checkout_read_only(&"shop@main@c1".parse().unwrap())
        .unwrap();
    e.scion
        .engine()
        .fork(
            &b,
            &"x".parse().unwrap(),
            scion_core::ForkOptions {
                at: Some("c1".parse().unwrap()),
                ..Default::default()
            },
        )
        .unwrap();
    let x = e.scion.checkout(&br("shop@x"), false).unwrap();
    assert!(
        matches!(
            x.action,
            scion_core::CheckoutAction::Copied | scion_core::CheckoutAction::Cloned
        ),
        "{:?}",
        x.action
    );
    let header = std::fs::read(&x.path).unwrap();
    assert_eq!(&header[18..20], &[2, 2], "the copy is a WAL-mode checkout");
    assert_eq!(dump(&x.path), dump(&ro.path));
    let head = e.scion.engine().read_ref(&br("shop@x")).unwrap().0.root;
    assert_eq!(
        e.scion.checkout_state(&br("shop@x"), &head).unwrap(),
        CheckoutState::Clean
    );
}

/// Two processes inspecting one checkout could both read a pending record that names the
/// head; the one that renamed it second failed with "no such file" instead of reading the
/// record the first had adopted. Threads race the adoption many times here: every load
/// must answer the adopted record.
#[test]
fn a_pending_record_adopted_by_a_concurrent_load_is_read_not_an_error() {
    use scion_core::checkout::{Fingerprint, Sidecar};
    use scion_core::format::{Locator, SegmentId};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    std::fs::write(&db, b"").unwrap();
    let root = Locator {
        segment: SegmentId(7),
        offset: 0,
        len: 64,
    };
    let record = Sidecar {
        page_size: 4096,
        root,
        version: 2,
        fingerprint: Fingerprint::default(),
        stamp_ns: 0,
        hashes: vec![1, 2, 3],
    };
    for round in 0..300 {
        record.store_pending(&db).unwrap();
        let gate = std::sync::Barrier::new(3);
        std::thread::scope(|s| {
            let loads: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(|| {
                        gate.wait();
                        Sidecar::load(&db, &root)
                    })
                })
                .collect();
            for l in loads {
                let loaded = l.join().unwrap();
                assert_eq!(
                    loaded.unwrap_or_else(|e| panic!("round {round}: {e}")),
                    Some(record.clone()),
                    "round {round}"
                );
            }
        });
    }
}
