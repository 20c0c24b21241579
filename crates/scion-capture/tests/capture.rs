//! Live capture against real writers: the stock `sqlite3` CLI and Python's `sqlite3` in
//! their own processes, foreign checkpoints, a phantom commit frame, and restarts.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rusqlite::Connection;
use scion_capture::walfile::{checksum, Checksum, FRAME_HEADER_LEN, WAL_HEADER_LEN};
use scion_capture::{Attach, LiveBranch, Step};
use scion_core::{ClonePolicy, Scion, ScionOptions};
use scion_store::LocalBackend;

const FOUR_TRANSACTIONS: &str = "
INSERT INTO items(name, qty, blob) VALUES ('new', 1, randomblob(200));
UPDATE items SET qty = qty + 1 WHERE id IN (SELECT id FROM items ORDER BY random() LIMIT 5);
INSERT INTO items(name, qty, blob) SELECT name || '+', qty, blob FROM items ORDER BY random() LIMIT 3;
DELETE FROM items WHERE id = (SELECT id FROM items ORDER BY random() LIMIT 1);
";

#[test]
fn cli_commits_are_captured_and_a_flush_makes_them_durable() {
    let env = env();
    let b = env.shop(300);
    let mut live = env.open(&b);
    assert!(matches!(live.attach, Attach::Clean), "{:?}", live.attach);
    let path = live.path().to_path_buf();
    sqlite3(&path, FOUR_TRANSACTIONS);
    let report = live.flush(None).unwrap();
    assert!(report.committed);
    assert_eq!(report.transactions, 4);
    assert_eq!(report.version, 2);
    assert_eq!(env.dump_head(&b), dump(&path));
    // O(changed pages): four small transactions touch a handful of pages, not the file.
    assert!(report.pages < 20, "{report:?}");
    // Nothing new: a flush commits nothing.
    let again = live.flush(None).unwrap();
    assert!(!again.committed);
    assert_eq!(again.version, 2);
    live.close().unwrap();
    // Closed: the checkout is recorded as holding the durable head.
    let (r, _) = env.scion.engine().read_ref(&b).unwrap();
    assert_eq!(
        env.scion.checkout_state(&b, &r.root).unwrap(),
        scion_core::CheckoutState::Clean
    );
}

/// Append to the WAL a checksum-valid commit frame that the wal-index never published:
/// what a writer killed between writing its frames and publishing them leaves behind.
fn graft_phantom_frame(wal: &std::path::Path, page_size: usize, max_frame: u32) {
    let f = OpenOptions::new().read(true).write(true).open(wal).unwrap();
    let step = FRAME_HEADER_LEN + page_size;
    let mut last = vec![0u8; step];
    let at = (WAL_HEADER_LEN + (max_frame as usize - 1) * step) as u64;
    f.read_exact_at(&mut last, at).unwrap();
    let mut header = [0u8; WAL_HEADER_LEN];
    f.read_exact_at(&mut header, 0).unwrap();
    let big_endian = header[3] & 1 == 1;
    let be = |b: &[u8], i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
    let seed = Checksum(be(&last, 16), be(&last, 20));
    let mut phantom = last.clone();
    // Same page, different content near its end (row data), still a commit frame.
    for b in &mut phantom[step - 64..step - 32] {
        *b ^= 0x5a;
    }
    let mut sum = checksum(big_endian, &phantom[..8], seed);
    sum = checksum(big_endian, &phantom[FRAME_HEADER_LEN..], sum);
    phantom[16..20].copy_from_slice(&sum.0.to_be_bytes());
    phantom[20..24].copy_from_slice(&sum.1.to_be_bytes());
    f.write_all_at(&phantom, at + step as u64).unwrap();
}

