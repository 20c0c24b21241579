//! Refs (`refs/{db}/{branch}`) and checkpoints (`checkpoints/{db}/{branch}/{name}`): the
//! small JSON objects that name versions. A ref changes only by compare-and-swap.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clock::StoreTime;
use crate::error::{EngineError, EngineResult};
use crate::format::Locator;
use crate::history::HeadEntry;
use crate::names::{BranchName, BranchRef, CheckpointName, DbName, Owner};
pub use crate::objects::Parent;
pub(crate) use crate::objects::{decode_versioned, locator_text, random_hex};

/// Ref schema 2 adds `nonce` and the typed `safety` mark (schema 1 kept the mark as the
/// meta entry `scion.safety`; it is read into `safety`). Schema 3 adds the head history
/// (`history`, `history_before`): a binary that does not know it would drop it on its
/// next write, so it must refuse the ref instead. Schema 4 adds `checkouts` (the branch's
/// writable checkouts, which keep page writers out); a ref without any is still written as
/// schema 3, so a binary that knows 3 keeps reading every branch nobody has checked out.
/// Schema 5 adds `merge` entries to the history; a ref whose inline history has none is
/// written as 4 (or 3), so older binaries keep reading every branch no merge moved lately.
/// Schema 6 adds `push` and `fetch` entries, written only while the inline history holds one.
pub const REF_SCHEMA: u32 = 6;
/// The schema a ref with merge entries and no push or fetch entries is written with.
const REF_SCHEMA_WITHOUT_TRANSFERS: u32 = 5;
/// The schema a ref with checkouts and no merge entries is written with.
const REF_SCHEMA_WITHOUT_MERGES: u32 = 4;
/// The schema a ref without checkouts or merge entries is written with.
const REF_SCHEMA_WITHOUT_CHECKOUTS: u32 = 3;
/// Checkpoint schema 1; `nonce` is an optional field older readers ignore.
pub(crate) const CHECKPOINT_SCHEMA: u32 = 1;

/// A random tag that makes every ref, lease and checkpoint write unique, so a writer whose
/// answer was lost can tell its own write from another writer's by re-reading the object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Nonce(String);

impl Nonce {
    /// A new random nonce.
    pub fn fresh() -> Self {
        Nonce(random_hex(8))
    }

    /// Whether no nonce was drawn (an object written before nonces).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Why a branch is a safety fork: the head another branch had before a rollback or a
/// promote replaced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SafetyKind {
    /// Kept by a rollback.
    PreRollback,
    /// Kept by a promote onto the branch.
    PrePromote,
}

impl SafetyKind {
    /// The suffix of the safety fork's branch name.
    pub fn suffix(self) -> &'static str {
        match self {
            SafetyKind::PreRollback => "pre-rollback",
            SafetyKind::PrePromote => "pre-promote",
        }
    }
}

/// The mark on a safety fork: which operation kept it, for which branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SafetyMark {
    /// The operation that kept the replaced head.
    pub kind: SafetyKind,
    /// The branch whose head it was.
    pub of: String,
}

/// `pre-rollback of main`: how people read the mark (and how schema 1 stored it).
impl std::fmt::Display for SafetyMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {}", self.kind.suffix(), self.of)
    }
}

/// A branch: its head version, where it came from, and what guards it (lease, protection,
/// TTL, checkouts). Stored as JSON at `refs/{db}/{branch}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ref {
    /// The ref's schema number (see [`REF_SCHEMA`]).
    pub schema: u32,
    /// Root record of the head version.
    #[serde(with = "locator_text")]
    pub root: Locator,
    /// Number of the head version on this branch; every commit adds one.
    pub version: u64,
    /// The head version's page size in bytes.
    pub page_size: u32,
    /// The head version's number of pages.
    pub page_count: u32,
    /// Version the branch was forked at (the reserved checkpoint `fork`).
    #[serde(with = "locator_text")]
    pub fork_root: Locator,
    /// The number `fork_root` had on the branch it was forked from.
    pub fork_version: u64,
    /// Version `create` made (the reserved checkpoint `init`).
    #[serde(with = "locator_text")]
    pub init_root: Locator,
    /// The branch and version this one was forked from (none for a database's first
    /// branch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Parent>,
    /// Head moves and destroy need force.
    #[serde(default)]
    pub protected: bool,
    /// When the branch was made (store clock).
    pub created_at: StoreTime,
    /// Last commit or touch; a TTL counts from here.
    pub touched_at: StoreTime,
    /// Writer generation: every lease acquisition adds one, fencing earlier holders.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub epoch: u64,
    /// The holder allowed to move the head, while its lease lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// Seconds of inactivity after which `gc` may reap the branch (never if protected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_secs: Option<u64>,
    /// Set by `destroy` before anything irreversible: the branch is going away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destroying_since: Option<StoreTime>,
    /// Set on safety forks only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety: Option<SafetyMark>,
    /// The user's entries (`scion.` keys are reserved).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, String>,
    /// The newest moves of the head, oldest first (see [`crate::history`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HeadEntry>,
    /// The history object holding the moves before `history`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_before: Option<String>,
    /// The writable checkout files of this branch, on any host. While there is one the
    /// branch is written through its file (and checkpointed from it), never by page writers
    /// such as the VFS: one way of writing a branch at a time, across hosts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkouts: Vec<CheckoutClaim>,
    /// Drawn afresh by every write of this ref.
    #[serde(default, skip_serializing_if = "Nonce::is_empty")]
    pub nonce: Nonce,
}

