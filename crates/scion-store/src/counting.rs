//! A wrapper that counts requests and bytes, so tests and benchmarks can pin what an
//! operation costs in the store (objects and bytes, never time).

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::{Backend, ETag, ObjectMeta, PutMode, StoreResult};

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub gets: u64,
    pub ranged_gets: u64,
    pub heads: u64,
    pub puts: u64,
    pub lists: u64,
    pub deletes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl Counts {
    pub fn requests(&self) -> u64 {
        self.gets + self.ranged_gets + self.heads + self.puts + self.lists + self.deletes
    }
}

#[derive(Debug)]
pub struct CountingBackend {
    inner: Arc<dyn Backend>,
    gets: AtomicU64,
    ranged_gets: AtomicU64,
    heads: AtomicU64,
    puts: AtomicU64,
    lists: AtomicU64,
    deletes: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

impl CountingBackend {
    pub fn new(inner: Arc<dyn Backend>) -> Self {
        Self {
            inner,
            gets: AtomicU64::new(0),
            ranged_gets: AtomicU64::new(0),
            heads: AtomicU64::new(0),
            puts: AtomicU64::new(0),
            lists: AtomicU64::new(0),
            deletes: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
        }
    }

    pub fn counts(&self) -> Counts {
        let l = |a: &AtomicU64| a.load(Ordering::SeqCst);
        Counts {
            gets: l(&self.gets),
            ranged_gets: l(&self.ranged_gets),
            heads: l(&self.heads),
            puts: l(&self.puts),
            lists: l(&self.lists),
            deletes: l(&self.deletes),
            bytes_read: l(&self.bytes_read),
            bytes_written: l(&self.bytes_written),
        }
    }
}

fn bump(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::SeqCst);
}

impl Backend for CountingBackend {
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)> {
        bump(&self.gets, 1);
        let r = self.inner.get(key)?;
        bump(&self.bytes_read, r.0.len() as u64);
        Ok(r)
    }
    fn get_range(&self, key: &str, range: Range<u64>) -> StoreResult<Vec<u8>> {
        bump(&self.ranged_gets, 1);
        let r = self.inner.get_range(key, range)?;
        bump(&self.bytes_read, r.len() as u64);
        Ok(r)
    }
    fn get_range_into(&self, key: &str, range: Range<u64>, out: &mut Vec<u8>) -> StoreResult<()> {
        bump(&self.ranged_gets, 1);
        self.inner.get_range_into(key, range, out)?;
        bump(&self.bytes_read, out.len() as u64);
        Ok(())
    }
    fn head(&self, key: &str) -> StoreResult<ObjectMeta> {
        bump(&self.heads, 1);
        self.inner.head(key)
    }
    fn exists(&self, key: &str) -> StoreResult<bool> {
        bump(&self.heads, 1);
        self.inner.exists(key)
    }
    fn put(&self, key: &str, data: &[u8], mode: PutMode) -> StoreResult<ETag> {
        bump(&self.puts, 1);
        bump(&self.bytes_written, data.len() as u64);
        self.inner.put(key, data, mode)
    }
    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        bump(&self.lists, 1);
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> StoreResult<()> {
        bump(&self.deletes, 1);
        self.inner.delete(key)
    }
    fn delete_if(&self, key: &str, etag: &ETag) -> StoreResult<()> {
        bump(&self.deletes, 1);
        self.inner.delete_if(key, etag)
    }
    fn delete_many(&self, keys: &[String]) -> StoreResult<()> {
        bump(&self.deletes, 1);
        self.inner.delete_many(keys)
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
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn now(&self) -> StoreResult<std::time::SystemTime> {
        self.inner.now()
    }
}
