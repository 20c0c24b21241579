//! `scion.json`: the store manifest, written once by `init`.

use serde::{Deserialize, Serialize};

use crate::error::{CoreError, CoreResult};

pub const MANIFEST_KEY: &str = "scion.json";
/// The store layout this binary writes and the newest it reads.
pub const STORE_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub format: u32,
    pub store_id: String,
    pub created_at: String,
}

impl Manifest {
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
