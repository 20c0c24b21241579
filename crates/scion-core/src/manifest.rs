//! `scion.json`: the store manifest, written once by `init`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{CoreError, CoreResult};

pub const MANIFEST_KEY: &str = "scion.json";
/// The store layout this binary writes and the newest it reads.
pub const STORE_FORMAT_VERSION: u32 = 1;

/// The minimum GC grace of a store whose manifest names none.
pub const DEFAULT_MIN_GRACE: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub format: u32,
    pub store_id: String,
    pub created_at: String,
    /// `gc` refuses a shorter grace without `force`; a commit that takes longer than half
    /// of it re-checks its segments before it publishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_grace_secs: Option<u64>,
}

impl Manifest {
    pub fn min_grace(&self) -> Duration {
        self.min_grace_secs
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_MIN_GRACE)
            .min(crate::clock::MAX_DURATION)
    }

    pub fn decode(bytes: &[u8], location: &str) -> CoreResult<Self> {
        let m: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| CoreError::corrupt(MANIFEST_KEY, format!("{location}: {e}")))?;
        if m.format > STORE_FORMAT_VERSION {
            return Err(CoreError::FormatTooNew {
                what: format!("store {location}"),
                found: m.format,
                supported: STORE_FORMAT_VERSION,
            });
        }
        Ok(m)
    }
}
