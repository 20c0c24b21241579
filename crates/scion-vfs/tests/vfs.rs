//! The scion VFS's isolation and refusals: read snapshots and forks, stale writers, WAL,
//! read-only targets, a second writer, a lease, a checkout with changes, versions.

mod common;

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::{BranchRef, LeaseChange, Scion};

use common::*;

#[test]
fn a_read_transaction_keeps_its_snapshot_while_another_connection_commits() {
    let e = Env::new();
    e.create("iso", 4096, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    let reader = e.open("iso@main");
    let writer = e.open("iso@main");
    reader.execute_batch("BEGIN").unwrap();
    let count = |c: &Connection| -> i64 {
        c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&reader), 1);
    writer
        .execute_batch("INSERT INTO t VALUES (2); INSERT INTO t VALUES (3);")
        .unwrap();
    assert_eq!(count(&writer), 3);
    assert_eq!(count(&reader), 1, "the reader's snapshot moved under it");
    reader.execute_batch("COMMIT").unwrap();
    assert_eq!(count(&reader), 3, "a new read transaction sees the commit");
}

#[test]
fn a_writer_whose_snapshot_is_stale_gets_busy_snapshot() {
    let e = Env::new();
    e.create("stale", 4096, "CREATE TABLE t(x);");
    let a = e.open("stale@main");
    let b = e.open("stale@main");
    a.execute_batch("BEGIN").unwrap();
    a.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
        .unwrap();
    b.execute_batch("INSERT INTO t VALUES (1)").unwrap();
    let err = a.execute_batch("INSERT INTO t VALUES (2)").unwrap_err();
    assert_eq!(
        err.sqlite_error().map(|e| e.extended_code),
        Some(rusqlite::ffi::SQLITE_BUSY_SNAPSHOT),
        "{err}"
    );
    a.execute_batch("ROLLBACK").unwrap();
    a.execute_batch("INSERT INTO t VALUES (2)").unwrap();
    assert_eq!(
        a.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .unwrap(),
        2
    );
}

#[test]
fn a_connection_reports_the_versions_it_committed_not_the_head_others_moved() {
    let e = Env::new();
    e.create("mine", 4096, "CREATE TABLE t(x);");
    let a = e.open("mine@main");
    let b = e.open("mine@main");
    let pragma = |c: &Connection, name: &str| -> String {
        c.pragma_query_value(None, name, |r| r.get(0)).unwrap()
    };
    assert_eq!(pragma(&a, "scion_commits"), "0", "nothing committed yet");
    a.execute_batch("INSERT INTO t VALUES (1)").unwrap();
    let mine = pragma(&a, "scion_version");
    b.execute_batch("INSERT INTO t VALUES (2); INSERT INTO t VALUES (3);")
        .unwrap();
    assert_eq!(pragma(&a, "scion_commits"), format!("1 {mine}"));
    let head: u64 = pragma(&a, "scion_version").parse().unwrap();
    assert_eq!(head, mine.parse::<u64>().unwrap() + 2, "the head moved on");
    assert_eq!(pragma(&b, "scion_commits"), format!("2 {head}"));
}

#[test]
fn a_forks_writes_never_show_on_its_parent() {
    let e = Env::new();
    e.create("fam", 4096, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    e.scion
        .engine()
        .fork(
            &"fam@main".parse().unwrap(),
            &"child".parse().unwrap(),
            Default::default(),
        )
        .unwrap();
    let parent = e.open("fam@main");
    let child = e.open("fam@child");
    child.execute_batch("INSERT INTO t VALUES (2)").unwrap();
    let count = |c: &Connection| -> i64 {
        c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&child), 2);
    assert_eq!(count(&parent), 1);
    // A fork is O(1) and its first read needs no materialized file.
    assert!(!e
        .scion
        .checkout_path(&"fam@child".parse().unwrap())
        .exists());
}

