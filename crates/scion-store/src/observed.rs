//! A wrapper that reports every request (operation, outcome, latency) to an observer: how
//! a long-running process such as the daemon exports store metrics.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::{Backend, ETag, ObjectMeta, PutMode, StoreError, StoreResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreOp {
    Get,
    GetRange,
    Head,
    Put,
    List,
    Delete,
}

impl StoreOp {
    pub fn name(self) -> &'static str {
        match self {
            StoreOp::Get => "get",
            StoreOp::GetRange => "get_range",
            StoreOp::Head => "head",
            StoreOp::Put => "put",
            StoreOp::List => "list",
            StoreOp::Delete => "delete",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Ok,
    NotFound,
    /// A conditional write lost (already exists, or changed since read): an answer, not
    /// a failure.
    Conflict,
    Error,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::NotFound => "not_found",
            Outcome::Conflict => "conflict",
            Outcome::Error => "error",
        }
    }

    fn of<T>(r: &StoreResult<T>) -> Outcome {
        match r {
            Ok(_) => Outcome::Ok,
            Err(StoreError::NotFound { .. }) => Outcome::NotFound,
            Err(StoreError::AlreadyExists { .. } | StoreError::Conflict { .. }) => {
                Outcome::Conflict
            }
            Err(_) => Outcome::Error,
        }
    }
}

pub trait RequestObserver: Send + Sync {
    fn observe(&self, op: StoreOp, outcome: Outcome, took: Duration);
}

pub struct ObservedBackend {
    inner: Arc<dyn Backend>,
    observer: Arc<dyn RequestObserver>,
}

impl fmt::Debug for ObservedBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObservedBackend")
            .field("inner", &self.inner)
            .finish()
    }
}

impl ObservedBackend {
    pub fn new(inner: Arc<dyn Backend>, observer: Arc<dyn RequestObserver>) -> Self {
        ObservedBackend { inner, observer }
    }

    fn timed<T>(&self, op: StoreOp, f: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        let start = Instant::now();
        let r = f();
        self.observer.observe(op, Outcome::of(&r), start.elapsed());
        r
    }
}

impl Backend for ObservedBackend {
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)> {
        self.timed(StoreOp::Get, || self.inner.get(key))
    }
    fn get_range(&self, key: &str, range: Range<u64>) -> StoreResult<Vec<u8>> {
        self.timed(StoreOp::GetRange, || self.inner.get_range(key, range))
    }
    fn get_range_into(&self, key: &str, range: Range<u64>, out: &mut Vec<u8>) -> StoreResult<()> {
        self.timed(StoreOp::GetRange, || {
            self.inner.get_range_into(key, range, out)
        })
    }
    fn head(&self, key: &str) -> StoreResult<ObjectMeta> {
        self.timed(StoreOp::Head, || self.inner.head(key))
    }
    fn exists(&self, key: &str) -> StoreResult<bool> {
        self.timed(StoreOp::Head, || self.inner.exists(key))
    }
    fn put(&self, key: &str, data: &[u8], mode: PutMode) -> StoreResult<ETag> {
        self.timed(StoreOp::Put, || self.inner.put(key, data, mode))
    }
    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        self.timed(StoreOp::List, || self.inner.list(prefix))
    }
    fn delete(&self, key: &str) -> StoreResult<()> {
        self.timed(StoreOp::Delete, || self.inner.delete(key))
    }
    fn delete_if(&self, key: &str, etag: &ETag) -> StoreResult<()> {
        self.timed(StoreOp::Delete, || self.inner.delete_if(key, etag))
    }
    fn delete_many(&self, keys: &[String]) -> StoreResult<()> {
        self.timed(StoreOp::Delete, || self.inner.delete_many(keys))
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn now(&self) -> StoreResult<SystemTime> {
        self.inner.now()
    }
    fn change_stamp(&self, key: &str) -> Option<u64> {
        self.inner.change_stamp(key)
    }
    fn prefetch(&self, ranges: &[(String, Range<u64>)]) {
        self.inner.prefetch(ranges)
    }
    fn evict(&self, key: &str) -> StoreResult<()> {
        self.inner.evict(key)
    }
}
