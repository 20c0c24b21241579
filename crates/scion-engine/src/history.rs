//! The head history of a branch: every move of its head (commit, rollback, promote,
//! compact, undo, restore, destroy) as an entry with the head before and after, the
//! operation, the store's clock and the holder, in the manner of git's reflog and jj's
//! operation log.
//!
//! The newest entries travel inside the ref, so recording one costs no store write of its
//! own. When a ref holds more than [`INLINE_MAX`] entries, the ref update that adds one
//! first writes the older entries, all but `INLINE_KEEP`, into an immutable history
//! object (`history/{db}/{branch}/{newest ms}-{last seq}-{nonce}`, create-only), and the
//! ref names it; each object names the one before it. Destroying a branch writes its last
//! entries and a `destroy` entry into one more object, so a destroyed branch can be
//! restored by name. `gc` keeps every version an entry younger than the store's history
//! retention names, and deletes history objects whose newest entry is older.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::StoreTime;
use crate::error::{EngineError, EngineResult};
use crate::format::Locator;
use crate::names::{BranchName, BranchRef, DbName};
use crate::objects::{random_hex, Parent};

/// The newest history object schema this binary reads. Schema 2 adds `merge` entries
/// (with `merged`), schema 3 `push` and `fetch` entries; an object is written with the
/// lowest schema that holds its entries, so older binaries read every object they can.
pub const HISTORY_SCHEMA: u32 = 3;
/// The schema an object with merge entries and no transfers is written with.
const HISTORY_SCHEMA_WITHOUT_TRANSFERS: u32 = 2;
/// The schema an object without merge entries is written with.
const HISTORY_SCHEMA_WITHOUT_MERGES: u32 = 1;

/// The newest kind of entry among `entries`, which decides who can read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum EntryKinds {
    /// Only the moves every binary since schema 3 refs knows.
    Plain,
    /// Merges too.
    Merges,
    /// Pushes or fetches too.
    Transfers,
}

pub(crate) fn entry_kinds(entries: &[HeadEntry]) -> EntryKinds {
    entries
        .iter()
        .map(|e| match e.op {
            HeadOp::Push | HeadOp::Fetch => EntryKinds::Transfers,
            HeadOp::Merge => EntryKinds::Merges,
            _ => EntryKinds::Plain,
        })
        .max()
        .unwrap_or(EntryKinds::Plain)
}
/// A ref carries at most this many entries before older ones spill into an object.
pub const INLINE_MAX: usize = 16;
/// Entries left in the ref after a spill.
pub(crate) const INLINE_KEEP: usize = 4;
/// How long a head named by the history is kept from `gc`, unless the store says otherwise.
pub const DEFAULT_HISTORY_RETENTION: Duration = Duration::from_secs(7 * 86_400);

/// What moved a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum HeadOp {
    /// New pages: a checkpoint of a checkout, a session flush, a write through the VFS.
    Commit,
    /// Back to one of the branch's checkpoints.
    Rollback,
    /// Onto another branch's head.
    Promote,
    /// The same data rewritten into fresh segments.
    Compact,
    /// A move taken back.
    Undo,
    /// Back to where an entry of the history left it (a destroyed branch brought back too).
    Restore,
    /// The branch was destroyed.
    Destroy,
    /// Another branch's changes brought in, three-way (see [`MergedFrom`]).
    Merge,
    /// Moved by `scion push` from another store, to a version made there.
    Push,
    /// A remote-tracking branch moved by `scion pull` or `scion clone` to the remote's head.
    Fetch,
}

impl HeadOp {
    /// The operation's name as the history shows it (`commit`, `rollback`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            HeadOp::Commit => "commit",
            HeadOp::Rollback => "rollback",
            HeadOp::Promote => "promote",
            HeadOp::Compact => "compact",
            HeadOp::Undo => "undo",
            HeadOp::Restore => "restore",
            HeadOp::Destroy => "destroy",
            HeadOp::Merge => "merge",
            HeadOp::Push => "push",
            HeadOp::Fetch => "fetch",
        }
    }
}