#[test]
fn rollback_discards_and_commit_costs_the_changed_pages() {
    let e = Env::new();
    e.create(
        "cost",
        4096,
        "CREATE TABLE t(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) INSERT INTO t SELECT randomblob(1000) FROM n;",
    );
    let c = e.open("cost@main");
    let before = e.head_version("cost@main");
    c.execute_batch("BEGIN; DELETE FROM t; ROLLBACK;").unwrap();
    assert_eq!(
        e.head_version("cost@main"),
        before,
        "a rollback publishes nothing"
    );
    c.execute_batch("UPDATE t SET x = zeroblob(1000) WHERE rowid = 7")
        .unwrap();
    assert_eq!(e.head_version("cost@main"), before + 1);
    let v: String = c
        .pragma_query_value(None, "scion_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v.parse::<u64>().unwrap(), before + 1);
}

#[test]
fn wal_is_refused_with_a_message_that_says_why() {
    let e = Env::new();
    e.create("wal", 4096, "CREATE TABLE t(x);");
    let c = e.open("wal@main");
    let err = c.pragma_update(None, "journal_mode", "wal").unwrap_err();
    assert!(err.to_string().contains("journal_mode=WAL"), "{err}");
    c.execute_batch("INSERT INTO t VALUES (1)").unwrap();
}

/// `locking_mode=EXCLUSIVE` would keep a connection on the head it first read: refused, and
/// the connection keeps the normal mode, in which it sees another connection's commits and
/// commits on top of them.
#[test]
fn exclusive_locking_mode_is_refused_and_two_writers_keep_taking_turns() {
    let e = Env::new();
    e.create("excl", 4096, "CREATE TABLE t(x);");
    let a = e.open("excl@main");
    let b = e.open("excl@main");
    for value in ["EXCLUSIVE", "exclusive"] {
        let err = a.pragma_update(None, "locking_mode", value).unwrap_err();
        assert!(err.to_string().contains("locking_mode=EXCLUSIVE"), "{err}");
    }
    let mode: String = a
        .pragma_query_value(None, "locking_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "normal");
    for round in 0..3 {
        a.execute("INSERT INTO t VALUES (?1)", [round * 2]).unwrap();
        b.execute("INSERT INTO t VALUES (?1)", [round * 2 + 1])
            .unwrap();
    }
    let count = |c: &rusqlite::Connection| -> i64 {
        c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&a), 6);
    assert_eq!(count(&b), 6);
}

/// A read transaction pins the head it began on. Other writers move the branch on and
/// `gc` runs with no grace, twice: the pinned version was replaced within the store's
/// history retention, so the history keeps it from `gc`, and the reader reads on.
#[test]
fn a_read_pinned_across_gc_rounds_on_a_moving_branch_keeps_its_version() {
    let e = Env::new();
    e.create(
        "pin",
        4096,
        "CREATE TABLE t(id INTEGER PRIMARY KEY, x BLOB);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40)
         INSERT INTO t SELECT i, randomblob(9000) FROM n;",
    );
    let reader = e.open("pin@main");
    reader.execute_batch("BEGIN").unwrap();
    let digest = |c: &rusqlite::Connection| -> String {
        c.query_row(
            "SELECT group_concat(hex(substr(x, 8000, 8)), '') FROM t",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    let rows: i64 = reader
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 40);
    let main: BranchRef = "pin@main".parse().unwrap();
    let pinned = e.scion.engine().read_ref(&main).unwrap().0.root;
    let writer = e.open("pin@main");
    for _ in 0..3 {
        writer
            .execute_batch("UPDATE t SET x = randomblob(9000)")
            .unwrap();
    }
    for _ in 0..2 {
        e.scion.gc(std::time::Duration::ZERO, true).unwrap();
    }
    // Every page of the pinned version still reads from the store (a fresh attachment:
    // no descriptor kept open from before the gc).
    let fresh = Scion::attach(
        &StoreSpec::parse(e.store().to_str().unwrap()).unwrap(),
        AttachOptions::default(),
    )
    .unwrap()
    .scion;
    fresh.engine().page_hashes(&pinned).unwrap();
    let before = digest(&reader);
    assert_eq!(before.len(), 40 * 16);
    reader.execute_batch("COMMIT").unwrap();
    assert_ne!(
        digest(&reader),
        before,
        "after its transaction the reader sees the new head"
    );
}

#[test]
fn a_checkpoint_opens_read_only_and_unknown_names_fail_to_open() {
    let e = Env::new();
    e.create("ro", 4096, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    let main: BranchRef = "ro@main".parse().unwrap();
    e.scion
        .checkpoint(&main, &"one".parse().unwrap(), Default::default())
        .unwrap();
    let w = e.open("ro@main");
    w.execute_batch("INSERT INTO t VALUES (2)").unwrap();
    let cp = e.open("ro@main@one");
    assert_eq!(
        cp.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .unwrap(),
        1
    );
    let err = cp.execute_batch("INSERT INTO t VALUES (3)").unwrap_err();
    assert!(
        err.to_string().contains("readonly") || err.to_string().contains("read-only"),
        "{err}"
    );
    let uri = scion_vfs::uri("ro@nope", &e.store().display().to_string(), false);
    let err = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
    )
    .and_then(|c| c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0)))
    .unwrap_err();
    assert!(err.to_string().contains("unable to open"), "{err}");
    let why = scion_vfs::last_error().unwrap();
    assert!(why.contains("ro@nope"), "{why}");
}

