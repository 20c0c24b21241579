//! Checkouts: reuse, refusal of uncheckpointed changes, staleness, cloning, imports of live
//! files, and clean failure.

mod common;

use std::process::Command;
use std::sync::Arc;

use common::*;
use rusqlite::Connection;
use scion_core::checkout::{probe_clone, CloneCapability};
use scion_core::{
    CheckoutAction, CheckoutState, ClonePolicy, CoreError, DbName, EngineError, Scion, ScionOptions,
};
use scion_store::{Backend, CountingBackend, LocalBackend, PutMode};

#[test]
fn a_clean_current_checkout_is_reused_without_reading_the_store() {
    let e = env();
    create_shop(&e, 2000);
    let first = e.scion.checkout(&br("shop"), false).unwrap();
    assert_eq!(first.action, CheckoutAction::Materialized);
    let c = Arc::new(CountingBackend::new(Arc::new(
        LocalBackend::open(e.store_dir()).unwrap(),
    )));
    let s = e.reopen_with(c.clone());
    let again = s.checkout(&br("shop"), false).unwrap();
    assert_eq!(again.action, CheckoutAction::Reused);
    assert_eq!(again.path, first.path);
    let counts = c.counts();
    assert_eq!(counts.ranged_gets, 0, "no segment read");
    assert_eq!(counts.puts, 0, "no write");
}

#[test]
fn a_dirty_checkout_of_the_current_head_is_the_working_copy_then_discarded_with_force() {
    let e = env();
    create_shop(&e, 100);
    let b = br("shop");
    let path = e.scion.checkout(&b, false).unwrap().path;
    let clean = dump(&path);
    // Written at once after the checkout: the racily-clean window must not hide it.
    exec(&path, "UPDATE items SET name = 'changed' WHERE id = 3;");
    assert_eq!(
        e.scion
            .checkout_state(&b, &e.scion.engine().read_ref(&b).unwrap().0.root)
            .unwrap(),
        CheckoutState::Dirty
    );
    // The working copy: its path again, untouched, reported dirty.
    let again = e.scion.checkout(&b, false).unwrap();
    assert_eq!(again.path, path);
    assert!(again.dirty);
    assert!(dump(&path).contains("changed"), "the file was left alone");
    exec(
        &path,
        "UPDATE items SET name = 'changed twice' WHERE id = 4;",
    );
    assert!(e.scion.checkout(&b, false).unwrap().dirty);
    let report = e.scion.checkout(&b, true).unwrap();
    assert_eq!(report.discarded, Some(CheckoutState::Dirty));
    assert_eq!(dump(&path), clean);
}

#[test]
fn wal_content_of_an_open_connection_counts_as_a_change() {
    let e = env();
    create_shop(&e, 100);
    let b = br("shop");
    let path = e.scion.checkout(&b, false).unwrap().path;
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("UPDATE items SET price = 42 WHERE id = 5;")
        .unwrap();
    // The frame is in the WAL; the main file is untouched.
    assert!(
        std::fs::metadata(format!("{}-wal", path.display()))
            .unwrap()
            .len()
            > 0
    );
    let report = e
        .scion
        .checkpoint(&b, &"wal".parse().unwrap(), Default::default())
        .unwrap();
    assert!(report.committed);
    drop(conn);
    assert!(e
        .dump_target(&e.scion, "shop@main@wal")
        .contains("Real(42.0)"));
}

