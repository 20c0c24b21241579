//! A wrapper that makes a backend fail on purpose, so tests can stop an operation after
//! each of its writes in turn and check what a crash at that moment leaves behind.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::{Backend, ETag, ObjectMeta, PutMode, StoreError, StoreResult};

/// What the wrapper does to mutating calls (put, delete, delete_if), counted from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPlan {
    /// Pass everything through.
    None,
    /// Write number `n` fails with a transient error and has no effect; later writes pass.
    FailWrite(usize),
    /// Writes `0..n` take effect, then the "process" is gone: every later call, read or
    /// write, fails. With `n = 0` nothing is written at all.
    CrashAfter(usize),
}

#[derive(Debug)]
pub struct FaultyBackend {
    inner: Arc<dyn Backend>,
    plan: FaultPlan,
    writes: AtomicUsize,
    crashed: AtomicBool,
}

impl FaultyBackend {
    pub fn new(inner: Arc<dyn Backend>, plan: FaultPlan) -> Self {
        Self {
            inner,
            plan,
            writes: AtomicUsize::new(0),
            crashed: AtomicBool::new(false),
        }
    }

    /// Mutating calls attempted so far (including the failed one).
    pub fn writes_attempted(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    pub fn has_crashed(&self) -> bool {
        self.crashed.load(Ordering::SeqCst)
    }

    fn dead(key: &str) -> StoreError {
        StoreError::Transient {
            key: key.to_string(),
            message: "injected crash: the process is gone".to_string(),
        }
    }

    fn check_read(&self, key: &str) -> StoreResult<()> {
        if self.has_crashed() {
            return Err(Self::dead(key));
        }
        Ok(())
    }

    /// Decide the fate of the next write: `Ok(())` to perform it.
    fn before_write(&self, key: &str) -> StoreResult<()> {
        self.check_read(key)?;
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        match self.plan {
            FaultPlan::None => Ok(()),
            FaultPlan::FailWrite(k) if k == n => Err(StoreError::Transient {
                key: key.to_string(),
                message: format!("injected failure of write #{n}"),
            }),
            FaultPlan::FailWrite(_) => Ok(()),
            FaultPlan::CrashAfter(k) if n >= k => {
                self.crashed.store(true, Ordering::SeqCst);
                Err(Self::dead(key))
            }
            FaultPlan::CrashAfter(_) => Ok(()),
        }
    }
}

impl Backend for FaultyBackend {
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)> {
        self.check_read(key)?;
        self.inner.get(key)
    }
    fn get_range(&self, key: &str, range: Range<u64>) -> StoreResult<Vec<u8>> {
        self.check_read(key)?;
        self.inner.get_range(key, range)
    }
    fn head(&self, key: &str) -> StoreResult<ObjectMeta> {
        self.check_read(key)?;
        self.inner.head(key)
    }
    fn exists(&self, key: &str) -> StoreResult<bool> {
        self.check_read(key)?;
        self.inner.exists(key)
    }
    fn put(&self, key: &str, data: &[u8], mode: PutMode) -> StoreResult<ETag> {
        self.before_write(key)?;
        self.inner.put(key, data, mode)
    }
    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        self.check_read(prefix)?;
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> StoreResult<()> {
        self.before_write(key)?;
        self.inner.delete(key)
    }
    fn delete_if(&self, key: &str, etag: &ETag) -> StoreResult<()> {
        self.before_write(key)?;
        self.inner.delete_if(key, etag)
    }
    fn delete_many(&self, keys: &[String]) -> StoreResult<()> {
        self.before_write("(batch delete)")?;
        self.inner.delete_many(keys)
    }
    fn describe(&self) -> String {
        format!("faulty({:?}) {}", self.plan, self.inner.describe())
    }
}
