//! The behaviour every backend must show. Each check is a public function taking a fresh,
//! empty backend; [`conformance_tests!`](crate::conformance_tests) turns them into one
//! `#[test]` each for a backend factory.

use std::sync::{Arc, Barrier};

use crate::{Backend, ETag, PutMode, StoreError};

pub fn round_trip(b: Arc<dyn Backend>) {
    let etag = b.put("a/b/c", b"hello", PutMode::Create).unwrap();
    let (data, got) = b.get("a/b/c").unwrap();
    assert_eq!(data, b"hello");
    assert_eq!(got, etag, "get returns the etag the put reported");
    let meta = b.head("a/b/c").unwrap();
    assert_eq!(meta.size, 5);
    assert_eq!(meta.etag, etag);
    let empty = b.put("a/empty", b"", PutMode::Create).unwrap();
    assert_eq!(b.get("a/empty").unwrap(), (Vec::new(), empty));
    let big: Vec<u8> = (0..1_000_003u32).map(|i| (i * 7 % 251) as u8).collect();
    b.put("big", &big, PutMode::Create).unwrap();
    assert_eq!(b.get("big").unwrap().0, big);
}

pub fn existence(b: Arc<dyn Backend>) {
    assert!(!b.exists("e/x").unwrap());
    b.put("e/x", b"1", PutMode::Create).unwrap();
    assert!(b.exists("e/x").unwrap());
    assert!(!b.exists("e").unwrap(), "a prefix is not an object");
    b.delete("e/x").unwrap();
    assert!(!b.exists("e/x").unwrap());
}

pub fn missing_objects(b: Arc<dyn Backend>) {
    assert!(matches!(b.get("nope"), Err(StoreError::NotFound { .. })));
    assert!(matches!(b.head("nope"), Err(StoreError::NotFound { .. })));
    assert!(matches!(
        b.get_range("nope", 0..1),
        Err(StoreError::NotFound { .. })
    ));
}

pub fn create_only_refuses_existing(b: Arc<dyn Backend>) {
    b.put("k", b"first", PutMode::Create).unwrap();
    let err = b.put("k", b"second", PutMode::Create).unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists { .. }), "{err:?}");
    assert!(!err.is_retryable());
    assert_eq!(b.get("k").unwrap().0, b"first", "create never replaces");
}

pub fn compare_and_swap(b: Arc<dyn Backend>) {
    let e1 = b.put("ref", b"v1", PutMode::Create).unwrap();
    let e2 = b.put("ref", b"v2", PutMode::Update(e1.clone())).unwrap();
    assert_ne!(e1, e2);
    let stale = b
        .put("ref", b"v3", PutMode::Update(e1.clone()))
        .unwrap_err();
    assert!(matches!(stale, StoreError::Conflict { .. }), "{stale:?}");
    assert!(!stale.is_retryable());
    assert_eq!(b.get("ref").unwrap().0, b"v2");
    let bogus = b
        .put("ref", b"v3", PutMode::Update(ETag("bogus".into())))
        .unwrap_err();
    assert!(matches!(bogus, StoreError::Conflict { .. }));
    let e3 = b.put("ref", b"v3", PutMode::Update(e2)).unwrap();
    assert_eq!(b.get("ref").unwrap(), (b"v3".to_vec(), e3));
}

pub fn compare_and_swap_on_missing_key(b: Arc<dyn Backend>) {
    let err = b
        .put("ghost", b"x", PutMode::Update(ETag("anything".into())))
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err:?}");
    assert!(b.get("ghost").unwrap_err().is_not_found());
}

pub fn overwrite(b: Arc<dyn Backend>) {
    b.put("o", b"1", PutMode::Overwrite).unwrap();
    b.put("o", b"2", PutMode::Overwrite).unwrap();
    assert_eq!(b.get("o").unwrap().0, b"2");
}