#[test]
fn a_file_without_a_record_is_not_overwritten() {
    let e = env();
    create_shop(&e, 10);
    let b = br("shop");
    let path = e.scion.checkout_path(&b);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"precious").unwrap();
    assert!(matches!(
        e.scion.checkout(&b, false),
        Err(CoreError::UnknownCheckout { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    e.scion.checkout(&b, true).unwrap();
    assert!(dump(&path).contains("item-9"));
}

#[test]
fn a_stale_checkout_is_refreshed_but_never_checkpointed() {
    let e = env();
    create_shop(&e, 50);
    let b = br("shop");
    e.scion
        .engine()
        .fork(&b, &"other".parse().unwrap(), Default::default())
        .unwrap();
    let other = e.scion.checkout(&br("shop@other"), false).unwrap().path;
    exec(&other, "DELETE FROM items WHERE id > 10;");
    e.scion
        .checkpoint(
            &br("shop@other"),
            &"small".parse().unwrap(),
            Default::default(),
        )
        .unwrap();
    let path = e.scion.checkout(&b, false).unwrap().path;
    // Move main's head under its checkout, as another process would.
    let (mut r, etag) = e.scion.engine().read_ref(&b).unwrap();
    r.root = e.scion.engine().read_ref(&br("shop@other")).unwrap().0.root;
    r.version += 1;
    e.scion
        .engine()
        .backend()
        .put("refs/shop/main", &r.encode(), PutMode::Update(etag))
        .unwrap();
    assert_eq!(
        e.scion.checkout_state(&b, &r.root).unwrap(),
        CheckoutState::Stale
    );
    assert!(matches!(
        e.scion
            .checkpoint(&b, &"x".parse().unwrap(), Default::default()),
        Err(CoreError::StaleCheckout { .. })
    ));
    let report = e.scion.checkout(&b, false).unwrap();
    assert_ne!(report.action, CheckoutAction::Reused);
    assert_eq!(dump(&path), dump(&other));
}

#[test]
fn a_second_checkout_of_the_same_version_is_copied_and_verified() {
    let e = env();
    create_shop(&e, 3000);
    e.scion
        .engine()
        .fork(&br("shop"), &"twin".parse().unwrap(), Default::default())
        .unwrap();
    let a = e.scion.checkout(&br("shop"), false).unwrap();
    let b = e.scion.checkout(&br("shop@twin"), false).unwrap();
    let expected = match probe_clone(e.scion.checkouts_dir()).unwrap() {
        CloneCapability::Supported => CheckoutAction::Cloned,
        CloneCapability::Unsupported { .. } => CheckoutAction::Copied,
        other => panic!("a clone capability this test does not know: {other:?}"),
    };
    assert_eq!(b.action, expected);
    assert_eq!(dump(&a.path), dump(&b.path));
    // The copy is recorded clean: reused next time.
    assert_eq!(
        e.scion.checkout(&br("shop@twin"), false).unwrap().action,
        CheckoutAction::Reused
    );
}

fn policy_env(dir: &std::path::Path, policy: ClonePolicy) -> Scion {
    let backend = Arc::new(LocalBackend::open(dir.join("store")).unwrap());
    let options = ScionOptions::new(dir.join("store").join("checkouts"), policy);
    match Scion::init(backend.clone(), "t", options.clone(), Default::default()) {
        Ok(s) => s,
        Err(_) => Scion::open(backend, "t", options).unwrap(),
    }
}

#[test]
fn clone_policy_always_fails_closed_where_the_filesystem_cannot_clone() {
    let dir = tempfile::tempdir().unwrap();
    if probe_clone(dir.path()).unwrap() == CloneCapability::Supported {
        eprintln!("NOTE: the temp filesystem can clone; the loop-mounted XFS test covers 'always'");
        return;
    }
    let s = policy_env(dir.path(), ClonePolicy::Always);
    let src = dir.path().join("src.db");
    seed(&src, 10);
    s.engine()
        .create(&DbName::new("shop").unwrap(), Some(&src))
        .unwrap();
    let err = s.checkout(&br("shop"), false).unwrap_err();
    assert!(matches!(err, CoreError::CloneUnsupported { .. }), "{err}");
    assert!(
        !s.checkout_path(&br("shop")).exists(),
        "no file, not even a partial one"
    );
}

/// Mount a small XFS image (reflink on) for the clone path; `None` with a loud reason
/// where this machine cannot.
fn mount_xfs() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    let why = |m: &str| {
        eprintln!("SKIPPED clone-path test: {m}");
        if std::env::var("CI").is_ok() {
            panic!("CI must not skip the clone-path test: {m}");
        }
        None
    };
    if unsafe { libc::geteuid() } != 0 {
        return why("mounting a loop XFS image needs root");
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("xfs.img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let ok = |c: &mut Command| c.status().map(|s| s.success()).unwrap_or(false);
    if !ok(Command::new("truncate").args(["-s", "320M", img.to_str().unwrap()])) {
        return why("cannot create the image file");
    }
    if !ok(Command::new("mkfs.xfs").args(["-q", "-m", "reflink=1", img.to_str().unwrap()])) {
        return why("mkfs.xfs is missing (apt-get install xfsprogs) or failed");
    }
    if !ok(Command::new("mount").args(["-o", "loop", img.to_str().unwrap(), mnt.to_str().unwrap()]))
    {
        return why("mount -o loop failed (no loop devices in this sandbox?)");
    }
    Some((dir, mnt))
}

#[test]
fn clone_policy_always_clones_on_a_copy_on_write_filesystem() {
    let Some((_dir, mnt)) = mount_xfs() else {
        return;
    };
    let result = std::panic::catch_unwind(|| {
        let s = policy_env(&mnt, ClonePolicy::Always);
        assert_eq!(
            probe_clone(s.checkouts_dir()).unwrap(),
            CloneCapability::Supported
        );
        let src = mnt.join("src.db");
        seed(&src, 5000);
        s.engine()
            .create(&DbName::new("shop").unwrap(), Some(&src))
            .unwrap();
        s.engine()
            .fork(&br("shop"), &"b".parse().unwrap(), Default::default())
            .unwrap();
        assert_eq!(
            s.checkout(&br("shop"), false).unwrap().action,
            CheckoutAction::Materialized
        );
        let twin = s.checkout(&br("shop@b"), false).unwrap();
        assert_eq!(twin.action, CheckoutAction::Cloned);
        assert_eq!(dump(&twin.path), dump(&s.checkout_path(&br("shop"))));
    });
    let _ = Command::new("umount").arg(&mnt).status();
    result.unwrap();
}

#[test]
fn import_reads_a_live_wal_database_without_modifying_it() {
    let e = env();
    let src = e.path("live.db");
    seed(&src, 500);
    // A writer keeps its connection open with frames only in the WAL.
    let writer = Connection::open(&src).unwrap();
    writer.execute_batch("PRAGMA wal_autocheckpoint=0; UPDATE items SET price = 7 WHERE id <= 100; INSERT INTO items(name, price) VALUES ('late', 1);").unwrap();
    let wal = e.path("live.db-wal");
    let before = (std::fs::read(&src).unwrap(), std::fs::read(&wal).unwrap());
    assert!(!before.1.is_empty());
    let expected = dump_conn(&writer);
    e.scion
        .engine()
        .create(&DbName::new("live").unwrap(), Some(&src))
        .unwrap();
    let after = (std::fs::read(&src).unwrap(), std::fs::read(&wal).unwrap());
    assert!(
        before == after,
        "the source and its WAL are byte-for-byte unchanged"
    );
    assert_eq!(e.dump_target(&e.scion, "live"), expected);
    drop(writer);
}

#[test]
fn bad_import_sources_fail_clearly_and_leave_nothing_behind() {
    let e = env();
    let text = e.path("notes.txt");
    std::fs::write(
        &text,
        "just some text, definitely not a database\n".repeat(200),
    )
    .unwrap();
    let good = e.path("good.db");
    seed(&good, 2000);
    exec(&good, "PRAGMA wal_checkpoint(TRUNCATE);");
    let truncated = e.path("truncated.db");
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2 + 100]).unwrap();
    let short = e.path("short.db");
    std::fs::write(&short, &bytes[..bytes.len() - 4096]).unwrap();
    for (name, path) in [
        ("text", text),
        ("truncated", truncated),
        ("short", short),
        ("missing", e.path("nope.db")),
    ] {
        let err = e
            .scion
            .engine()
            .create(&DbName::new(name).unwrap(), Some(&path))
            .unwrap_err();
        assert!(
            matches!(err, EngineError::NotSqlite { .. }),
            "{name}: {err}"
        );
    }
    assert!(e.scion.engine().backend().list("refs/").unwrap().is_empty());
    assert!(e
        .scion
        .engine()
        .backend()
        .list("segments/")
        .unwrap()
        .is_empty());
}

#[test]
fn posix_locks_of_this_process_survive_a_checkpoint() {
    // A read transaction held by this process must keep its locks while scion runs here
    // (closing any descriptor of the file drops them; see docs/decisions/checkouts.md, "Library constraint").
    let e = env();
    create_shop(&e, 200);
    let b = br("shop");
    let path = e.scion.checkout(&b, false).unwrap().path;
    exec(&path, "UPDATE items SET price = 3 WHERE id = 2;");
    let reader = Connection::open(&path).unwrap();
    reader
        .execute_batch("BEGIN; SELECT count(*) FROM items;")
        .unwrap();
    // This process's locks on the checkout and its -shm (other tests run in parallel
    // threads of the same process, so count only these two files). A file is named by its
    // device and inode, as /proc/locks prints them: another test's file on another
    // filesystem (the loop-mounted XFS) can have the same inode number.
    let files: Vec<String> = [
        path.clone(),
        std::path::PathBuf::from(format!("{}-shm", path.display())),
    ]
    .iter()
    .map(|p| {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(p).unwrap();
        let dev = m.dev() as libc::dev_t;
        format!(
            "{:02x}:{:02x}:{}",
            libc::major(dev),
            libc::minor(dev),
            m.ino()
        )
    })
    .collect();
    let mine = || -> usize {
        let pid = std::process::id().to_string();
        std::fs::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.get(4) == Some(&pid.as_str())
                    && f.get(5).is_some_and(|d| files.iter().any(|x| x == d))
            })
            .count()
    };
    let held = mine();
    assert!(held > 0, "the read transaction holds locks");
    e.scion
        .checkpoint(&b, &"c".parse().unwrap(), Default::default())
        .unwrap();
    e.scion.checkout(&b, false).unwrap();
    assert_eq!(mine(), held, "scion dropped no lock of this process");
    reader.execute_batch("COMMIT").unwrap();
}