impl std::fmt::Display for HeadOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One move of a head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadEntry {
    /// Numbers the branch's moves from 1, in order; `restore --to` names one by it.
    pub seq: u64,
    /// What moved the head.
    pub op: HeadOp,
    /// The head before; none when the move brought a destroyed branch back.
    #[serde(with = "optional_locator")]
    pub old: Option<Locator>,
    /// The head's number before.
    pub old_version: u64,
    /// The head after; none for a destroy.
    #[serde(with = "optional_locator")]
    pub new: Option<Locator>,
    /// The head's number after.
    pub new_version: u64,
    /// The store's clock when the move was published.
    pub at: StoreTime,
    /// The lease holder that made the move, or the process.
    pub holder: String,
    /// Who the move was made for, when the front end knew (`token:ci`, an MCP server's
    /// owner tag): see [`crate::actor`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// For people: the checkpoint or branch moved to, the checkpoint a commit named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// For an undo: the entry it undid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undoes: Option<u64>,
    /// For a merge: what was merged in, and from which base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergedFrom>,
}

/// The sources of a merge: the version of a branch of the same database that was merged
/// in, and the base the two sides were compared against. The next merge of that branch
/// starts from `root`, so the same changes are never merged twice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedFrom {
    /// The branch merged in (its name, within the same database).
    pub branch: String,
    /// The version of it that was merged.
    #[serde(with = "crate::objects::locator_text")]
    pub root: Locator,
    /// That version's number on its branch.
    pub version: u64,
    /// The version both sides were compared against.
    #[serde(with = "crate::objects::locator_text")]
    pub base: Locator,
    /// Tables whose rows from the source were given new ids (`merge --renumber`): the
    /// source keeps them under its own, which a later merge from it must not mistake for
    /// the destination's rows of those ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renumbered: Vec<String>,
}

impl HeadEntry {
    /// The versions this entry keeps from `gc` while it is younger than the retention.
    pub(crate) fn roots(&self) -> impl Iterator<Item = Locator> {
        let merged = self
            .merged
            .clone()
            .into_iter()
            .flat_map(|m| [m.root, m.base]);
        self.old.into_iter().chain(self.new).chain(merged)
    }
}

/// What a caller of the publish path says about the move it makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeadMove {
    pub op: HeadOp,
    pub detail: Option<String>,
    pub undoes: Option<u64>,
    pub merged: Option<MergedFrom>,
}

impl HeadMove {
    pub fn new(op: HeadOp) -> Self {
        HeadMove {
            op,
            detail: None,
            undoes: None,
            merged: None,
        }
    }

    pub(crate) fn with_detail(op: HeadOp, detail: impl Into<String>) -> Self {
        HeadMove {
            op,
            detail: Some(detail.into()),
            undoes: None,
            merged: None,
        }
    }
}

/// What a destroyed branch was, beyond its head: enough to bring it back as it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestroyedBranch {
    /// The version the branch was forked at.
    #[serde(with = "crate::objects::locator_text")]
    pub fork_root: Locator,
    /// That version's number on the branch it was forked from.
    pub fork_version: u64,
    /// The version `create` made for the database.
    #[serde(with = "crate::objects::locator_text")]
    pub init_root: Locator,
    /// The branch and version it was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Parent>,
    /// It was protected.
    #[serde(default)]
    pub protected: bool,
    /// Its TTL in seconds, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_secs: Option<u64>,
    /// What users had attached to the branch, and its owner (`scion.owner`); scion's other
    /// entries are not kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, String>,
}

impl DestroyedBranch {
    /// Who made the branch that was destroyed.
    pub fn owner(&self) -> Option<crate::names::Owner> {
        self.meta
            .get(crate::names::Owner::META_KEY)
            .and_then(|o| crate::names::Owner::new(o).ok())
    }
}

/// An immutable object holding older entries of one branch's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryObject {
    /// The object's schema number (see [`HISTORY_SCHEMA`]).
    pub schema: u32,
    /// `db@branch`, for people reading the store.
    pub branch: String,
    /// The object holding the entries before these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// Oldest first.
    pub entries: Vec<HeadEntry>,
    /// Set by a destroy: the branch as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destroyed: Option<DestroyedBranch>,
}