#[test]
fn a_vfs_writer_and_a_file_checkout_writer_exclude_each_other() {
    let e = Env::new();
    e.create("both", 4096, "CREATE TABLE t(x);");
    let main: BranchRef = "both@main".parse().unwrap();
    let c = e.open("both@main");
    let rows = |c: &Connection| -> Vec<i64> {
        c.prepare("SELECT x FROM t ORDER BY x")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    // The branch is checked out while a VFS write transaction is open: the checkout is
    // recorded first, and the VFS commit is refused as a stale snapshot, not merged.
    c.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")
        .unwrap();
    let path: PathBuf = e.scion.checkout(&main, false).unwrap().path;
    let err = c.execute_batch("COMMIT").unwrap_err();
    assert_eq!(
        err.sqlite_error().map(|e| e.extended_code),
        Some(rusqlite::ffi::SQLITE_BUSY_SNAPSHOT),
        "{err}"
    );
    let why = scion_vfs::last_error().unwrap();
    assert!(why.contains("was not committed"), "{why}");
    assert_eq!(
        scion_vfs::last_failure().unwrap().described.code,
        "checked_out"
    );
    let _ = c.execute_batch("ROLLBACK");
    // The refused transaction's pages are gone from the connection's cache too: it reads
    // the checkout's checkpointed row, not its own (both versions are number 2).
    exec(&path, "INSERT INTO t VALUES (99)");
    e.scion
        .checkpoint(&main, &"file".parse().unwrap(), Default::default())
        .unwrap();
    assert_eq!(rows(&c), vec![99]);
    // While the checkout exists, clean or not, a VFS writer is refused, clearly.
    let err = c.execute_batch("INSERT INTO t VALUES (2)").unwrap_err();
    assert!(
        err.to_string().contains("locked") || err.to_string().contains("busy"),
        "{err}"
    );
    let why = scion_vfs::last_error().unwrap();
    assert!(
        why.contains("is checked out") && why.contains("checkout both@main --release"),
        "{why}"
    );
    let failure = scion_vfs::last_failure().unwrap();
    assert_eq!(failure.described.code, "checked_out");
    assert_eq!(failure.described.exit, scion_core::described::Exit::Refused);
    // A checkout holding changes is not released without force.
    exec(&path, "INSERT INTO t VALUES (100)");
    let refused = e.scion.release_checkout(&main, false).unwrap_err();
    assert!(
        matches!(refused, scion_core::CoreError::DirtyCheckout { .. }),
        "{refused}"
    );
    assert!(path.exists(), "nothing was removed");
    exec(&path, "DELETE FROM t WHERE x = 100");
    e.scion.checkout(&main, true).unwrap();
    // Released, the file goes, and VFS writers are welcome again.
    let released = e.scion.release_checkout(&main, false).unwrap();
    assert!(released.files_removed >= 1, "{released:?}");
    assert!(released.remaining.is_empty(), "{released:?}");
    assert!(!path.exists());
    c.execute_batch("INSERT INTO t VALUES (2)").unwrap();
    assert_eq!(rows(&c), vec![2, 99]);
}

/// A checkout made by another scion of the same store (another checkouts tree, as on
/// another host) keeps this one's VFS writers out: the rule lives in the store.
#[test]
fn a_checkout_anywhere_keeps_vfs_writers_out_until_it_is_released() {
    let e = Env::new();
    e.create("far", 4096, "CREATE TABLE t(x);");
    let main: BranchRef = "far@main".parse().unwrap();
    let elsewhere = {
        let store = e.store();
        let mut options = scion_core::ScionOptions::new(
            e.path("elsewhere-checkouts"),
            scion_core::ClonePolicy::Auto,
        );
        options.store_dir = Some(store.clone());
        let backend = std::sync::Arc::new(scion_store::LocalBackend::open(&store).unwrap());
        Scion::open(backend, &store.display().to_string(), options).unwrap()
    };
    let far_file = elsewhere.checkout(&main, false).unwrap().path;
    let c = e.open("far@main");
    c.execute_batch("INSERT INTO t VALUES (1)").unwrap_err();
    let why = scion_vfs::last_error().unwrap();
    assert!(why.contains(&far_file.display().to_string()), "{why}");
    // Releasing here leaves the other checkout in place, and says so.
    let here = e.scion.release_checkout(&main, false).unwrap();
    assert_eq!(here.remaining.len(), 1, "{here:?}");
    c.execute_batch("INSERT INTO t VALUES (1)").unwrap_err();
    // With force, every record goes (the other file is left, to go stale).
    let forced = e.scion.release_checkout(&main, true).unwrap();
    assert_eq!(forced.released_elsewhere.len(), 1, "{forced:?}");
    assert!(forced.remaining.is_empty());
    c.execute_batch("INSERT INTO t VALUES (1)").unwrap();
    assert!(far_file.exists());
}

/// A session's (or any holder's) lease keeps VFS writers out for as long as it lives.
#[test]
fn a_lease_on_the_branch_refuses_vfs_writers() {
    let e = Env::new();
    e.create("leased", 4096, "CREATE TABLE t(x);");
    let main: BranchRef = "leased@main".parse().unwrap();
    e.scion
        .engine()
        .lease(
            &main,
            e.scion.engine().holder(),
            LeaseChange::Acquire {
                ttl: std::time::Duration::from_secs(60),
            },
        )
        .unwrap();
    let c = e.open("leased@main");
    let err = c.execute_batch("INSERT INTO t VALUES (1)").unwrap_err();
    assert!(err.to_string().contains("locked"), "{err}");
    let why = scion_vfs::last_error().unwrap();
    assert!(why.contains("is leased by"), "{why}");
    e.scion
        .engine()
        .lease(
            &main,
            e.scion.engine().holder(),
            LeaseChange::Release { force: false },
        )
        .unwrap();
    c.execute_batch("INSERT INTO t VALUES (1)").unwrap();
}

/// Two connections on one host take turns: the second waits (SQLite's busy handler) or is
/// told the branch is being written, and never both write at once.
#[test]
fn connections_on_one_host_take_turns_writing() {
    let e = Env::new();
    e.create("turns", 4096, "CREATE TABLE t(x);");
    let a = e.open("turns@main");
    let b = e.open("turns@main");
    a.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")
        .unwrap();
    let err = b.execute_batch("BEGIN IMMEDIATE").unwrap_err();
    assert!(err.to_string().contains("locked"), "{err}");
    let why = scion_vfs::last_error().unwrap();
    assert!(
        why.contains("another connection on this host is writing"),
        "{why}"
    );
    a.execute_batch("COMMIT").unwrap();
    b.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (2); COMMIT;")
        .unwrap();
    let n: i64 = a
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2);
}

