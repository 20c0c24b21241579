//! Bad input and damaged local state never take the store down: each test is named
//! after what it pins.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use rusqlite::Connection;
use scion_core::{CoreError, DbName, EngineError, Scion};
use scion_store::{LocalBackend, SegmentCache};

/// A store whose segments are read through a local cache, like an S3 store's.
fn cached_env() -> (Env, Scion, PathBuf) {
    let e = env();
    create_shop(&e, 300);
    let cache_dir = e.path("segment-cache");
    let cached = Arc::new(
        SegmentCache::new(
            Arc::new(LocalBackend::open(e.store_dir()).unwrap()),
            &cache_dir,
            "segments/",
        )
        .unwrap(),
    );
    let s = Scion::open(cached, "cached", e.options()).unwrap();
    (e, s, cache_dir)
}

fn cached_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

#[test]
fn a_corrupt_segment_cache_copy_is_dropped_and_fetched_again() {
    let (e, s, cache) = cached_env();
    let want = e.dump_target(&e.scion, "shop");
    assert_eq!(
        e.dump_target(&s, "shop"),
        want,
        "first read fills the cache"
    );
    let copies = cached_files(&cache);
    assert!(!copies.is_empty());
    for copy in &copies {
        let mut bytes = std::fs::read(copy).unwrap();
        // Flip bits through the frame area (past the header), everywhere.
        for i in (40..bytes.len().saturating_sub(40)).step_by(97) {
            bytes[i] ^= 0x5a;
        }
        std::fs::write(copy, &bytes).unwrap();
    }
    let s = Scion::open(s.engine().backend().clone(), "cached", e.options()).unwrap();
    assert_eq!(e.dump_target(&s, "shop"), want, "read again from the store");
    for copy in &copies {
        let name = copy.file_name().unwrap().to_str().unwrap();
        let original = std::fs::read(e.store_dir().join("segments").join(name)).unwrap();
        assert_eq!(
            std::fs::read(copy).unwrap(),
            original,
            "{name} was replaced"
        );
    }
}

#[test]
fn a_truncated_segment_cache_copy_is_fetched_again() {
    let (e, s, cache) = cached_env();
    let want = e.dump_target(&e.scion, "shop");
    e.dump_target(&s, "shop");
    for copy in cached_files(&cache) {
        let len = std::fs::metadata(&copy).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&copy)
            .unwrap()
            .set_len(len / 3)
            .unwrap();
    }
    let s = Scion::open(s.engine().backend().clone(), "cached", e.options()).unwrap();
    assert_eq!(e.dump_target(&s, "shop"), want);
}

#[test]
fn a_segment_damaged_in_the_store_itself_is_reported_not_retried_forever() {
    let (e, s, _cache) = cached_env();
    for entry in std::fs::read_dir(e.store_dir().join("segments"))
        .unwrap()
        .flatten()
    {
        let mut bytes = std::fs::read(entry.path()).unwrap();
        for i in (40..bytes.len().saturating_sub(40)).step_by(97) {
            bytes[i] ^= 0x5a;
        }
        std::fs::write(entry.path(), &bytes).unwrap();
    }
    let out = e.path("out.db");
    match s.export(&"shop".parse().unwrap(), &out, false) {
        Err(CoreError::Engine(EngineError::Corrupt { .. })) => {}
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(!out.exists());
}

#[test]
fn a_from_source_with_a_hot_journal_says_what_to_do() {
    let e = env();
    let live = e.path("live.db");
    seed(&live, 3000);
    let c = Connection::open(&live).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=DELETE; PRAGMA cache_size=2; BEGIN; UPDATE items SET name = name || 'changed';",
    )
    .unwrap();
    // A snapshot mid-transaction is what a crash leaves: pages changed in the file and
    // the journal that undoes them.
    let src = e.path("crashed.db");
    std::fs::copy(&live, &src).unwrap();
    std::fs::copy(
        format!("{}-journal", live.display()),
        format!("{}-journal", src.display()),
    )
    .unwrap();
    c.execute_batch("ROLLBACK").unwrap();
    drop(c);
    let err = e
        .scion
        .engine()
        .create(&DbName::new("crashed").unwrap(), Some(&src))
        .unwrap_err();
    assert!(matches!(err, EngineError::HotJournal { .. }), "{err:?}");
    // What the message says to do works: one read-write open rolls the journal back.
    Connection::open(&src)
        .unwrap()
        .query_row("SELECT count(*) FROM items", [], |r| r.get::<_, i64>(0))
        .unwrap();
    e.scion
        .engine()
        .create(&DbName::new("crashed").unwrap(), Some(&src))
        .unwrap();
    assert_eq!(e.dump_target(&e.scion, "crashed"), dump(&live));
}