/// The exclusive, expiring right to move a branch's head.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Lease {
    /// Who holds it: a process (`host:boot:pidns/pid`) or a part of one (`...#session`).
    pub holder: String,
    /// The ref's epoch when it was taken: a commit under an older one is fenced.
    pub epoch: u64,
    /// Judged against the store's clock.
    pub expires: StoreTime,
}

/// A writable checkout of a branch: the file at `path` on the host named `host`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckoutClaim {
    /// The host the file is on.
    pub host: String,
    /// The file's path on that host.
    pub path: String,
    /// When the file was first checked out (store clock).
    pub since: StoreTime,
}

impl CheckoutClaim {
    /// The same file: one host, one path.
    pub(crate) fn is_same_file(&self, host: &str, path: &str) -> bool {
        self.host == host && self.path == path
    }
}

/// `host:path`, as messages name a checkout.
impl std::fmt::Display for CheckoutClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.path)
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Meta keys under this prefix are scion's own (capture cursor, safety mark): users may not
/// set them, and listings of a branch's meta leave them out.
pub(crate) const RESERVED_META_PREFIX: &str = "scion.";

/// What users may attach to a branch or checkpoint: short keys, values of a few KiB, and
/// little enough in all that a ref stays one small object.
pub(crate) fn check_user_meta(meta: &BTreeMap<String, String>) -> EngineResult<()> {
    const MAX_KEY: usize = 128;
    const MAX_VALUE: usize = 4096;
    const MAX_TOTAL: usize = 16 * 1024;
    let invalid = |reason: String| Err(EngineError::InvalidInput { reason });
    let mut total = 0;
    for (k, v) in meta {
        if k.is_empty() || k.len() > MAX_KEY || k.chars().any(char::is_control) {
            return invalid(format!(
                "meta key {k:?}: keys are 1-{MAX_KEY} characters, none of them control characters"
            ));
        }
        if k.starts_with(RESERVED_META_PREFIX) {
            return invalid(format!(
                "meta key {k:?}: keys starting with {RESERVED_META_PREFIX:?} are scion's own"
            ));
        }
        if v.len() > MAX_VALUE {
            return invalid(format!("meta value of {k:?}: at most {MAX_VALUE} bytes"));
        }
        total += k.len() + v.len();
    }
    if total > MAX_TOTAL {
        return invalid(format!("meta: at most {MAX_TOTAL} bytes in all"));
    }
    Ok(())
}