fn exec(path: &Path, sql: &str) {
    Connection::open(path).unwrap().execute_batch(sql).unwrap();
}

/// `?version=N` opens a version the head or a checkpoint holds, read-only; any other
/// number fails to open with what the branch does keep.
#[test]
fn a_version_number_opens_read_only_while_something_keeps_it() {
    let e = Env::new();
    e.create("ver", 4096, "CREATE TABLE t(x);");
    let main: BranchRef = "ver@main".parse().unwrap();
    let c = e.open("ver@main");
    c.execute_batch("INSERT INTO t VALUES (1)").unwrap();
    e.scion
        .checkpoint(&main, &"two".parse().unwrap(), Default::default())
        .unwrap();
    c.execute_batch("INSERT INTO t VALUES (2)").unwrap();
    assert_eq!(e.head_version("ver@main"), 3);
    let at = |n: &str| {
        let uri = format!(
            "{}&version={n}",
            scion_vfs::uri("ver@main", &e.store().display().to_string(), false)
        );
        Connection::open_with_flags(
            uri,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
        )
    };
    let count = |c: &Connection| -> i64 {
        c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    };
    let two = at("2").unwrap();
    assert_eq!(count(&two), 1);
    let err = two.execute_batch("INSERT INTO t VALUES (9)").unwrap_err();
    assert!(err.to_string().contains("readonly"), "{err}");
    assert_eq!(count(&at("3").unwrap()), 2);
    // A later commit does not move a connection fixed at a version.
    c.execute_batch("INSERT INTO t VALUES (3)").unwrap();
    assert_eq!(count(&two), 1);
    assert!(at("1").is_err());
    let why = scion_vfs::last_error().unwrap();
    assert!(
        why.contains("version 1 of ver@main is not kept")
            && why.contains("4 (the head)")
            && why.contains("2 (checkpoint two)"),
        "{why}"
    );
    assert!(at("latest").is_err());
    let why = scion_vfs::last_error().unwrap();
    assert!(why.contains("is not a version number"), "{why}");
}