#[derive(Default)]
struct Recorded(std::sync::Mutex<Vec<(String, u64)>>);

impl scion_core::progress::Progress for Recorded {
    fn start(&self, what: &'static str, total: u64) {
        self.0
            .lock()
            .unwrap()
            .push((format!("start {what}"), total));
    }
    fn advance(&self, n: u64) {
        self.0.lock().unwrap().push(("advance".into(), n));
    }
    fn finish(&self) {
        self.0.lock().unwrap().push(("finish".into(), 0));
    }
}

#[test]
fn long_operations_report_progress() {
    let e = env();
    create_shop(&e, 20_000);
    let rec = Arc::new(Recorded::default());
    let mut options = e.options();
    options.progress = scion_core::progress::ProgressSink(rec.clone());
    let s = Scion::open(
        Arc::new(LocalBackend::open(e.store_dir()).unwrap()),
        "t",
        options,
    )
    .unwrap();
    let pages = s.engine().read_ref(&br("shop")).unwrap().0.page_count as u64;
    s.checkout(&br("shop"), false).unwrap();
    let events = rec.0.lock().unwrap().clone();
    assert_eq!(events.first(), Some(&("start writing".to_string(), pages)));
    assert_eq!(events.last(), Some(&("finish".to_string(), 0)));
    let advanced: u64 = events
        .iter()
        .filter(|(k, _)| k == "advance")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(advanced, pages, "every page written is reported once");
}

