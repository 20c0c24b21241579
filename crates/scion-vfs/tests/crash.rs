//! `kill -9` of a VFS writer at every step of its commit: the writer is a real process
//! (this test binary run again as a child) whose store kills it just before, or just
//! after, each write of the commit. After every kill the branch is at the old version or
//! the new one, never between; it opens cleanly, the store verifies, and the next writer
//! is not kept out by the dead one.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use rusqlite::{Connection, OpenFlags};
use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::{BranchRef, ClonePolicy, Scion, ScionOptions};
use scion_store::{FaultPlan, FaultyBackend, LocalBackend};

/// Set in a child: `<store dir>` `<plan>` `<write number>`, space-separated.
const CHILD: &str = "SCION_VFS_CRASH_CHILD";
/// `kill -9`.
const SIGKILL: i32 = 9;
const UPDATE: &str = "UPDATE items SET price = price + 7 WHERE id % 5 = 0";
const STATE: &str = "SELECT count(*), sum(price), group_concat(id) FROM items";

fn branch() -> BranchRef {
    "shop@main".parse().unwrap()
}

fn location(store: &Path) -> String {
    StoreSpec::parse(store.to_str().unwrap())
        .unwrap()
        .location()
}

/// A store with `shop` holding 400 items.
fn seeded_store(dir: &Path) -> std::path::PathBuf {
    let store = dir.join("store");
    let spec = StoreSpec::parse(store.to_str().unwrap()).unwrap();
    let options = AttachOptions {
        init: Some(Default::default()),
        ..Default::default()
    };
    let scion = Scion::attach(&spec, options).unwrap().scion;
    let plain = dir.join("seed.db");
    let c = Connection::open(&plain).unwrap();
    c.execute_batch(
        "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price INTEGER);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400)
         INSERT INTO items SELECT i, printf('item %d %s', i, hex(randomblob(40))), i * 3 FROM n;",
    )
    .unwrap();
    drop(c);
    scion
        .engine()
        .create(&"shop".parse().unwrap(), Some(&plain))
        .unwrap();
    store
}

/// The engine on `store` behind a fault plan, handed to the VFS.
fn faulty_engine(store: &Path, plan: FaultPlan) -> Arc<FaultyBackend> {
    let faulty = Arc::new(FaultyBackend::new(
        Arc::new(LocalBackend::open(store).unwrap()),
        plan,
    ));
    let mut options = ScionOptions::new(store.join("checkouts"), ClonePolicy::Auto);
    options.store_dir = Some(store.to_path_buf());
    let scion = Scion::open(faulty.clone(), &location(store), options).unwrap();
    scion_vfs::register().unwrap();
    scion_vfs::adopt(&location(store), scion.engine().clone());
    faulty
}

fn open(store: &Path) -> Connection {
    let uri = scion_vfs::uri("shop", &location(store), false);
    Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap()
}

fn state(c: &Connection) -> String {
    c.query_row(STATE, [], |r| {
        Ok(format!(
            "{}|{}|{}",
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, String>(2)?
        ))
    })
    .unwrap()
}

/// The writer: one UPDATE through the VFS, autocommitted. Run as a test of its own it
/// pins what a commit through the VFS costs: a segment, then the ref, nothing else (no
/// lease write before it).
#[test]
fn a_vfs_commit_is_a_segment_then_the_ref() {
    let (store, plan, _dir) = match std::env::var(CHILD) {
        Ok(spec) => {
            let mut it = spec.split(' ');
            let store = std::path::PathBuf::from(it.next().unwrap());
            let how = it.next().unwrap();
            let k: usize = it.next().unwrap().parse().unwrap();
            let plan = match how {
                "before" => FaultPlan::KillBefore(k),
                _ => FaultPlan::KillAfter(k),
            };
            (store, plan, None)
        }
        Err(_) => {
            let dir = tempfile::tempdir().unwrap();
            (seeded_store(dir.path()), FaultPlan::None, Some(dir))
        }
    };
    let faulty = faulty_engine(&store, plan);
    let c = open(&store);
    c.execute_batch(UPDATE).unwrap();
    let log = faulty.write_log();
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(log[0].starts_with("put segments/"), "{log:?}");
    assert!(log[1].starts_with("put refs/"), "{log:?}");
}

/// The writes one commit makes, learnt from a fault-free run in this process.
fn writes_of_a_commit() -> usize {
    let dir = tempfile::tempdir().unwrap();
    let store = seeded_store(dir.path());
    let faulty = faulty_engine(&store, FaultPlan::None);
    open(&store).execute_batch(UPDATE).unwrap();
    faulty.write_log().len()
}

#[test]
fn kill_9_at_every_step_of_a_vfs_commit_leaves_the_old_or_the_new_version() {
    scion_vfs::register().unwrap();
    let writes = writes_of_a_commit();
    assert!(writes >= 2, "a commit writes its pages and its ref");
    let mut rounds = 0;
    let mut new_seen = 0;
    for k in 0..writes {
        for how in ["before", "after"] {
            let dir = tempfile::tempdir().unwrap();
            let store = seeded_store(dir.path());
            // What the branch holds before, and what the UPDATE makes of it.
            let (before, expected) = {
                let spec = StoreSpec::parse(store.to_str().unwrap()).unwrap();
                let scion = Scion::attach(&spec, AttachOptions::default())
                    .unwrap()
                    .scion;
                let plain = dir.path().join("expected.db");
                scion
                    .export(&"shop".parse().unwrap(), &plain, false)
                    .unwrap();
                let c = Connection::open(&plain).unwrap();
                let before = state(&c);
                c.execute_batch(UPDATE).unwrap();
                (before, state(&c))
            };
            let status = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "a_vfs_commit_is_a_segment_then_the_ref",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD, format!("{} {how} {k}", store.display()))
                .output()
                .unwrap();
            assert_eq!(
                status.status.signal(),
                Some(SIGKILL),
                "{how} write #{k}: the writer was to be killed: {}",
                String::from_utf8_lossy(&status.stderr)
            );
            // Old or new, never between; and it opens cleanly through a fresh engine.
            let spec = StoreSpec::parse(store.to_str().unwrap()).unwrap();
            let scion = Arc::new(
                Scion::attach(&spec, AttachOptions::default())
                    .unwrap()
                    .scion,
            );
            let head = scion.engine().read_ref(&branch()).unwrap().0;
            let c = open_fresh(&store, scion.clone());
            let now = state(&c);
            let ok: String = c
                .query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .unwrap();
            assert_eq!(ok, "ok", "{how} write #{k}");
            if now == expected {
                assert_eq!(head.version, 2, "{how} write #{k}");
                new_seen += 1;
            } else {
                assert_eq!(now, before, "{how} write #{k}: neither old nor new");
                assert_eq!(head.version, 1, "{how} write #{k}");
            }
            let report = scion.verify().unwrap();
            assert!(report.ok(), "{how} write #{k}: {:?}", report.problems);
            // The dead writer's turn died with it: the next writer commits at once.
            c.execute_batch("UPDATE items SET name = name || '!' WHERE id = 1")
                .unwrap();
            rounds += 1;
        }
    }
    // Killed after its ref write, the commit is in; before it, it is not.
    assert_eq!(
        new_seen, 1,
        "only a kill after the ref write leaves the new version"
    );
    eprintln!("{rounds} kills over {writes} writes of a VFS commit");
}

/// A connection through the VFS on a freshly attached engine (not a fault-injected one).
fn open_fresh(store: &Path, scion: Arc<Scion>) -> Connection {
    scion_vfs::adopt(&location(store), scion.engine().clone());
    open(store)
}
