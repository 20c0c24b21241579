use std::ops::Range;
use std::time::SystemTime;

use crate::StoreResult;

/// An opaque version tag for one state of one object. Two reads that return the same
/// etag saw the same bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ETag(pub String);

impl std::fmt::Display for ETag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a put treats an existing object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutMode {
    /// Fail with `AlreadyExists` if the key is taken (never replaces).
    Create,
    /// Replace only if the current object has exactly this etag; otherwise `Conflict`
    /// (also when the object is missing).
    Update(ETag),
    /// Unconditional write. Used only for objects no other writer can race on.
    Overwrite,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub key: String,
    pub size: u64,
    pub etag: ETag,
    /// The store's own clock at the last write (local: file mtime).
    pub last_modified: SystemTime,
}

/// The storage contract every scion backend implements.
///
/// Keys are validated alike by every backend (`/`-separated, no empty, `.` or `..`
/// segment). Objects are whole: a put is all or
/// nothing, and a get returns exactly what one put wrote.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Read a whole object and the etag of the state read.
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)>;

    /// Read `range` of an object. A range past the end is an error, never a short read.
    fn get_range(&self, key: &str, range: Range<u64>) -> StoreResult<Vec<u8>>;

    /// [`Backend::get_range`] into a buffer the caller keeps between reads: on success
    /// `out` holds exactly the range. Stores that read local files override it so a long
    /// series of reads (a materialization) neither allocates nor faults in fresh memory
    /// for each one; wrappers forward it.
    fn get_range_into(&self, key: &str, range: Range<u64>, out: &mut Vec<u8>) -> StoreResult<()> {
        *out = self.get_range(key, range)?;
        Ok(())
    }

    fn head(&self, key: &str) -> StoreResult<ObjectMeta>;

    /// Whether an object exists; cheaper than `head` where the etag costs a read.
    fn exists(&self, key: &str) -> StoreResult<bool>;

    fn put(&self, key: &str, data: &[u8], mode: PutMode) -> StoreResult<ETag>;

    /// Every object whose key starts with `prefix`, sorted by key.
    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>>;

    /// Remove an object. Deleting a missing key succeeds.
    fn delete(&self, key: &str) -> StoreResult<()>;

    /// Remove an object only if it is still in the state `etag` names.
    fn delete_if(&self, key: &str, etag: &ETag) -> StoreResult<()>;

    /// Remove many objects (missing ones are fine); batched where the store can.
    fn delete_many(&self, keys: &[String]) -> StoreResult<()>;

    /// A short human description ("local directory /x", "memory").
    fn describe(&self) -> String;

    /// The store's clock. Lease expiry, TTLs and GC ages are judged against it, not the
    /// caller's. Every wrapper must forward it: a wrapper that answered with its own clock
    /// would make stamps and ages disagree.
    fn now(&self) -> StoreResult<SystemTime>;

    /// Drop any local copy of `key`, so the next read fetches it from the store again:
    /// a reader found the copy damaged. A store without local copies does nothing; a
    /// wrapper forwards the call.
    fn evict(&self, key: &str) -> StoreResult<()>;

    /// A stamp of `key`'s state that costs no request: equal stamps taken before two reads
    /// prove nothing wrote `key` in between. `None` (the default) where the store cannot
    /// tell (a remote store, a write under way): read the object. Wrappers forward it.
    fn change_stamp(&self, _key: &str) -> Option<u64> {
        None
    }

    /// What a local cache of this store's objects holds, for a store read through one
    /// (`SegmentCache` answers; `None`, the default, elsewhere). Costs a directory listing.
    fn local_cache(&self) -> Option<crate::cache_limit::CacheUsage> {
        None
    }

    /// A hint that `ranges` are about to be read, one after another: a store that can
    /// start on them all at once does (local files ask the kernel to read them in), so
    /// scattered reads overlap instead of waiting on the disk one by one. Never fails and
    /// changes no result; the default does nothing. Wrappers forward it.
    fn prefetch(&self, _ranges: &[(String, Range<u64>)]) {}
}

