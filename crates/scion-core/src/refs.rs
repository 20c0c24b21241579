//! Refs (`refs/{db}/{branch}`) and checkpoints (`checkpoints/{db}/{branch}/{name}`): the
//! small JSON objects that name versions. A ref changes only by compare-and-swap.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{CoreError, CoreResult};
use crate::format::Locator;
use crate::names::{BranchName, BranchRef, CheckpointName, DbName};

pub const REF_SCHEMA: u32 = 1;
pub const CHECKPOINT_SCHEMA: u32 = 1;

/// Where a branch came from, for people. Never followed on a read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Parent {
    pub branch: String,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ref {
    pub schema: u32,
    /// Root record of the head version.
    #[serde(with = "locator_text")]
    pub root: Locator,
    /// Number of the head version on this branch; every commit adds one.
    pub version: u64,
    pub page_size: u32,
    pub page_count: u32,
    /// Version the branch was forked at (the reserved checkpoint `fork`).
    #[serde(with = "locator_text")]
    pub fork_root: Locator,
    pub fork_version: u64,
    /// Version `create` made (the reserved checkpoint `init`).
    #[serde(with = "locator_text")]
    pub init_root: Locator,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Parent>,
    #[serde(default)]
    pub protected: bool,
    pub created_at: String,
    /// Last commit or touch; a TTL counts from here.
    pub touched_at: String,
    /// Writer generation: every lease acquisition adds one, fencing earlier holders.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub epoch: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// Seconds of inactivity after which `gc` may reap the branch (never if protected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_secs: Option<u64>,
    /// Set by `destroy` before anything irreversible: the branch is going away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destroying_since: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, String>,
}

/// The exclusive, expiring right to move a branch's head.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Lease {
    pub holder: String,
    pub epoch: u64,
    /// RFC 3339, judged against the store's clock.
    pub expires: String,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Meta key on safety forks: which operation kept them and for which branch.
pub const SAFETY_META: &str = "scion.safety";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Checkpoint {
    pub schema: u32,
    #[serde(with = "locator_text")]
    pub root: Locator,
    pub version: u64,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, String>,
}

impl Ref {
    pub fn decode(bytes: &[u8], key: &str) -> CoreResult<Self> {
        decode_versioned(bytes, key, REF_SCHEMA)
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("refs always serialize")
    }
}

impl Checkpoint {
    pub fn decode(bytes: &[u8], key: &str) -> CoreResult<Self> {
        decode_versioned(bytes, key, CHECKPOINT_SCHEMA)
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("checkpoints always serialize")
    }
}

/// Decode a JSON object whose `schema` must not be newer than `supported`.
fn decode_versioned<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    key: &str,
    supported: u32,
) -> CoreResult<T> {
    let probe: SchemaProbe =
        serde_json::from_slice(bytes).map_err(|e| CoreError::corrupt(key, e.to_string()))?;
    if probe.schema > supported {
        return Err(CoreError::FormatTooNew {
            what: key.to_string(),
            found: probe.schema,
            supported,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| CoreError::corrupt(key, e.to_string()))
}

#[derive(Deserialize)]
struct SchemaProbe {
    schema: u32,
}

pub fn ref_key(b: &BranchRef) -> String {
    format!("refs/{}/{}", b.db, b.branch)
}

pub fn refs_prefix(db: &DbName) -> String {
    format!("refs/{db}/")
}

pub fn checkpoint_key(b: &BranchRef, name: &CheckpointName) -> String {
    format!("checkpoints/{}/{}/{}", b.db, b.branch, name)
}

pub fn checkpoints_prefix(b: &BranchRef) -> String {
    format!("checkpoints/{}/{}/", b.db, b.branch)
}

/// The branch name at the end of a ref key under `refs/{db}/`.
pub fn branch_from_key(db: &DbName, key: &str) -> Option<BranchName> {
    key.strip_prefix(&refs_prefix(db))?.parse().ok()
}

mod locator_text {
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