#[test]
fn a_phantom_commit_frame_past_the_published_end_is_never_captured() {
    let env = env();
    let b = env.shop(100);
    let mut live = env.open(&b);
    let path = live.path().to_path_buf();
    sqlite3(&path, "UPDATE items SET qty = qty + 1 WHERE id = 7;");
    live.poll().unwrap();
    let captured = live.counters().transactions;
    let wal = std::path::PathBuf::from(format!("{}-wal", path.display()));
    let c = Connection::open(&path).unwrap();
    let max_frame: u32 = c
        .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))
        .unwrap();
    graft_phantom_frame(&wal, 4096, max_frame);
    assert_eq!(
        live.poll().unwrap(),
        Step::Idle,
        "the phantom is not consumed"
    );
    assert_eq!(live.counters().transactions, captured);
    let report = live.flush(None).unwrap();
    assert_eq!(env.dump_head(&b), dump_conn(&c));
    // The next real commit overwrites the phantom's slot; capture takes the real one.
    sqlite3(&path, "UPDATE items SET qty = qty + 100 WHERE id = 8;");
    let next = live.flush(None).unwrap();
    assert_eq!(next.version, report.version + 1);
    assert_eq!(next.transactions, 1);
    assert_eq!(env.dump_head(&b), dump_conn(&c));
    drop(c);
    live.close().unwrap();
}

#[test]
fn foreign_checkpoints_and_vacuum_never_lose_a_commit() {
    let env = env();
    let b = env.shop(500);
    let mut live = env.open(&b);
    let path = live.path().to_path_buf();
    let foreign = [
        "PRAGMA wal_checkpoint(PASSIVE);",
        ".timeout 200\nPRAGMA wal_checkpoint(FULL);",
        ".timeout 200\nPRAGMA wal_checkpoint(RESTART);",
        ".timeout 200\nPRAGMA wal_checkpoint(TRUNCATE);",
        "VACUUM;",
        "DELETE FROM items WHERE id % 3 = 0; VACUUM;",
    ];
    for (round, action) in foreign.iter().cycle().take(18).enumerate() {
        sqlite3(&path, FOUR_TRANSACTIONS);
        if round % 2 == 0 {
            live.poll().unwrap();
        }
        let out = Command::new("sqlite3")
            .arg(&path)
            .arg(action)
            .output()
            .unwrap();
        // A checkpoint that waits on capture's pin may give up: that is the writer's
        // busy timeout at work, not an error of capture.
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() || err.contains("locked"), "{err}");
        sqlite3(&path, FOUR_TRANSACTIONS);
        live.flush(None).unwrap();
        assert_eq!(env.dump_head(&b), dump(&path), "round {round}: {action}");
    }
    live.close().unwrap();
    assert!(
        env.scion.verify().unwrap().ok(),
        "the store verifies after capture"
    );
}

#[test]
fn a_long_run_of_small_commits_recycles_the_wal_and_continues() {
    let env = env();
    let b = env.shop(50);
    let mut live = env.open(&b);
    let path = live.path().to_path_buf();
    let c = Connection::open(&path).unwrap();
    for round in 0..6 {
        for i in 0..400 {
            c.execute(
                "INSERT INTO items(name, qty) VALUES (?1, ?2)",
                (format!("r{round}-{i}"), i),
            )
            .unwrap();
        }
        live.flush(None).unwrap();
        assert_eq!(env.dump_head(&b), dump_conn(&c), "round {round}");
    }
    let counters = live.counters();
    assert!(counters.passive_checkpoints > 0, "{counters:?}");
    assert!(
        counters.continuations > 0,
        "the WAL restarted and capture went on: {counters:?}"
    );
    drop(c);
    live.close().unwrap();
}

