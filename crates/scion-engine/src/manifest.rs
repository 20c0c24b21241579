//! `scion.json`: the store manifest, written by `init`; afterwards only its page compression
//! and history retention change (`Scion::set_page_compression`,
//! `Scion::set_history_retention`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, EngineResult};
use crate::format::PageCompression;
use crate::history::DEFAULT_HISTORY_RETENTION;

pub(crate) const MANIFEST_KEY: &str = "scion.json";
/// The store layout this binary writes and the newest it reads.
pub(crate) const STORE_FORMAT_VERSION: u32 = 1;

/// The minimum GC grace of a store whose manifest names none.
pub const DEFAULT_MIN_GRACE: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub format: u32,
    pub store_id: String,
    pub created_at: String,
    /// `gc` refuses a shorter grace without `force`; a commit that takes longer than half
    /// of it re-checks its segments before it publishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_grace_secs: Option<u64>,
    /// How new full page frames are stored; a manifest without it means lz4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_compression: Option<PageCompression>,
    /// How long `gc` keeps every head the head history names; a manifest without it means
    /// [`DEFAULT_HISTORY_RETENTION`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_retention_secs: Option<u64>,
    /// Other stores this one pushes to and pulls from: remote name -> store location.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub remotes: std::collections::BTreeMap<String, String>,
    /// Keys a newer binary wrote that this one does not know: kept as they were, so a
    /// settings change made here does not drop a setting made there.
    #[serde(flatten)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// What `init` records in a new store's manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreSettings {
    /// `gc` refuses a shorter grace without `force`.
    pub min_grace: Duration,
    /// How new full page frames are stored.
    pub page_compression: PageCompression,
    /// How long `gc` keeps every head the head history names.
    pub history_retention: Duration,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            min_grace: DEFAULT_MIN_GRACE,
            page_compression: PageCompression::default(),
            history_retention: DEFAULT_HISTORY_RETENTION,
        }
    }
}

impl Manifest {
    pub fn min_grace(&self) -> Duration {
        self.min_grace_secs
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_MIN_GRACE)
            .min(crate::clock::MAX_DURATION)
    }

    pub fn page_compression(&self) -> PageCompression {
        self.page_compression.unwrap_or_default()
    }

    pub fn history_retention(&self) -> Duration {
        self.history_retention_secs
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_HISTORY_RETENTION)
            .min(crate::clock::MAX_DURATION)
    }

    pub fn decode(bytes: &[u8], location: &str) -> EngineResult<Self> {
        let m: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| EngineError::corrupt(MANIFEST_KEY, format!("{location}: {e}")))?;
        if m.format > STORE_FORMAT_VERSION {
            return Err(EngineError::FormatTooNew {
                what: format!("store {location}"),
                found: m.format,
                supported: STORE_FORMAT_VERSION,
            });
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_compression_is_lz4_when_the_manifest_names_none() {
        let old = br#"{"format":1,"store_id":"ab","created_at":"2026-01-01T00:00:00.000Z"}"#;
        let m = Manifest::decode(old, "here").unwrap();
        assert_eq!(m.page_compression(), PageCompression::Lz4);
        let raw = br#"{"format":1,"store_id":"ab","created_at":"x","page_compression":"none"}"#;
        let m = Manifest::decode(raw, "here").unwrap();
        assert_eq!(m.page_compression(), PageCompression::Uncompressed);
        let written = serde_json::to_string(&m).unwrap();
        assert!(
            written.contains(r#""page_compression":"none""#),
            "{written}"
        );
    }

    #[test]
    fn keys_a_newer_binary_wrote_are_written_back_as_they_were() {
        let raw = br#"{"format":1,"store_id":"ab","created_at":"x","page_compression":"none","sync":{"mode":"mirror","every":5}}"#;
        let mut m = Manifest::decode(raw, "here").unwrap();
        m.page_compression = Some(PageCompression::Lz4);
        let written: serde_json::Value = serde_json::to_value(&m).unwrap();
        assert_eq!(
            written["sync"],
            serde_json::json!({"mode": "mirror", "every": 5})
        );
        assert_eq!(written["page_compression"], "lz4");
        let known = br#"{"format":1,"store_id":"ab","created_at":"x"}"#;
        let m = Manifest::decode(known, "here").unwrap();
        assert_eq!(serde_json::to_vec(&m).unwrap(), known.to_vec());
    }

    #[test]
    fn an_unknown_page_compression_is_refused_by_name() {
        let m = br#"{"format":1,"store_id":"ab","created_at":"x","page_compression":"zstd"}"#;
        let e = Manifest::decode(m, "here").unwrap_err().to_string();
        assert!(e.contains("zstd"), "{e}");
    }
}