/// The entries of `meta` users set (scion's own left out).
pub fn user_meta(meta: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    meta.iter()
        .filter(|(k, _)| !k.starts_with(RESERVED_META_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The ref meta key that marks an ephemeral branch: in `meta`, like the owner, so every
/// binary that reads the ref schema carries it over.
const EPHEMERAL_META: &str = "scion.ephemeral";

/// What a destroy record keeps of a ref's meta, so that a restored branch has it again:
/// the user's entries and the branch's owner.
pub(crate) fn kept_meta(r: &Ref) -> BTreeMap<String, String> {
    let mut kept = user_meta(&r.meta);
    if let Some(o) = r.meta.get(Owner::META_KEY) {
        kept.insert(Owner::META_KEY.to_string(), o.clone());
    }
    kept
}

/// Schema 1's meta key for the safety mark.
const SAFETY_META_V1: &str = "scion.safety";

/// A named version of a branch, stored at `checkpoints/{db}/{branch}/{name}` and never
/// changed once written.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Checkpoint {
    /// The checkpoint's schema number.
    pub schema: u32,
    /// The version's root record.
    #[serde(with = "locator_text")]
    pub root: Locator,
    /// The version's number on its branch.
    pub version: u64,
    /// When the name was bound (store clock).
    pub created_at: StoreTime,
    /// The user's entries (who made it and why).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, String>,
    /// Drawn afresh when the checkpoint is written.
    #[serde(default, skip_serializing_if = "Nonce::is_empty")]
    pub nonce: Nonce,
}

impl Ref {
    /// Who made the branch, when a front end with owners made it.
    pub fn owner(&self) -> Option<Owner> {
        self.meta
            .get(Owner::META_KEY)
            .and_then(|o| Owner::new(o).ok())
    }

    /// A branch made for one test or attempt, whose history goes with it (see
    /// [`crate::ForkOptions::ephemeral`]).
    pub fn is_ephemeral(&self) -> bool {
        self.meta.get(EPHEMERAL_META).is_some_and(|v| v == "true")
    }

    pub(crate) fn set_ephemeral(&mut self, ephemeral: bool) {
        if ephemeral {
            self.meta
                .insert(EPHEMERAL_META.to_string(), "true".to_string());
        } else {
            self.meta.remove(EPHEMERAL_META);
        }
    }

    pub(crate) fn set_owner(&mut self, owner: Option<&Owner>) {
        match owner {
            Some(o) => self.meta.insert(Owner::META_KEY.to_string(), o.to_string()),
            None => self.meta.remove(Owner::META_KEY),
        };
    }

    /// Read a ref (or checkpoint) stored at `key`, refusing a schema newer than this scion
    /// reads.
    pub fn decode(bytes: &[u8], key: &str) -> EngineResult<Self> {
        let mut r: Ref = decode_versioned(bytes, key, REF_SCHEMA)?;
        if let Some(mark) = r.meta.remove(SAFETY_META_V1) {
            r.safety = parse_v1_safety_mark(&mark);
        }
        r.schema = REF_SCHEMA;
        Ok(r)
    }

    /// The bytes of this ref as it will be written: a fresh nonce makes them unique.
    pub(crate) fn encode_fresh(&mut self) -> Vec<u8> {
        self.nonce = Nonce::fresh();
        self.encode()
    }

    /// The JSON this object is stored as.
    pub fn encode(&self) -> Vec<u8> {
        let mut written = std::borrow::Cow::Borrowed(self);
        use crate::history::{entry_kinds, EntryKinds};
        if self.schema == REF_SCHEMA {
            written.to_mut().schema = match entry_kinds(&self.history) {
                EntryKinds::Transfers => REF_SCHEMA,
                EntryKinds::Merges => REF_SCHEMA_WITHOUT_TRANSFERS,
                EntryKinds::Plain if self.checkouts.is_empty() => REF_SCHEMA_WITHOUT_CHECKOUTS,
                EntryKinds::Plain => REF_SCHEMA_WITHOUT_MERGES,
            };
        }
        serde_json::to_vec(written.as_ref()).expect("refs always serialize")
    }

    /// Whether `self` and `other` name the same head, held under the same lease epoch by
    /// the same holder: what a commit based on `other` may still publish over.
    pub(crate) fn same_head(&self, other: &Ref) -> bool {
        self.root == other.root
            && self.version == other.version
            && self.epoch == other.epoch
            && self.lease.as_ref().map(|l| &l.holder) == other.lease.as_ref().map(|l| &l.holder)
            && self.destroying_since.is_none()
    }
}

/// `"pre-rollback of main"` -> the typed mark (the inverse of its `Display`).
fn parse_v1_safety_mark(s: &str) -> Option<SafetyMark> {
    let (kind, of) = s.split_once(" of ")?;
    let kind = [SafetyKind::PreRollback, SafetyKind::PrePromote]
        .into_iter()
        .find(|k| k.suffix() == kind)?;
    Some(SafetyMark {
        kind,
        of: of.to_string(),
    })
}

impl Checkpoint {
    /// Read a ref (or checkpoint) stored at `key`, refusing a schema newer than this scion
    /// reads.
    pub fn decode(bytes: &[u8], key: &str) -> EngineResult<Self> {
        decode_versioned(bytes, key, CHECKPOINT_SCHEMA)
    }

    pub(crate) fn encode_fresh(&mut self) -> Vec<u8> {
        self.nonce = Nonce::fresh();
        serde_json::to_vec(self).expect("checkpoints always serialize")
    }
}

/// The store key of `b`'s ref.
pub fn ref_key(b: &BranchRef) -> String {
    format!("refs/{}/{}", b.db, b.branch)
}

pub(crate) fn refs_prefix(db: &DbName) -> String {
    format!("refs/{db}/")
}

pub(crate) fn checkpoint_key(b: &BranchRef, name: &CheckpointName) -> String {
    format!("{}{name}", checkpoints_prefix(b))
}

pub(crate) fn checkpoints_prefix(b: &BranchRef) -> String {
    format!("{}{}/", database_checkpoints_prefix(&b.db), b.branch)
}

pub(crate) fn database_checkpoints_prefix(db: &DbName) -> String {
    format!("checkpoints/{db}/")
}

/// The branch a key under `checkpoints/{db}/` belongs to (names hold no '/', so the first
/// part after the prefix is the branch, the rest the checkpoint).
pub(crate) fn branch_of_checkpoint_key(db: &DbName, key: &str) -> Option<BranchName> {
    let rest = key.strip_prefix(&database_checkpoints_prefix(db))?;
    let (branch, checkpoint) = rest.split_once('/')?;
    CheckpointName::new(checkpoint).ok()?;
    branch.parse().ok()
}

/// The branch name at the end of a ref key under `refs/{db}/`.
pub(crate) fn branch_from_key(db: &DbName, key: &str) -> Option<BranchName> {
    key.strip_prefix(&refs_prefix(db))?.parse().ok()
}
