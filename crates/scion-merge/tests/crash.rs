//! `kill -9` of a merge at every write it makes: the merger is a real process (this test
//! binary run again as a child) whose store kills it just before, or just after, each
//! write. After every kill the destination is at the old version or the merged one, never
//! between; the store verifies, and merging again finishes the job.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

use rusqlite::Connection;
use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::{BranchRef, ClonePolicy, Scion, ScionOptions, Target};
use scion_merge::{MergeOptions, Outcome};
use scion_store::{FaultPlan, FaultyBackend, LocalBackend};

/// Set in a child: `<store dir>` `<before|after>` `<write number>`.
const CHILD: &str = "SCION_MERGE_CRASH_CHILD";
const SIGKILL: i32 = 9;
const STATE: &str =
    "SELECT group_concat(id || ':' || a || ':' || b, ',') FROM (SELECT * FROM t ORDER BY id)";

fn location(store: &Path) -> String {
    StoreSpec::parse(store.to_str().unwrap())
        .unwrap()
        .location()
}

fn attach(store: &Path, init: bool) -> Scion {
    let spec = StoreSpec::parse(store.to_str().unwrap()).unwrap();
    let options = AttachOptions {
        init: init.then(scion_core::StoreSettings::default),
        ..Default::default()
    };
    Scion::attach(&spec, options).unwrap().scion
}

fn write(scion: &Scion, target: &str, sql: &str) {
    scion_vfs::adopt(scion.engine().location(), scion.engine().clone());
    let uri = scion_vfs::uri(target, scion.engine().location(), false);
    Connection::open(uri).unwrap().execute_batch(sql).unwrap();
}

fn state(scion: &Scion, target: &str) -> String {
    scion_vfs::adopt(scion.engine().location(), scion.engine().clone());
    let uri = scion_vfs::uri(target, scion.engine().location(), true);
    Connection::open(uri)
        .unwrap()
        .query_row(STATE, [], |r| r.get(0))
        .unwrap()
}

/// `shop@main` and `shop@feature` with changes to merge, one of them on both sides.
fn seeded_store(dir: &Path) -> std::path::PathBuf {
    scion_vfs::register().unwrap();
    let store = dir.join("store");
    let scion = attach(&store, true);
    let plain = dir.join("seed.db");
    Connection::open(&plain)
        .unwrap()
        .execute_batch(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b INT);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
             INSERT INTO t SELECT i, 'a' || i, i FROM n;",
        )
        .unwrap();
    scion
        .engine()
        .create(&"shop".parse().unwrap(), Some(&plain))
        .unwrap();
    let main: BranchRef = "shop@main".parse().unwrap();
    scion.engine().set_protected(&main, false).unwrap();
    scion
        .engine()
        .fork(&main, &"feature".parse().unwrap(), Default::default())
        .unwrap();
    write(&scion, "shop@main", "UPDATE t SET b = -1 WHERE id % 50 = 0");
    write(
        &scion,
        "shop@feature",
        "UPDATE t SET a = 'f' WHERE id % 60 = 0; DELETE FROM t WHERE id = 7",
    );
    store
}

fn merge(scion: &Scion) -> scion_merge::MergeReport {
    let src: Target = "shop@feature".parse().unwrap();
    scion_merge::merge(
        scion.engine(),
        &mut scion.working_files(),
        &src,
        &"shop@main".parse().unwrap(),
        &MergeOptions::default(),
    )
    .unwrap()
}

/// The merger: one merge through an engine whose store kills this process at a write.
/// Run as a test of its own it pins the writes a merge makes.
#[test]
fn a_merge_writes_a_scratch_fork_a_commit_the_head_and_the_removal() {
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
    scion_vfs::register().unwrap();
    let faulty = std::sync::Arc::new(FaultyBackend::new(
        std::sync::Arc::new(LocalBackend::open(&store).unwrap()),
        plan,
    ));
    let mut options = ScionOptions::new(store.join("checkouts"), ClonePolicy::Auto);
    options.store_dir = Some(store.to_path_buf());
    let scion = Scion::open(faulty.clone(), &location(&store), options).unwrap();
    let report = merge(&scion);
    assert_eq!(report.outcome, Outcome::Merged);
    let log = faulty.write_log();
    let main_ref_writes = log.iter().filter(|w| *w == "put refs/shop/main").count();
    assert_eq!(
        main_ref_writes, 1,
        "one write of the destination's ref: {log:#?}"
    );
    // The scratch fork, its commit (segment, ref), the head, then the scratch's removal.
    assert!(log[0].starts_with("put refs/shop/main-merge-"), "{log:#?}");
    assert!(log[1].starts_with("put segments/"), "{log:#?}");
    let head = log.iter().position(|w| w == "put refs/shop/main").unwrap();
    assert!(
        log[head + 1..].iter().all(|w| w.contains("main-merge-")),
        "{log:#?}"
    );
}

fn writes_of_a_merge() -> usize {
    let dir = tempfile::tempdir().unwrap();
    let store = seeded_store(dir.path());
    let faulty = std::sync::Arc::new(FaultyBackend::new(
        std::sync::Arc::new(LocalBackend::open(&store).unwrap()),
        FaultPlan::None,
    ));
    let mut options = ScionOptions::new(store.join("checkouts"), ClonePolicy::Auto);
    options.store_dir = Some(store.to_path_buf());
    let scion = Scion::open(faulty.clone(), &location(&store), options).unwrap();
    merge(&scion);
    faulty.write_log().len()
}

#[test]
fn kill_9_at_every_write_of_a_merge_leaves_the_old_or_the_merged_version() {
    let writes = writes_of_a_merge();
    let (mut rounds, mut merged_seen) = (0, 0);
    for k in 0..writes {
        for how in ["before", "after"] {
            let dir = tempfile::tempdir().unwrap();
            let store = seeded_store(dir.path());
            let (before, expected) = {
                let scion = attach(&store, false);
                let before = state(&scion, "shop@main");
                // The merged result, from a merge of a copy of the store.
                let copy = dir.path().join("copy");
                copy_dir(&store, &copy);
                let other = attach(&copy, false);
                merge(&other);
                (before, state(&other, "shop@main"))
            };
            let out = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "a_merge_writes_a_scratch_fork_a_commit_the_head_and_the_removal",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD, format!("{} {how} {k}", store.display()))
                .output()
                .unwrap();
            assert_eq!(
                out.status.signal(),
                Some(SIGKILL),
                "{how} write #{k}: the merger was to be killed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let scion = attach(&store, false);
            let now = state(&scion, "shop@main");
            if now == expected {
                merged_seen += 1;
            } else {
                assert_eq!(now, before, "{how} write #{k}: neither old nor merged");
            }
            let report = scion.verify().unwrap();
            assert!(report.ok(), "{how} write #{k}: {:?}", report.problems);
            // Merging again finishes the job (or finds nothing left to do).
            let again = merge(&scion);
            assert!(
                matches!(again.outcome, Outcome::Merged | Outcome::UpToDate),
                "{how} write #{k}: {again:?}"
            );
            assert_eq!(state(&scion, "shop@main"), expected, "{how} write #{k}");
            rounds += 1;
        }
    }
    assert!(
        merged_seen >= 1,
        "a kill after the head's write leaves the merge in"
    );
    eprintln!("{rounds} kills over {writes} writes of a merge");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}