#[test]
fn a_restart_resumes_from_the_durable_cursor_when_the_wal_still_holds_it() {
    let env = env();
    let b = env.shop(200);
    let mut live = env.open(&b);
    let path = live.path().to_path_buf();
    // A connection in another process keeps the WAL from being checkpointed away when
    // capture stops (in this process, closing capture's descriptors would drop its locks).
    let mut keeper = hold_open(&path);
    sqlite3(&path, FOUR_TRANSACTIONS);
    live.flush(None).unwrap();
    sqlite3(&path, FOUR_TRANSACTIONS);
    // Stop without closing (a killed daemon does not close): nothing of the second batch
    // is durable yet.
    drop(live);
    sqlite3(&path, FOUR_TRANSACTIONS);
    let mut live = env.open(&b);
    assert!(matches!(live.attach, Attach::Resumed), "{:?}", live.attach);
    // What was published while capture was stopped is captured and committed at once.
    assert_eq!(live.durable_version(), 3);
    assert!(!live.flush(None).unwrap().committed);
    assert_eq!(env.dump_head(&b), dump(&path));
    keeper.kill().unwrap();
    keeper.wait().unwrap();
    live.close().unwrap();
}

#[test]
fn a_restart_after_the_wal_was_checkpointed_away_reconciles_by_page_hashes() {
    let env = env();
    let b = env.shop(2000);
    let mut live = env.open(&b);
    let path = live.path().to_path_buf();
    sqlite3(&path, FOUR_TRANSACTIONS);
    live.flush(None).unwrap();
    drop(live);
    // With no connection left, the writer's close checkpoints and deletes the WAL.
    sqlite3(&path, "UPDATE items SET qty = -1 WHERE id = 1500;");
    assert!(!std::path::Path::new(&format!("{}-wal", path.display())).exists());
    // The file's record in the ref is dropped meanwhile (a forced release elsewhere, which
    // leaves this file in place): capture resuming on the file records it again.
    let store = env.path("store");
    let mut elsewhere = ScionOptions::new(env.path("elsewhere"), ClonePolicy::Auto);
    elsewhere.store_dir = Some(store.clone());
    let other = Scion::open(
        Arc::new(LocalBackend::open(&store).unwrap()),
        "test",
        elsewhere,
    )
    .unwrap();
    assert_eq!(
        other
            .release_checkout(&b, true)
            .unwrap()
            .released_elsewhere
            .len(),
        1
    );
    assert!(env
        .scion
        .engine()
        .read_ref(&b)
        .unwrap()
        .0
        .checkouts
        .is_empty());
    let live = env.open(&b);
    let recorded = &env.scion.engine().read_ref(&b).unwrap().0.checkouts;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].path, path.display().to_string());
    let Attach::Reconciled(r) = live.attach else {
        panic!("expected a reconcile, got {:?}", live.attach);
    };
    assert_eq!(
        r.pages_changed, 1,
        "only the changed page is committed: {r:?}"
    );
    assert_eq!(env.dump_head(&b), dump(&path));
    live.close().unwrap();
    assert!(
        env.scion.verify().unwrap().ok(),
        "the store verifies after a reconcile"
    );
}

#[test]
fn a_database_switched_out_of_wal_while_capture_was_stopped_is_switched_back_and_reconciled() {
    let env = env();
    let b = env.shop(100);
    let live = env.open(&b);
    let path = live.path().to_path_buf();
    // While capture holds the file, nobody can leave WAL mode.
    let out = Command::new("sqlite3")
        .arg(&path)
        .arg("PRAGMA journal_mode=DELETE;")
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("wal") || said.contains("locked"), "{said}");
    live.close().unwrap();
    sqlite3(
        &path,
        "PRAGMA journal_mode=DELETE; UPDATE items SET qty = 0 WHERE id = 3;",
    );
    let mut live = env.open(&b);
    assert!(
        matches!(live.attach, Attach::Reconciled(_)),
        "{:?}",
        live.attach
    );
    assert_eq!(env.dump_head(&b), dump(&path));
    sqlite3(&path, FOUR_TRANSACTIONS);
    live.flush(None).unwrap();
    assert_eq!(env.dump_head(&b), dump(&path));
    live.close().unwrap();
}

