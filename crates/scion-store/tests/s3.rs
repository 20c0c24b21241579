//! The conformance suite against a real S3-compatible server (moto, started by
//! `./scripts/test`), and the refusal of a store that ignores preconditions.

use std::sync::Arc;

use scion_store::{
    Backend, CloudBackend, ETag, MemoryBackend, ObjectMeta, PutMode, S3Config, S3Location,
    StoreResult,
};

/// A fresh, empty store: a unique prefix in the test bucket.
fn fresh() -> Arc<dyn Backend> {
    let Ok(bucket) = std::env::var("SCION_S3_TEST_BUCKET") else {
        if std::env::var("CI").is_ok() {
            panic!("CI must run the S3 tests: SCION_S3_TEST_BUCKET is unset (./scripts/test starts moto)");
        }
        panic!("S3 tests need a server: run ./scripts/test, which starts moto and sets SCION_S3_TEST_BUCKET");
    };
    let mut r = [0u8; 6];
    getrandom::fill(&mut r).unwrap();
    let prefix: String = r.iter().map(|x| format!("{x:02x}")).collect();
    let loc = S3Location::parse(&format!("s3://{bucket}/conformance-{prefix}")).unwrap();
    Arc::new(
        CloudBackend::attach_s3(loc, &S3Config::from_env().unwrap())
            .expect("attach to the test S3 store"),
    )
}

mod s3 {
    scion_store::conformance_tests!(super::fresh());
}

/// Wraps a backend and ignores every precondition: what a store without conditional
/// writes would do.
#[derive(Debug)]
struct IgnoresPreconditions(MemoryBackend);

impl Backend for IgnoresPreconditions {
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)> {
        self.0.get(key)
    }
    fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> StoreResult<Vec<u8>> {
        self.0.get_range(key, range)
    }
    fn head(&self, key: &str) -> StoreResult<ObjectMeta> {
        self.0.head(key)
    }
    fn put(&self, key: &str, data: &[u8], _mode: PutMode) -> StoreResult<ETag> {
        self.0.put(key, data, PutMode::Overwrite)
    }
    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        self.0.list(prefix)
    }
    fn delete(&self, key: &str) -> StoreResult<()> {
        self.0.delete(key)
    }
    fn delete_if(&self, key: &str, _etag: &ETag) -> StoreResult<()> {
        self.0.delete(key)
    }
    fn exists(&self, key: &str) -> StoreResult<bool> {
        self.0.exists(key)
    }
    fn delete_many(&self, keys: &[String]) -> StoreResult<()> {
        self.0.delete_many(keys)
    }
    fn evict(&self, key: &str) -> StoreResult<()> {
        self.0.evict(key)
    }
    fn describe(&self) -> String {
        "a store that ignores preconditions".into()
    }
    fn now(&self) -> StoreResult<std::time::SystemTime> {
        self.0.now()
    }
}

#[test]
fn a_store_without_conditional_writes_is_refused() {
    let err = scion_store::probe_conditional_writes(&IgnoresPreconditions(MemoryBackend::new()))
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("does not enforce create-only puts"), "{msg}");
    // The real ones pass.
    scion_store::probe_conditional_writes(&MemoryBackend::new()).unwrap();
    scion_store::probe_conditional_writes(fresh().as_ref()).unwrap();
}

/// Large create-only puts (segments) go up as multipart uploads: the object reads back
/// byte for byte, across part boundaries, and a taken key is still refused.
#[test]
fn large_create_only_puts_use_multipart_uploads() {
    let bucket = std::env::var("SCION_S3_TEST_BUCKET")
        .expect("S3 tests need a server: run ./scripts/test, which starts moto");
    let mut r = [0u8; 6];
    getrandom::fill(&mut r).unwrap();
    let prefix: String = r.iter().map(|x| format!("{x:02x}")).collect();
    let loc = S3Location::parse(&format!("s3://{bucket}/multipart-{prefix}")).unwrap();
    let config = S3Config {
        multipart_threshold: Some(6 << 20),
        ..S3Config::from_env().unwrap()
    };
    let b = CloudBackend::attach_s3(loc, &config).unwrap();
    let etag = scion_store::conformance::large_create_only_put(&b, 8 << 20);
    assert!(
        etag.0.ends_with("-3"),
        "20 MiB in 8 MiB parts is a 3-part upload (S3 etags count the parts): {etag:?}"
    );
    // Below the threshold: one PUT, whose etag has no part count.
    let small = b
        .put(
            "segments/00000000000000bb",
            &[7u8; 1 << 20],
            PutMode::Create,
        )
        .unwrap();
    assert!(!small.0.contains('-'), "{small:?}");
}
