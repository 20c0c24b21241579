//! The conformance suite against a real S3-compatible server (moto, started by
//! `./scripts/test`), and the refusal of a store that ignores preconditions.

use std::sync::Arc;

use scion_store::{
    Backend, ETag, MemoryBackend, ObjectMeta, PutMode, S3Backend, S3Config, S3Location, StoreResult,
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
    Arc::new(S3Backend::attach(loc, &S3Config::from_env()).expect("attach to the test S3 store"))
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
    fn describe(&self) -> String {
        "a store that ignores preconditions".into()
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
