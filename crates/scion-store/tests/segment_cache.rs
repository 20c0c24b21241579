//! The segment cache's bound: what it keeps, what it drops, and that a dropped copy is
//! fetched again. A real directory store behind it, counted.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use scion_store::{Backend, CacheLimit, CountingBackend, LocalBackend, PutMode, SegmentCache};

const MIB: u64 = 1 << 20;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<CountingBackend>,
    cache: SegmentCache,
    cache_dir: std::path::PathBuf,
}

/// A store holding `segments` segments of 1 MiB each, and a cache of it holding `limit`.
fn fixture(segments: usize, limit: CacheLimit) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let local = Arc::new(LocalBackend::open(dir.path().join("store")).unwrap());
    for i in 0..segments {
        let body = vec![i as u8; MIB as usize];
        local.put(&key(i), &body, PutMode::Create).unwrap();
    }
    let store = Arc::new(CountingBackend::new(local));
    let cache_dir = dir.path().join("cache");
    let cache = SegmentCache::new(store.clone(), &cache_dir, "segments/")
        .unwrap()
        .with_limit(limit);
    Fixture {
        _dir: dir,
        store,
        cache,
        cache_dir,
    }
}

fn key(i: usize) -> String {
    format!("segments/s{i}")
}

/// Read a few bytes of segment `i` through the cache, checking them.
fn read(f: &Fixture, i: usize) {
    let bytes = f.cache.get_range(&key(i), 100..110).unwrap();
    assert_eq!(bytes, vec![i as u8; 10], "segment {i}");
}

/// Whole-object downloads the cache made so far.
fn downloads(f: &Fixture) -> u64 {
    f.store.counts().gets
}

fn cached(f: &Fixture, i: usize) -> bool {
    f.cache_dir.join(format!("s{i}")).exists()
}

fn set_last_use(path: &Path, ago: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - ago).unwrap();
}

#[test]
fn a_full_cache_drops_the_copies_used_least_recently_and_fetches_them_again() {
    // Room for three and a half segments: reading a fourth trims to nine tenths (3.15 MiB).
    let f = fixture(6, CacheLimit::Bytes(7 * MIB / 2));
    for i in 0..6 {
        read(&f, i);
        assert!(
            f.cache.held_bytes() <= 7 * MIB / 2,
            "{} bytes held after segment {i}",
            f.cache.held_bytes()
        );
    }
    assert_eq!(downloads(&f), 6);
    let kept: Vec<usize> = (0..6).filter(|i| cached(&f, *i)).collect();
    assert_eq!(kept, vec![3, 4, 5], "the three read last stay");
    read(&f, 5);
    assert_eq!(downloads(&f), 6, "a kept copy is read locally");
    read(&f, 0);
    assert_eq!(downloads(&f), 7, "a dropped copy is fetched again, whole");
    assert!(cached(&f, 0));
}

#[test]
fn a_read_moves_a_copy_to_the_back_of_the_queue() {
    let f = fixture(4, CacheLimit::Bytes(7 * MIB / 2));
    for i in 0..3 {
        read(&f, i);
    }
    // Segment 0 was used first, 2 last; then 0 is read again.
    for (i, minutes) in [(0, 30), (1, 20), (2, 10)] {
        set_last_use(
            &f.cache_dir.join(format!("s{i}")),
            Duration::from_secs(minutes * 60),
        );
    }
    read(&f, 0);
    read(&f, 3);
    assert!(cached(&f, 0), "read a moment ago: kept");
    assert!(!cached(&f, 1), "the least recently used goes");
    assert!(cached(&f, 2) && cached(&f, 3));
    assert_eq!(downloads(&f), 4);
}

#[test]
fn a_copy_larger_than_the_limit_is_still_kept_while_it_is_read() {
    let f = fixture(2, CacheLimit::Bytes(MIB / 2));
    read(&f, 0);
    read(&f, 1);
    assert!(
        !cached(&f, 0) && cached(&f, 1),
        "only the copy just kept stays"
    );
    assert_eq!(f.cache.held_bytes(), MIB);
}

#[test]
fn an_unbounded_cache_keeps_everything() {
    let f = fixture(5, CacheLimit::Unbounded);
    for i in 0..5 {
        read(&f, i);
    }
    assert_eq!(f.cache.held_bytes(), 5 * MIB);
    assert!((0..5).all(|i| cached(&f, i)));
}

#[test]
fn cache_limits_parse_with_units_and_refuse_what_they_do_not_know() {
    assert_eq!("10GiB".parse(), Ok(CacheLimit::Bytes(10 << 30)));
    assert_eq!("500 MiB".parse(), Ok(CacheLimit::Bytes(500 << 20)));
    assert_eq!("4096".parse(), Ok(CacheLimit::Bytes(4096)));
    assert_eq!("1tib".parse(), Ok(CacheLimit::Bytes(1 << 40)));
    assert_eq!("Unlimited".parse(), Ok(CacheLimit::Unbounded));
    for bad in ["10GB", "lots", "", "-1MiB", "99999999999TiB"] {
        let e = bad.parse::<CacheLimit>().unwrap_err();
        assert!(e.contains(bad.trim()), "{bad:?}: {e}");
    }
}

/// A prefetch downloads the segments not yet kept, once each, side by side; the reads that
/// follow are local, and a segment already kept (or not a segment) is not fetched again.
#[test]
fn a_prefetch_downloads_what_is_missing_once_and_the_reads_that_follow_are_local() {
    let f = fixture(6, CacheLimit::Unbounded);
    read(&f, 0);
    assert_eq!(downloads(&f), 1);
    let mut ranges: Vec<(String, std::ops::Range<u64>)> =
        (0..6).map(|i| (key(i), 100..110)).collect();
    ranges.push((key(3), 200..210));
    ranges.push(("refs/not-a-segment".to_string(), 0..1));
    f.cache.prefetch(&ranges);
    assert_eq!(downloads(&f), 6, "segments 1 to 5, once each");
    for i in 0..6 {
        assert!(cached(&f, i), "segment {i}");
        read(&f, i);
    }
    assert_eq!(downloads(&f), 6, "every read was local");
    f.cache.prefetch(&ranges);
    assert_eq!(downloads(&f), 6, "nothing missing: nothing fetched");
}