pub fn list_ordering_and_prefixes(b: Arc<dyn Backend>) {
    for k in [
        "refs/shop/main",
        "refs/shop/try-2",
        "refs/shop/try-10",
        "refs/shopping/main",
        "refs/a/main",
        "segments/00ff",
        "segments/0a",
    ] {
        b.put(k, k.as_bytes(), PutMode::Create).unwrap();
    }
    let keys = |p: &str| -> Vec<String> { b.list(p).unwrap().into_iter().map(|m| m.key).collect() };
    assert_eq!(
        keys("refs/shop/"),
        vec!["refs/shop/main", "refs/shop/try-10", "refs/shop/try-2"]
    );
    assert_eq!(
        keys("refs/shop"),
        vec![
            "refs/shop/main",
            "refs/shop/try-10",
            "refs/shop/try-2",
            "refs/shopping/main"
        ]
    );
    assert_eq!(keys("segments/"), vec!["segments/00ff", "segments/0a"]);
    assert_eq!(keys("refs/none/"), Vec::<String>::new());
    assert_eq!(keys("").len(), 7);
    let sizes: Vec<u64> = b
        .list("segments/")
        .unwrap()
        .iter()
        .map(|m| m.size)
        .collect();
    assert_eq!(sizes, vec![13, 11]);
}

pub fn delete_is_idempotent(b: Arc<dyn Backend>) {
    b.put("d", b"x", PutMode::Create).unwrap();
    b.delete("d").unwrap();
    assert!(b.get("d").unwrap_err().is_not_found());
    b.delete("d").unwrap();
    b.put("d", b"again", PutMode::Create).unwrap();
    assert_eq!(b.get("d").unwrap().0, b"again");
}

pub fn conditional_delete(b: Arc<dyn Backend>) {
    let e1 = b.put("c", b"1", PutMode::Create).unwrap();
    let e2 = b.put("c", b"2", PutMode::Update(e1.clone())).unwrap();
    assert!(matches!(
        b.delete_if("c", &e1),
        Err(StoreError::Conflict { .. })
    ));
    b.delete_if("c", &e2).unwrap();
    assert!(matches!(
        b.delete_if("c", &e2),
        Err(StoreError::Conflict { .. })
    ));
}

pub fn ranged_reads(b: Arc<dyn Backend>) {
    let data: Vec<u8> = (0..=255u8).collect();
    b.put("r", &data, PutMode::Create).unwrap();
    assert_eq!(b.get_range("r", 10..20).unwrap(), data[10..20].to_vec());
    assert_eq!(b.get_range("r", 0..256).unwrap(), data);
    assert_eq!(b.get_range("r", 256..256).unwrap(), Vec::<u8>::new());
    assert!(b.get_range("r", 200..300).is_err(), "never a short read");
}

pub fn invalid_keys_refused(b: Arc<dyn Backend>) {
    for k in [
        "",
        "/abs",
        "a//b",
        "a/../b",
        "..",
        "a/.hidden",
        "trail/",
        "a\\b",
    ] {
        assert!(
            matches!(
                b.put(k, b"x", PutMode::Overwrite),
                Err(StoreError::InvalidKey { .. })
            ),
            "key {k:?} must be refused"
        );
    }
}

/// Many threads race one compare-and-swap from the same etag: exactly one wins each round.
pub fn compare_and_swap_race(b: Arc<dyn Backend>) {
    const THREADS: usize = 8;
    let mut etag = b.put("race", b"start", PutMode::Create).unwrap();
    for round in 0..20 {
        let barrier = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let b = b.clone();
                let barrier = barrier.clone();
                let etag = etag.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    let body = format!("round {round} thread {t}");
                    b.put("race", body.as_bytes(), PutMode::Update(etag))
                        .map(|e| (body, e))
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: exactly one winner");
        for r in &results {
            if let Err(e) = r {
                assert!(matches!(e, StoreError::Conflict { .. }), "{e:?}");
            }
        }
        let (body, new_etag) = winners[0].clone();
        assert_eq!(
            b.get("race").unwrap(),
            (body.into_bytes(), new_etag.clone())
        );
        etag = new_etag;
    }
}

