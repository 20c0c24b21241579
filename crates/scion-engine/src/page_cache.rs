//! The process's cache of decoded, verified pages, shared by every engine, connection and
//! branch in it. A page is keyed by the store, the frame it was decoded from and its page
//! number; frames are immutable once written, so an entry is never stale and nothing is
//! ever invalidated. Forks share frames by construction, so a thousand forks of one seed
//! read its pages from one copy, decoded once.
//!
//! Only a frame that decoded and verified is kept: a damaged frame fails every read of it
//! until a good copy is fetched. Readers that ask for a page another thread is decoding
//! wait for that decode instead of repeating it. Eviction is `quick_cache`'s S3-FIFO
//! policy, which a one-pass scan does not flush.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use quick_cache::sync::{Cache, DefaultLifecycle, GuardResult, PlaceholderGuard};
use quick_cache::{DefaultHashBuilder, Weighter};

use crate::format::Locator;

/// The bound when `SCION_PAGE_CACHE` does not set one.
pub(crate) const DEFAULT_PAGE_CACHE_BYTES: u64 = 256 << 20;

/// What an entry costs beyond its page bytes (key, hash, `Arc` header, slot).
const ENTRY_OVERHEAD: u64 = 96;

/// A decoded page and its content hash.
pub(crate) type CachedPage = (Arc<[u8]>, u64);

/// (store, frame, page number): the frame alone names the bytes within a store; the page
/// number is the key its checksum was verified under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PageKey {
    pub store: u64,
    pub frame: Locator,
    pub pgno: u32,
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PageWeight;

impl Weighter<PageKey, CachedPage> for PageWeight {
    fn weight(&self, _key: &PageKey, page: &CachedPage) -> u64 {
        page.0.len() as u64 + ENTRY_OVERHEAD
    }
}

type Pages = Cache<PageKey, CachedPage, PageWeight>;
type Guard<'a> = PlaceholderGuard<
    'a,
    PageKey,
    CachedPage,
    PageWeight,
    DefaultHashBuilder,
    DefaultLifecycle<PageKey, CachedPage>,
>;

/// The cache of decoded pages this process keeps ([`PageCache::process`]).
pub struct PageCache {
    pages: Pages,
    hits: AtomicU64,
    decodes: AtomicU64,
    waits: AtomicU64,
}

/// A moment's figures of the page cache, for `--stats` and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PageCacheStats {
    /// The bound, in bytes (0: pages are not kept).
    pub capacity_bytes: u64,
    /// What the kept pages weigh now (page bytes and per-entry overhead).
    pub used_bytes: u64,
    /// Pages kept.
    pub pages: u64,
    /// Reads served from the cache.
    pub hits: u64,
    /// Pages decoded from their frames (the misses).
    pub decodes: u64,
    /// Reads that waited for another thread's decode of the same page.
    pub waits: u64,
}

impl PageCacheStats {
    /// Hits over all reads, 0 when nothing was read.
    pub fn hit_rate(&self) -> f64 {
        let reads = self.hits + self.decodes;
        if reads == 0 {
            0.0
        } else {
            self.hits as f64 / reads as f64
        }
    }
}

/// What a lookup of a page found.
pub(crate) enum Lookup<'a> {
    Hit(CachedPage),
    /// Nobody has it: the caller decodes it and hands it to the guard (dropping the guard
    /// unfilled, on failure, lets a waiting reader try for itself). No guard when the
    /// cache is off.
    Miss(Option<Guard<'a>>),
    /// Another thread is decoding it: `wait` for it after finishing one's own decodes.
    Busy,
}

impl PageCache {
    /// A cache bounded at `capacity_bytes` (0 keeps nothing).
    pub fn new(capacity_bytes: u64) -> Self {
        // quick_cache sizes its tables from an item estimate; 4 KiB pages are the common case.
        let estimate = (capacity_bytes / (4096 + ENTRY_OVERHEAD)).clamp(16, 1 << 22) as usize;
        Self {
            pages: Cache::with_weighter(estimate, capacity_bytes, PageWeight),
            hits: AtomicU64::new(0),
            decodes: AtomicU64::new(0),
            waits: AtomicU64::new(0),
        }
    }

    /// The process's cache, bounded by `SCION_PAGE_CACHE` (a size such as `512MiB`; `0`
    /// turns it off) or 256 MiB.
    pub fn process() -> &'static PageCache {
        static CACHE: OnceLock<PageCache> = OnceLock::new();
        CACHE.get_or_init(|| PageCache::new(capacity_from_env()))
    }

    /// Drop every kept page (what a benchmark's cold read starts from); the counters stay.
    pub fn clear(&self) {
        self.pages.clear();
    }

    /// What the cache holds and how it has served.
    pub fn stats(&self) -> PageCacheStats {
        PageCacheStats {
            capacity_bytes: self.pages.capacity(),
            used_bytes: self.pages.weight(),
            pages: self.pages.len() as u64,
            hits: self.hits.load(Ordering::Relaxed),
            decodes: self.decodes.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
        }
    }

    fn enabled(&self) -> bool {
        self.pages.capacity() > 0
    }

    /// Look `key` up without blocking.
    pub(crate) fn lookup(&self, key: &PageKey) -> Lookup<'_> {
        if !self.enabled() {
            return Lookup::Miss(None);
        }
        match self.pages.get_value_or_guard(key, Some(Duration::ZERO)) {
            GuardResult::Value(v) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Lookup::Hit(v)
            }
            GuardResult::Guard(g) => Lookup::Miss(Some(g)),
            GuardResult::Timeout => Lookup::Busy,
        }
    }

    /// The page at `key` once another thread's decode of it ends, or a guard to decode it
    /// when that decode failed.
    pub(crate) fn wait(&self, key: &PageKey) -> Result<CachedPage, Option<Guard<'_>>> {
        match self.pages.get_value_or_guard(key, None) {
            GuardResult::Value(v) => {
                self.waits.fetch_add(1, Ordering::Relaxed);
                self.hits.fetch_add(1, Ordering::Relaxed);
                Ok(v)
            }
            GuardResult::Guard(g) => Err(Some(g)),
            GuardResult::Timeout => Err(None),
        }
    }

    /// Keep a page just decoded from its frame, through the guard its lookup gave.
    pub(crate) fn decoded(&self, guard: Option<Guard<'_>>, page: &CachedPage) {
        self.decodes.fetch_add(1, Ordering::Relaxed);
        if let Some(g) = guard {
            // Refused only when the entry alone outweighs its shard: the page is served
            // all the same, just not kept.
            let _ = g.insert(page.clone());
        }
    }
}

impl std::fmt::Debug for PageCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PageCache").field(&self.stats()).finish()
    }
}

fn capacity_from_env() -> u64 {
    match std::env::var("SCION_PAGE_CACHE") {
        Ok(v) => match scion_store::units::parse_size(&v) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!("SCION_PAGE_CACHE={v:?} is not a size ({e}); using the default");
                DEFAULT_PAGE_CACHE_BYTES
            }
        },
        Err(_) => DEFAULT_PAGE_CACHE_BYTES,
    }
}

/// The store tag of a page key: the store's id, hashed (two attachments of one store share
/// pages; two stores never do).
pub(crate) fn store_tag(store_id: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same id gives the same tag in every engine.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    store_id.hash(&mut h);
    h.finish()
}
