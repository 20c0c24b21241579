//! Pieces the store's JSON objects share (refs, checkpoints, head-history objects): decoding
//! under a schema version, locators written as text, random nonces, and where a branch
//! came from.

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, EngineResult};

/// `bytes` random bytes from the OS, as lowercase hex.
pub(crate) fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    getrandom::fill(&mut b).expect("the OS random source is available");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Decode a JSON object whose `schema` must not be newer than `supported`.
pub(crate) fn decode_versioned<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    key: &str,
    supported: u32,
) -> EngineResult<T> {
    let probe: SchemaProbe =
        serde_json::from_slice(bytes).map_err(|e| EngineError::corrupt(key, e.to_string()))?;
    if probe.schema > supported {
        return Err(EngineError::FormatTooNew {
            what: key.to_string(),
            found: probe.schema,
            supported,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| EngineError::corrupt(key, e.to_string()))
}

#[derive(Deserialize)]
struct SchemaProbe {
    schema: u32,
}

/// Where a branch came from, for people. Never followed on a read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Parent {
    /// The branch forked from (its name, within the same database).
    pub branch: String,
    /// The version's number there.
    pub version: u64,
    /// The checkpoint it was forked at, if it was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
}

pub(crate) mod locator_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::format::Locator;

    pub fn serialize<S: Serializer>(l: &Locator, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(l)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Locator, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