/// Many threads race a create-only put of one key: exactly one wins.
pub fn create_race(b: Arc<dyn Backend>) {
    const THREADS: usize = 8;
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let b = b.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                b.put("once", format!("{t}").as_bytes(), PutMode::Create)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .all(|e| matches!(e, StoreError::AlreadyExists { .. })));
}

/// The store's clock agrees with the times it stamps on objects it writes: stamps and ages
/// are judged by one clock. A wrapper that answered with another clock fails here.
pub fn clock_matches_object_times(b: Arc<dyn Backend>) {
    b.put("clock", b"t", PutMode::Create).unwrap();
    let written = b.head("clock").unwrap().last_modified;
    let now = b.now().unwrap();
    let apart = now.duration_since(written).unwrap_or_else(|e| e.duration());
    assert!(
        apart < std::time::Duration::from_secs(5),
        "store clock {now:?} vs object time {written:?}"
    );
}

/// A 20 MiB create-only put (a large segment: a multipart or block upload on the cloud
/// backends) reads back byte for byte, also across `boundary` (a part size), and a taken
/// key is still refused. Not in [`conformance_tests!`](crate::conformance_tests): it moves
/// 40 MiB, so only backends that upload large objects another way run it. Returns the
/// object's etag.
pub fn large_create_only_put(b: &dyn Backend, boundary: u64) -> ETag {
    let key = "segments/00000000000000aa";
    let data: Vec<u8> = (0..20u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let etag = b.put(key, &data, PutMode::Create).unwrap();
    let (back, _) = b.get(key).unwrap();
    assert!(back == data, "the object reads back byte for byte");
    assert_eq!(
        b.get_range(key, boundary - 10..boundary + 10).unwrap(),
        data[boundary as usize - 10..boundary as usize + 10]
    );
    let again = b.put(key, &data, PutMode::Create);
    assert!(
        matches!(again, Err(StoreError::AlreadyExists { .. })),
        "{again:?}"
    );
    etag
}

/// One `#[test]` per conformance check for a backend factory expression. The factory may
/// also answer `(backend, guard)`: the guard (a temporary directory, say) is dropped when
/// the test ends, after the backend.
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests!(@each $factory;
            round_trip, existence, missing_objects, create_only_refuses_existing, compare_and_swap,
            compare_and_swap_on_missing_key, overwrite, list_ordering_and_prefixes,
            delete_is_idempotent, conditional_delete, ranged_reads, invalid_keys_refused,
            compare_and_swap_race, create_race, clock_matches_object_times);
    };
    (@each $factory:expr; $($check:ident),*) => {
        $(
            #[test]
            fn $check() {
                let (backend, _guard) = $crate::conformance::Fixture::from($factory).into_parts();
                $crate::conformance::$check(backend);
            }
        )*
    };
}

/// A backend under test, and whatever must outlive it.
pub struct Fixture {
    backend: Arc<dyn Backend>,
    guard: Box<dyn std::any::Any>,
}

impl Fixture {
    pub fn into_parts(self) -> (Arc<dyn Backend>, Box<dyn std::any::Any>) {
        (self.backend, self.guard)
    }
}

impl<B: Backend + 'static> From<Arc<B>> for Fixture {
    fn from(backend: Arc<B>) -> Self {
        Fixture {
            backend,
            guard: Box::new(()),
        }
    }
}

impl From<Arc<dyn Backend>> for Fixture {
    fn from(backend: Arc<dyn Backend>) -> Self {
        Fixture {
            backend,
            guard: Box::new(()),
        }
    }
}

impl<G: 'static> From<(Arc<dyn Backend>, G)> for Fixture {
    fn from((backend, guard): (Arc<dyn Backend>, G)) -> Self {
        Fixture {
            backend,
            guard: Box::new(guard),
        }
    }
}