impl<B: Backend + ?Sized> Backend for std::sync::Arc<B> {
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)> {
        (**self).get(key)
    }
    fn get_range(&self, key: &str, range: Range<u64>) -> StoreResult<Vec<u8>> {
        (**self).get_range(key, range)
    }
    fn get_range_into(&self, key: &str, range: Range<u64>, out: &mut Vec<u8>) -> StoreResult<()> {
        (**self).get_range_into(key, range, out)
    }
    fn head(&self, key: &str) -> StoreResult<ObjectMeta> {
        (**self).head(key)
    }
    fn exists(&self, key: &str) -> StoreResult<bool> {
        (**self).exists(key)
    }
    fn put(&self, key: &str, data: &[u8], mode: PutMode) -> StoreResult<ETag> {
        (**self).put(key, data, mode)
    }
    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        (**self).list(prefix)
    }
    fn delete(&self, key: &str) -> StoreResult<()> {
        (**self).delete(key)
    }
    fn delete_if(&self, key: &str, etag: &ETag) -> StoreResult<()> {
        (**self).delete_if(key, etag)
    }
    fn delete_many(&self, keys: &[String]) -> StoreResult<()> {
        (**self).delete_many(keys)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn now(&self) -> StoreResult<SystemTime> {
        (**self).now()
    }
    fn evict(&self, key: &str) -> StoreResult<()> {
        (**self).evict(key)
    }
    fn change_stamp(&self, key: &str) -> Option<u64> {
        (**self).change_stamp(key)
    }
    fn local_cache(&self) -> Option<crate::cache_limit::CacheUsage> {
        (**self).local_cache()
    }
    fn prefetch(&self, ranges: &[(String, Range<u64>)]) {
        (**self).prefetch(ranges)
    }
}

/// The etag both built-in backends use: a content hash, so equal etags mean equal bytes.
pub(crate) fn content_etag(data: &[u8]) -> ETag {
    ETag(format!("{:032x}", xxhash_rust::xxh3::xxh3_128(data)))
}

pub(crate) fn check_range(key: &str, range: &Range<u64>, size: u64) -> StoreResult<()> {
    if range.start > range.end || range.end > size {
        return Err(crate::StoreError::OutOfRange {
            key: key.to_string(),
            start: range.start,
            end: range.end,
            size,
        });
    }
    Ok(())
}

/// Read `range` of an open file: bounds checked, never a short read.
pub(crate) fn read_file_range(
    f: &mut std::fs::File,
    key: &str,
    range: Range<u64>,
) -> StoreResult<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let size = f
        .metadata()
        .map_err(|e| crate::StoreError::io(key, e))?
        .len();
    check_range(key, &range, size)?;
    // Read into spare capacity: zeroing a buffer the read overwrites anyway cost ~5 % of a
    // checkout's CPU time (runs are up to 4 MiB).
    let want = (range.end - range.start) as usize;
    let mut buf = Vec::with_capacity(want);
    f.seek(SeekFrom::Start(range.start))
        .and_then(|_| f.take(want as u64).read_to_end(&mut buf))
        .map_err(|e| crate::StoreError::io(key, e))?;
    if buf.len() != want {
        return Err(crate::StoreError::io(
            key,
            std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
        ));
    }
    Ok(buf)
}

#[cfg(feature = "cloud")]
/// `exists` through `head`, for backends where a head is already cheap.
pub(crate) fn exists_by_head(b: &dyn Backend, key: &str) -> StoreResult<bool> {
    match b.head(key) {
        Ok(_) => Ok(true),
        Err(crate::StoreError::NotFound { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `delete_many` as one delete per key, for backends without a batch request.
pub(crate) fn delete_each(b: &dyn Backend, keys: &[String]) -> StoreResult<()> {
    for k in keys {
        b.delete(k)?;
    }
    Ok(())
}