impl HistoryObject {
    /// Read a history object stored at `key`, refusing a schema newer than this scion
    /// reads.
    pub fn decode(bytes: &[u8], key: &str) -> EngineResult<Self> {
        let mut o: HistoryObject = crate::objects::decode_versioned(bytes, key, HISTORY_SCHEMA)?;
        if o.entries.is_empty() {
            return Err(EngineError::corrupt(
                key,
                "a history object with no entries",
            ));
        }
        o.schema = HISTORY_SCHEMA;
        Ok(o)
    }

    /// The JSON this object is stored as.
    pub fn encode(&self) -> Vec<u8> {
        let mut written = std::borrow::Cow::Borrowed(self);
        if self.schema == HISTORY_SCHEMA {
            written.to_mut().schema = match entry_kinds(&self.entries) {
                EntryKinds::Transfers => HISTORY_SCHEMA,
                EntryKinds::Merges => HISTORY_SCHEMA_WITHOUT_TRANSFERS,
                EntryKinds::Plain => HISTORY_SCHEMA_WITHOUT_MERGES,
            };
        }
        serde_json::to_vec(written.as_ref()).expect("history objects always serialize")
    }

    /// The key this object is written under: sorted by its newest entry's time, so `gc`
    /// can tell an expired object from its name, and a listing finds the newest last.
    pub fn key(&self, b: &BranchRef) -> String {
        let last = self.entries.last().expect("a history object has entries");
        format!(
            "{}{:013}-{:010}-{}",
            history_prefix(&b.db, &b.branch),
            crate::clock::unix_ms(last.at.as_system_time()),
            last.seq,
            random_hex(4)
        )
    }
}

/// Where a branch's history objects live.
pub(crate) fn history_prefix(db: &DbName, branch: &BranchName) -> String {
    format!("history/{db}/{branch}/")
}

pub(crate) const HISTORY_ROOT: &str = "history/";

/// The time (unix ms) of the newest entry of the object at `key`, read from its name.
pub(crate) fn newest_ms_of_key(key: &str) -> Option<u64> {
    let name = key.rsplit('/').next()?;
    name.split('-').next()?.parse().ok()
}

mod optional_locator {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::format::Locator;

    pub fn serialize<S: Serializer>(l: &Option<Locator>, s: S) -> Result<S::Ok, S::Error> {
        match l {
            Some(l) => s.collect_str(l),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Locator>, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        s.map(|s| s.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::SegmentId;

    fn entry(seq: u64, op: HeadOp) -> HeadEntry {
        HeadEntry {
            seq,
            op,
            old: Some(Locator {
                segment: SegmentId(1),
                offset: 2,
                len: 3,
            }),
            old_version: seq,
            new: None,
            new_version: seq + 1,
            at: StoreTime::from_store_clock(std::time::UNIX_EPOCH + Duration::from_secs(5)),
            holder: "h".into(),
            by: None,
            detail: None,
            undoes: None,
            merged: None,
        }
    }

    #[test]
    fn history_keys_sort_by_their_newest_entry_and_name_its_time() {
        let b: BranchRef = "shop@main".parse().unwrap();
        let o = HistoryObject {
            schema: HISTORY_SCHEMA,
            branch: b.to_string(),
            previous: None,
            entries: vec![entry(1, HeadOp::Commit), entry(2, HeadOp::Destroy)],
            destroyed: None,
        };
        let key = o.key(&b);
        assert!(
            key.starts_with("history/shop/main/0000000005000-0000000002-"),
            "{key}"
        );
        assert_eq!(newest_ms_of_key(&key), Some(5000));
        let back = HistoryObject::decode(&o.encode(), &key).unwrap();
        assert_eq!(back, o);
    }

    #[test]
    fn a_history_object_without_entries_or_from_a_newer_binary_is_refused() {
        let empty = br#"{"schema":1,"branch":"a@b","entries":[]}"#;
        assert!(HistoryObject::decode(empty, "k").is_err());
        let newer = br#"{"schema":4,"branch":"a@b","entries":[]}"#;
        assert!(matches!(
            HistoryObject::decode(newer, "k"),
            Err(EngineError::FormatTooNew { .. })
        ));
    }
}
