//! What a segment cache may hold ([`CacheLimit`]) and holds ([`CacheUsage`]): the
//! answer of [`crate::Backend::local_cache`], apart from the cache that gives it.

use std::path::PathBuf;

use crate::{StoreError, StoreResult};

/// How many bytes of copies a [`crate::SegmentCache`] may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheLimit {
    Unbounded,
    Bytes(u64),
}

impl CacheLimit {
    /// 10 GiB: room for the working set of a few large databases.
    pub const DEFAULT: CacheLimit = CacheLimit::Bytes(10 << 30);

    /// `SCION_SEGMENT_CACHE_MAX`, or the default when it is unset or empty.
    pub fn from_env() -> StoreResult<Self> {
        match std::env::var("SCION_SEGMENT_CACHE_MAX") {
            Ok(v) if !v.trim().is_empty() => v
                .parse()
                .map_err(|e| StoreError::Config(format!("SCION_SEGMENT_CACHE_MAX: {e}"))),
            _ => Ok(Self::DEFAULT),
        }
    }
}

impl std::str::FromStr for CacheLimit {
    type Err = String;

    /// A size in bytes with an optional unit (`500MiB`, `10GiB`, `2TiB`, also `KiB`), or
    /// `unlimited`.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("unlimited") {
            return Ok(CacheLimit::Unbounded);
        }
        crate::units::parse_size(s)
            .map(CacheLimit::Bytes)
            .map_err(|e| format!("{e}, or \"unlimited\""))
    }
}

/// What a [`crate::SegmentCache`] holds now, and may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheUsage {
    pub dir: PathBuf,
    pub held_bytes: u64,
    pub limit: CacheLimit,
}
