//! The process's page cache under the VFS: connections on many forks of one seed share
//! decoded pages and still each see exactly their own branch (checked against plain
//! SQLite copies), with the default bound and with a bound of a few pages that evicts all
//! the time; and a damaged frame is never kept.

mod common;

use std::sync::Mutex;

use rusqlite::Connection;
use scion_core::{PageCache, PageCacheStats};

use common::*;

/// The cache and its counters are the process's: the tests here take turns.
static TURN: Mutex<()> = Mutex::new(());

/// Set in the child process that runs the workload under a tiny cache bound.
const TINY_CHILD: &str = "SCION_VFS_TINY_CACHE_CHILD";

/// What moved in the process's cache counters between two readings.
fn moved(before: &PageCacheStats, after: &PageCacheStats) -> (u64, u64, u64) {
    (
        after.hits - before.hits,
        after.decodes - before.decodes,
        after.waits - before.waits,
    )
}

/// `forks` forks of one seed database, two connections on each, and a plain SQLite copy
/// of the seed per fork; a random workload writes each fork in turn (through either of its
/// connections) and its copy. After every transaction both connections of the fork agree
/// with its copy, and so does another fork's: one branch's pages never show on another.
/// Returns the counters' movement over the run.
fn forks_sharing_the_cache(seed: u64, forks: usize, steps: usize) -> (u64, u64, u64) {
    let e = Env::new();
    let plain = e.create(
        "seed",
        4096,
        "CREATE TABLE base(id INTEGER PRIMARY KEY, body TEXT);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
         INSERT INTO base(body) SELECT printf('%.*c', 200 + i % 300, char(97 + i % 26)) FROM n;",
    );
    let before = PageCache::process().stats();
    let mut sides = Vec::new();
    for f in 0..forks {
        let name = format!("f{f}");
        e.scion
            .engine()
            .fork(
                &"seed@main".parse().unwrap(),
                &name.parse().unwrap(),
                Default::default(),
            )
            .unwrap();
        let copy = e.path(&format!("{name}.plain.db"));
        std::fs::copy(&plain, &copy).unwrap();
        let target = format!("seed@{name}");
        sides.push((
            Connection::open(&copy).unwrap(),
            e.open(&target),
            e.open(&target),
        ));
    }
    for (reference, a, b) in &sides {
        let want = dump(reference);
        assert_eq!(dump(a), want, "a fork's first read");
        assert_eq!(dump(b), want, "a fork's second connection");
    }
    let mut rng = Rng(seed);
    for step in 0..steps {
        let f = step % forks;
        let (reference, a, b) = &sides[f];
        let writer = if rng.below(2) == 0 { a } else { b };
        let (stmts, commit) = transaction(&mut rng, step);
        let end = if commit { "COMMIT" } else { "ROLLBACK" };
        for c in [reference, writer] {
            c.execute_batch("BEGIN").unwrap();
            for s in &stmts {
                c.execute_batch(s).unwrap();
            }
            c.execute_batch(end).unwrap();
        }
        let want = dump(reference);
        assert_eq!(dump(a), want, "seed {seed}, fork {f}, step {step}");
        assert_eq!(dump(b), want, "the other connection, fork {f}, step {step}");
        let g = rng.below(forks as u64) as usize;
        let (reference, a, _) = &sides[g];
        assert_eq!(dump(a), dump(reference), "fork {g} after fork {f} wrote");
    }
    for (g, (reference, a, b)) in sides.iter().enumerate() {
        let want = dump(reference);
        assert_eq!(dump(a), want, "fork {g} at the end");
        assert_eq!(dump(b), want, "fork {g}'s other connection at the end");
    }
    moved(&before, &PageCache::process().stats())
}

#[test]
fn differential_on_forks_sharing_the_page_cache() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let (hits, decodes, waits) = forks_sharing_the_cache(0x5c10_4000, 6, 60);
    eprintln!("shared cache: {hits} hits, {decodes} decodes, {waits} waits");
    // Six forks read one seed: its pages are decoded for the first and served from the
    // cache to the other five.
    assert!(hits > decodes, "{hits} hits, {decodes} decodes");
}

