//! A local cache of immutable objects (segments) in front of a remote store. Segments
//! never change once written, so a cached copy is always current: the first read of a
//! segment downloads it whole, later reads (any range) are local, and segments this
//! process writes are cached as they are uploaded. Everything else passes through.
//!
//! The cache holds at most its [`CacheLimit`]: when a copy kept takes it over, the copies
//! used least recently go (a copy's modification time is its last use, moved at most once a
//! minute), down to nine tenths of the limit. A copy removed while another reader has it
//! open stays readable through that descriptor; the next read of it downloads it again.

use std::fs;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::backend::read_file_range;
pub use crate::cache_limit::{CacheLimit, CacheUsage};
use crate::{Backend, ETag, ObjectMeta, PutMode, StoreError, StoreResult};

/// A copy's last use is moved forward when it is older than this: often enough to order
/// copies by use, seldom enough that reads do not write.
const TOUCH_AFTER: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct SegmentCache {
    inner: Arc<dyn Backend>,
    dir: PathBuf,
    /// Keys under this prefix are immutable and cached.
    prefix: String,
    limit: CacheLimit,
    /// What the directory holds, as far as this process knows: counted once, then kept up
    /// to date with what this process adds, and counted again whenever it passes the limit
    /// (other processes add copies too).
    held: Mutex<Option<u64>>,
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
            limit: CacheLimit::DEFAULT,
            held: Mutex::new(None),
        })
    }

    /// Hold at most `limit` bytes of copies.
    pub fn with_limit(mut self, limit: CacheLimit) -> Self {
        self.limit = limit;
        self
    }

    /// The bytes of copies in the cache's directory now (copies being written excluded).
    pub fn held_bytes(&self) -> u64 {
        self.copies().iter().map(|c| c.len).sum()
    }

    /// Every kept copy in the directory: not the `.part` files of copies being written.
    fn copies(&self) -> Vec<CachedCopy> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().ends_with(".part"))
            .filter_map(|e| {
                let meta = e.metadata().ok().filter(|m| m.is_file())?;
                Some(CachedCopy {
                    path: e.path(),
                    len: meta.len(),
                    used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                })
            })
            .collect()
    }

    /// Count a copy of `len` bytes just kept at `kept`, and make room if the cache is now
    /// over its limit: the copies used least recently go, never `kept` itself.
    fn kept(&self, kept: &Path, len: u64) {
        let CacheLimit::Bytes(max) = self.limit else {
            return;
        };
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let total = match *held {
            Some(total) => total + len,
            None => self.held_bytes(),
        };
        *held = Some(if total > max {
            self.trim(max - max / 10, kept)
        } else {
            total
        });
    }

    /// Remove the least recently used copies until at most `target` bytes remain (or only
    /// `keep` does). Answers the bytes left.
    fn trim(&self, target: u64, keep: &Path) -> u64 {
        let mut copies = self.copies();
        copies.sort_by_key(|c| c.used);
        let mut total: u64 = copies.iter().map(|c| c.len).sum();
        for c in copies {
            if total <= target {
                break;
            }
            if c.path == keep {
                continue;
            }
            match fs::remove_file(&c.path) {
                Ok(()) => total -= c.len,
                // Gone already: another process made room too.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => total -= c.len,
                Err(e) => {
                    tracing::debug!("segment cache: could not drop {}: {e}", c.path.display())
                }
            }
        }
        total
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
        match ok {
            Ok(()) => self.kept(path, data.len() as u64),
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                tracing::debug!("segment cache: could not keep {}: {e}", path.display());
            }
        }
    }

    /// The local copy of `key`, downloading it first if needed.
    fn local(&self, key: &str, path: &PathBuf) -> StoreResult<fs::File> {
        if let Ok(f) = fs::File::open(path) {
            mark_used(&f);
            return Ok(f);
        }
        let (data, _) = self.inner.get(key)?;
        self.store_local(path, &data);
        fs::File::open(path).map_err(|e| StoreError::io(key, e))
    }
}

/// A kept copy, as the directory lists it.
struct CachedCopy {
    path: PathBuf,
    len: u64,
    used: SystemTime,
}

/// Record a read of a copy in its modification time, at most once per [`TOUCH_AFTER`].
/// Best effort: a copy whose time cannot be moved only looks older than it is.
fn mark_used(f: &fs::File) {
    let now = SystemTime::now();
    let stale = f.metadata().and_then(|m| m.modified()).map_or(true, |t| {
        now.duration_since(t).unwrap_or_default() > TOUCH_AFTER
    });
    if stale {
        let _ = f.set_modified(now);
    }
}

fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Downloads a prefetch runs at once: enough to hide a remote store's latency behind
/// each other, few enough not to crowd the connection pool.
const PREFETCH_DOWNLOADS: usize = 8;

impl Backend for SegmentCache {
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)> {
        self.inner.get(key)
    }

    /// Segments not yet kept here are downloaded side by side, so the reads that follow
    /// are local: a scan of a branch scattered over many small segments waits for one
    /// round of downloads instead of one per segment. Failures are left to those reads.
    fn prefetch(&self, ranges: &[(String, Range<u64>)]) {
        let mut missing: Vec<(&str, PathBuf)> = Vec::new();
        for (key, _) in ranges {
            let Some(path) = self.cached(key) else {
                continue;
            };
            if !path.exists() && !missing.iter().any(|(k, _)| k == key) {
                missing.push((key, path));
            }
        }
        if missing.len() < 2 {
            return;
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..missing.len().min(PREFETCH_DOWNLOADS) {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((key, path)) = missing.get(i) else {
                        return;
                    };
                    if let Err(e) = self.local(key, path) {
                        tracing::debug!("segment cache: prefetching {key} failed: {e}");
                    }
                });
            }
        });
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

    fn local_cache(&self) -> Option<CacheUsage> {
        Some(CacheUsage {
            dir: self.dir.clone(),
            held_bytes: self.held_bytes(),
            limit: self.limit,
        })
    }
}
