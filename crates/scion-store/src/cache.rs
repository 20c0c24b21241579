//! A local cache of immutable objects (segments) in front of a remote store. Segments
//! never change once written, so a cached copy is always current: the first read of a
//! segment downloads it whole, later reads (any range) are local, and segments this
//! process writes are cached as they are uploaded. Everything else passes through.

use std::fs;
use std::io::Write;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use crate::backend::read_file_range;
use crate::{Backend, ETag, ObjectMeta, PutMode, StoreError, StoreResult};

#[derive(Debug)]
pub struct SegmentCache {
    inner: Arc<dyn Backend>,
    dir: PathBuf,
    /// Keys under this prefix are immutable and cached.
    prefix: String,
}

impl SegmentCache {
    pub fn new(
        inner: Arc<dyn Backend>,
        dir: impl Into<PathBuf>,
        prefix: &str,
    ) -> StoreResult<Self> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| StoreError::io("(cache)", e))?;
        Ok(Self {
            inner,
            dir,
            prefix: prefix.to_string(),
        })
    }

    fn cached(&self, key: &str) -> Option<PathBuf> {
        key.strip_prefix(&self.prefix)
            .map(|name| self.dir.join(name))
    }

    /// Keep a copy of `data` at `path`: written under a name no other process or thread
    /// uses, synced, then renamed, so a reader never sees a partial copy.
    fn store_local(&self, path: &PathBuf, data: &[u8]) {
        let tmp = path.with_extension(format!("{}.{}.part", std::process::id(), unique()));
        let ok = fs::File::create(&tmp)
            .and_then(|mut f| {
                f.write_all(data)?;
                f.sync_all()?;
                // Only a copy of exactly the object's size is ever kept.
                let written = f.metadata()?.len();
                if written != data.len() as u64 {
                    return Err(std::io::Error::other(format!(
                        "wrote {written} bytes of {}",
                        data.len()
                    )));
                }
                Ok(())
            })
            .and_then(|_| fs::rename(&tmp, path));
        if let Err(e) = ok {
            let _ = fs::remove_file(&tmp);
            tracing::debug!("segment cache: could not keep {}: {e}", path.display());
        }
    }

    /// The local copy of `key`, downloading it first if needed.
    fn local(&self, key: &str, path: &PathBuf) -> StoreResult<fs::File> {
        if let Ok(f) = fs::File::open(path) {
            return Ok(f);
        }
        let (data, _) = self.inner.get(key)?;
        self.store_local(path, &data);
        fs::File::open(path).map_err(|e| StoreError::io(key, e))
    }
}

fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Backend for SegmentCache {
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)> {
        self.inner.get(key)
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> StoreResult<Vec<u8>> {
        let Some(path) = self.cached(key) else {
            return self.inner.get_range(key, range);
        };
        let mut f = self.local(key, &path)?;
        match read_file_range(&mut f, key, range.clone()) {
            // A local copy shorter than the range asked for is damaged (segments are
            // immutable and readers ask only for ranges that exist): fetch it again, once.
            Err(StoreError::OutOfRange { .. } | StoreError::Io { .. }) => {
                tracing::debug!(
                    "segment cache: {} is damaged; fetching it again",
                    path.display()
                );
                let _ = fs::remove_file(&path);
                let mut f = self.local(key, &path)?;
                read_file_range(&mut f, key, range)
            }
            other => other,
        }
    }

    fn head(&self, key: &str) -> StoreResult<ObjectMeta> {
        self.inner.head(key)
    }

    fn exists(&self, key: &str) -> StoreResult<bool> {
        self.inner.exists(key)
    }

    fn put(&self, key: &str, data: &[u8], mode: PutMode) -> StoreResult<ETag> {
        let etag = self.inner.put(key, data, mode)?;
        if let Some(path) = self.cached(key) {
            self.store_local(&path, data);
        }
        Ok(etag)
    }

    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn delete(&self, key: &str) -> StoreResult<()> {
        if let Some(path) = self.cached(key) {
            let _ = fs::remove_file(path);
        }
        self.inner.delete(key)
    }

    fn delete_if(&self, key: &str, etag: &ETag) -> StoreResult<()> {
        self.inner.delete_if(key, etag)
    }

    fn delete_many(&self, keys: &[String]) -> StoreResult<()> {
        for k in keys {
            if let Some(path) = self.cached(k) {
                let _ = fs::remove_file(path);
            }
        }
        self.inner.delete_many(keys)
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn change_stamp(&self, key: &str) -> Option<u64> {
        self.inner.change_stamp(key)
    }
    fn evict(&self, key: &str) -> StoreResult<()> {
        if let Some(path) = self.cached(key) {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(key, e)),
            }
        }
        self.inner.evict(key)
    }

    fn now(&self) -> StoreResult<std::time::SystemTime> {
        self.inner.now()
    }
}