#[test]
fn a_dirty_checkout_of_a_head_that_moved_is_refused() {
    let e = env();
    create_shop(&e, 100);
    let b = br("shop");
    let path = e.scion.checkout(&b, false).unwrap().path;
    exec(&path, "UPDATE items SET name = 'mine' WHERE id = 3;");
    e.scion
        .engine()
        .fork(&b, &"other".parse().unwrap(), Default::default())
        .unwrap();
    let p2 = e.scion.checkout(&br("shop@other"), false).unwrap().path;
    exec(&p2, "DELETE FROM items WHERE id > 50;");
    e.scion
        .checkpoint(&br("shop@other"), &"c".parse().unwrap(), Default::default())
        .unwrap();
    // Another process moves main's head underneath the file.
    let (r, etag) = e.scion.engine().read_ref(&b).unwrap();
    let (o, _) = e.scion.engine().read_ref(&br("shop@other")).unwrap();
    let mut moved = r.clone();
    moved.root = o.root;
    moved.version += 1;
    e.scion
        .engine()
        .backend()
        .put(
            "refs/shop/main",
            &moved.encode(),
            scion_store::PutMode::Update(etag),
        )
        .unwrap();
    // Changes made on a head the branch has left cannot be checkpointed: a stale checkout,
    // whose hint says how to keep the file.
    let err = e.scion.checkout(&b, false).unwrap_err();
    assert!(matches!(err, CoreError::StaleCheckout { .. }), "{err}");
    assert!(dump(&path).contains("mine"), "refusal left the file alone");
}