/// A Python writer with no busy timeout at all commits small transactions while capture
/// polls, flushes and recycles the WAL as fast as it can: it must never be refused.
#[test]
fn a_writer_without_busy_timeout_is_never_locked_out_by_capture() {
    let env = env();
    let b = env.shop(100);
    let mut live = env.open(&b);
    let path = live.path().to_path_buf();
    let script = r#"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
locked = 0
for i in range(3000):
    try:
        c.execute("INSERT INTO items(name, qty) VALUES (?, ?)", ("py", i))
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            locked += 1
        else:
            raise
print(locked)
"#;
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut flushes = 0;
    while child.try_wait().unwrap().is_none() {
        live.poll().unwrap();
        if started.elapsed() > Duration::from_millis(20 * flushes) {
            live.flush(None).unwrap();
            flushes += 1;
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let locked: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert_eq!(locked, 0, "writes refused because of capture");
    live.flush(None).unwrap();
    assert!(flushes > 1);
    assert_eq!(env.dump_head(&b), dump(&path));
    live.close().unwrap();
}

#[test]
fn a_second_session_on_the_same_branch_is_refused_by_the_lease() {
    let env = env();
    let b = env.shop(10);
    let live = env.open(&b);
    let other = LiveBranch::open(
        env.scion.clone(),
        &b,
        "another-holder#s2",
        Duration::from_secs(60),
        false,
    );
    assert!(
        matches!(
            other,
            Err(scion_capture::CaptureError::Core(
                scion_core::CoreError::Engine(scion_core::EngineError::LeaseHeld { .. })
            ))
        ),
        "{:?}",
        other.err()
    );
    live.close().unwrap();
}

/// Bytes this thread has read through syscalls so far.
fn thread_rchar() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Invariant 10 for live capture: a flush of a single-row commit costs what changed, not
/// what the database holds: one segment and one ref write to the store, and local reads of
/// the WAL frames only (no whole-file hash), on a 15 MiB database.
#[test]
fn invariant_10_a_session_flush_costs_what_changed_not_the_database_size() {
    use scion_store::{CountingBackend, LocalBackend};
    let env = env();
    let b = env.shop(120_000);
    let store = env.dir.path().join("store");
    let counter = Arc::new(CountingBackend::new(Arc::new(
        LocalBackend::open(&store).unwrap(),
    )));
    let mut o =
        scion_core::ScionOptions::new(store.join("checkouts"), scion_core::ClonePolicy::Auto);
    o.store_dir = Some(store.clone());
    let scion = Arc::new(scion_core::Scion::open(counter.clone(), "test", o).unwrap());
    let mut live = LiveBranch::open(scion, &b, HOLDER, Duration::from_secs(60), false).unwrap();
    let size = std::fs::metadata(live.path()).unwrap().len();
    assert!(size > 12 << 20, "a database of {size} B");
    let c = Connection::open(live.path()).unwrap();
    for round in 0..3 {
        c.execute(
            "UPDATE items SET qty = qty + 1 WHERE id = ?1",
            [1000 + round * 37_000],
        )
        .unwrap();
        let before = counter.counts();
        let read_before = thread_rchar();
        let report = live.flush(None).unwrap();
        let read = thread_rchar() - read_before;
        let used = counter.counts();
        assert!(report.committed && report.pages == 1, "{report:?}");
        assert_eq!(used.puts - before.puts, 2, "one segment and one ref");
        assert!(
            used.bytes_written - before.bytes_written < 3 * 1024,
            "{used:?}"
        );
        assert!(used.bytes_read - before.bytes_read < 64 * 1024, "{used:?}");
        assert!(
            read < 256 * 1024,
            "round {round}: read {read} B locally for one changed page"
        );
    }
    drop(c);
    live.close().unwrap();
}

/// The opt-in second tier: a writer that never pauses keeps PASSIVE checkpoints from ever
/// completing, so without it the WAL only grows; with it (here above 200 frames) a brief write
/// lock lets the WAL restart. The writer has Python's default 5 s busy timeout: it waits,
/// it is never refused. Bounds are in frames, not time. The barrier holds the lock only to
/// copy what was committed since a lockless checkpoint just before it.
#[test]
fn the_second_tier_bounds_the_wal_under_a_writer_that_never_pauses() {
    let env = env();
    let b = env.shop(100);
    let mut live = env.open(&b);
    live.set_barrier_frames(Some(200));
    let path = live.path().to_path_buf();
    let script = r#"
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
end = time.monotonic() + 3.0
n = 0
while time.monotonic() < end:
    c.execute("INSERT INTO items(name, qty) VALUES ('nonstop', ?)", (n,))
    n += 1
print(n)
"#;
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let wal = std::path::PathBuf::from(format!("{}-wal", path.display()));
    let mut max_frames = 0u64;
    while child.try_wait().unwrap().is_none() {
        live.poll().unwrap();
        live.flush(None).unwrap();
        // The WAL file keeps its high-water mark: its size bounds every generation.
        let size = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        max_frames = max_frames.max(size / (24 + 4096));
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let counters = live.counters();
    assert!(counters.barriers > 0, "{counters:?}");
    // Each barrier only finishes what a checkpoint without the lock began just before it.
    assert!(
        counters.passive_checkpoints >= 2 * counters.barriers,
        "{counters:?}"
    );
    assert!(
        max_frames < written.min(20_000),
        "the WAL reached {max_frames} frames for {written} commits: {counters:?}"
    );
    live.flush(None).unwrap();
    assert_eq!(env.dump_head(&b), dump(&path));
    live.close().unwrap();
}

/// Device and inode numbers name a file on one machine only while it exists: another
/// host's file (or the next file made after a checkout was replaced) can carry the numbers
/// a mark names. Here a second host's checkout is that very inode, rewound to an older
/// version. Taking the mark as its own would skip the refresh and commit the rewound file
/// as a change, undoing the first host's acknowledged commits.
#[test]
fn a_mark_made_at_another_hosts_checkout_is_never_resumed_from() {
    let env = env();
    let b = env.shop(200);
    let mut live = env.open(&b);
    let path_a = live.path().to_path_buf();
    // Copied by another process: closing a descriptor of the file in this one would drop
    // capture's locks on it.
    let rewound_copy = env.path("rewound.db");
    assert!(Command::new("cp")
        .arg(&path_a)
        .arg(&rewound_copy)
        .status()
        .unwrap()
        .success());
    sqlite3(&path_a, FOUR_TRANSACTIONS);
    let report = live.flush(None).unwrap();
    assert!(report.committed, "{report:?} {:?}", live.attach);
    live.close().unwrap();
    let head = env.dump_head(&b);
    let mark = env.scion.engine().read_ref(&b).unwrap().0.meta["scion.capture"].clone();
    assert!(mark.starts_with("v2 "), "{mark}");

    let store = env.path("store");
    let mut elsewhere = ScionOptions::new(env.path("elsewhere"), ClonePolicy::Auto);
    elsewhere.store_dir = Some(store.clone());
    let other = Arc::new(
        Scion::open(
            Arc::new(LocalBackend::open(&store).unwrap()),
            "test",
            elsewhere,
        )
        .unwrap(),
    );
    let path_b = other.checkout_path(&b);
    std::fs::create_dir_all(path_b.parent().unwrap()).unwrap();
    std::fs::hard_link(&path_a, &path_b).unwrap();
    for leftover in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{leftover}", path_a.display()));
    }
    let rewound = std::fs::read(&rewound_copy).unwrap();
    let f = OpenOptions::new().write(true).open(&path_b).unwrap();
    f.write_all_at(&rewound, 0).unwrap();
    f.set_len(rewound.len() as u64).unwrap();
    drop(f);

    // Refused (a file of unknown origin) or refreshed: either way the head stays.
    let attached = LiveBranch::open(other, &b, "host-b#s1", Duration::from_secs(60), false);
    let attach = attached.as_ref().map(|l| &l.attach);
    assert!(
        env.dump_head(&b) == head,
        "the head was rewound to the other file (attach: {attach:?})"
    );
    if let Ok(live) = attached {
        assert!(dump(&path_b) == head, "the file was not refreshed");
        live.close().unwrap();
    }
}