/// The same workload in a process whose cache holds a few pages: entries are evicted at
/// nearly every read, and every read is still right.
#[test]
fn differential_with_a_page_cache_of_a_few_pages() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    if std::env::var(TINY_CHILD).is_ok() {
        let (hits, decodes, _) = forks_sharing_the_cache(0x5c10_5000, 4, 60);
        let s = PageCache::process().stats();
        assert!(s.capacity_bytes <= 8 * 4192, "{s:?}");
        assert!(s.used_bytes <= s.capacity_bytes, "the bound holds: {s:?}");
        assert!(s.pages <= 8, "{s:?}");
        // Far more decodes than the cache can hold: it evicted all along.
        assert!(decodes > 50 * 8, "{decodes} decodes, {hits} hits");
        eprintln!("tiny cache: {hits} hits, {decodes} decodes, {s:?}");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "differential_with_a_page_cache_of_a_few_pages",
            "--nocapture",
            "-q",
        ])
        .env(TINY_CHILD, "1")
        .env("SCION_PAGE_CACHE", (8 * 4192).to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert!(out.status.success(), "the tiny-cache process failed");
    assert!(stderr.contains("tiny cache:"), "the child ran the workload");
}

/// A frame that fails its check is never kept: every read of it fails, and once the store
/// holds good bytes again the next read decodes them and succeeds.
#[test]
fn a_damaged_frame_is_never_cached() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let e = Env::new();
    e.create(
        "dmg",
        4096,
        "CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
         INSERT INTO t(body) SELECT printf('%.*c', 300, char(97 + i % 26)) FROM n;",
    );
    let segments = e.scion.engine().backend().list("segments/").unwrap();
    assert_eq!(segments.len(), 1, "{segments:?}");
    let file = e.store().join(&segments[0].key);
    let good = std::fs::read(&file).unwrap();
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    std::fs::write(&file, &bad).unwrap();
    let scan = || -> rusqlite::Result<i64> {
        // A fresh connection each time: nothing is served from SQLite's own cache.
        e.open("dmg@main")
            .query_row("SELECT sum(length(body)) FROM t", [], |r| r.get(0))
    };
    for attempt in 0..3 {
        let err = scan().unwrap_err();
        assert!(
            err.to_string().contains("malformed") || err.to_string().contains("I/O"),
            "attempt {attempt}: {err}"
        );
    }
    std::fs::write(&file, &good).unwrap();
    let before = PageCache::process().stats();
    assert_eq!(scan().unwrap(), 2000 * 300);
    let (_, decodes, _) = moved(&before, &PageCache::process().stats());
    assert!(decodes > 0, "the good frame was decoded, not served stale");
    // And now it is kept: the next scan decodes nothing.
    let before = PageCache::process().stats();
    assert_eq!(scan().unwrap(), 2000 * 300);
    let (hits, decodes, _) = moved(&before, &PageCache::process().stats());
    assert_eq!(decodes, 0, "{hits} hits");
}

/// Many threads, each on connections to forks of one seed, scan the same pages at once:
/// every page is decoded once in the process (a thread that finds another decoding it
/// waits), the rest are hits, and every scan sees the seed's rows.
#[test]
fn many_threads_on_many_forks_decode_each_page_once() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    const FORKS: usize = 8;
    const THREADS: usize = 8;
    const SCANS: usize = 4;
    let e = Env::new();
    let plain = e.create(
        "many",
        4096,
        "CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000)
         INSERT INTO t(body) SELECT printf('%.*c', 400, char(97 + i % 26)) FROM n;",
    );
    let pages: i64 = Connection::open(&plain)
        .unwrap()
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    let pages = pages as u64;
    for f in 0..FORKS {
        e.scion
            .engine()
            .fork(
                &"many@main".parse().unwrap(),
                &format!("f{f}").parse().unwrap(),
                Default::default(),
            )
            .unwrap();
    }
    let before = PageCache::process().stats();
    let start = std::sync::Barrier::new(THREADS);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (e, start) = (&e, &start);
            s.spawn(move || {
                start.wait();
                for scan in 0..SCANS {
                    // A new connection per scan: nothing comes from SQLite's own cache.
                    let c = e.open(&format!("many@f{}", (t + scan) % FORKS));
                    let total: i64 = c
                        .query_row("SELECT sum(length(body)) FROM t", [], |r| r.get(0))
                        .unwrap();
                    assert_eq!(total, 4000 * 400, "thread {t}, scan {scan}");
                }
            });
        }
    });
    let (hits, decodes, waits) = moved(&before, &PageCache::process().stats());
    eprintln!("{THREADS} threads x {SCANS} scans of {pages} pages: {hits} hits, {decodes} decodes, {waits} waits");
    assert!(
        decodes > 0 && decodes <= pages,
        "each page decoded at most once: {decodes} of {pages}"
    );
    assert!(
        hits >= (THREADS * SCANS - 1) as u64 * (pages / 2),
        "the other scans were served from the cache: {hits} hits"
    );
}
