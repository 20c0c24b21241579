//! The receiving end of a transfer: a branch head, or a checkpoint, made in another store,
//! whose segments have all arrived (`ops/transfer.rs`). A head is published by one
//! create-only write or one compare-and-swap from the head the sender last saw, so no
//! reader ever meets a ref whose data is not all there; a receiving store never takes a
//! move it did not expect.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::clock::StoreTime;
use crate::error::{EngineError, EngineResult};
use crate::format::{Locator, SegmentId};
use crate::history::{HeadMove, HeadOp};
use crate::names::{BranchRef, CheckpointName};
use crate::objects::Parent;
use crate::refs::{Checkpoint, Ref};
use crate::Engine;

/// A head made elsewhere, as the receiving store records it.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// The version's root record.
    pub root: Locator,
    /// Its number where it was made.
    pub version: u64,
    /// Its page size in bytes.
    pub page_size: u32,
    /// Its number of pages.
    pub page_count: u32,
    /// The version the branch was forked at, where it was made.
    pub fork_root: Locator,
    /// That version's number.
    pub fork_version: u64,
    /// The version `create` made for the database.
    pub init_root: Locator,
    /// The branch and version it was forked from.
    pub parent: Option<Parent>,
    /// The branch is protected where it was made.
    pub protected: bool,
    /// The user's entries and the owner; scion's other marks stay where they were made.
    pub meta: BTreeMap<String, String>,
}

impl Incoming {
    /// What a receiving store keeps of the sender's ref `r`.
    pub fn from_ref(r: &Ref) -> Self {
        let meta = r
            .meta
            .iter()
            .filter(|(k, _)| !k.starts_with("scion.") || k.as_str() == crate::Owner::META_KEY)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Incoming {
            root: r.root,
            version: r.version,
            page_size: r.page_size,
            page_count: r.page_count,
            fork_root: r.fork_root,
            fork_version: r.fork_version,
            init_root: r.init_root,
            parent: r.parent.clone(),
            protected: r.protected,
            meta,
        }
    }
}

/// Where a clone marks its store unfinished until its last branch is in (JSON naming the
/// source: `{"schema":1,"location":"..."}`); `verify` reports a store that holds it.
pub const UNFINISHED_CLONE_KEY: &str = "clone/unfinished";

/// The head the receiving branch must have for the move to go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Expect {
    /// No such branch yet: the ref is created.
    Absent,
    /// The branch's head is this version.
    Head(Locator),
}

/// How a head was received.
#[derive(Debug, Clone, Serialize)]
pub struct Received {
    /// The branch received.
    pub branch: BranchRef,
    /// Its number on the receiving branch.
    pub version: u64,
    /// The branch did not exist and was made.
    pub created: bool,
    /// The head-history entry that records the move (0 for a new branch).
    pub history_entry: u64,
}

/// What a move takes besides the head: how it is recorded, whether protection and
/// leases may be overridden, and the segments whose arrival it relies on.
pub struct Receipt<'a> {
    /// What the head history records the move as (a push or a fetch).
    pub op: HeadOp,
    /// Said with it (where the version came from).
    pub detail: String,
    /// Move the branch even if leased by another holder or checked out, and replace a
    /// protected branch's head with one not made from it.
    pub force: bool,
    /// The new head was made from the current one: a protected branch takes it as it takes
    /// a commit.
    pub fast_forward: bool,
    /// Segments the head needs that were found at the receiver rather than written by
    /// this transfer: asked for again after the move, as a commit checks its own.
    pub reused: &'a [SegmentId],
    /// The receiving store's clock before the first segment was sent.
    pub started: StoreTime,
}

/// How to take a received head back: remove the ref it created, or put back the ref it
/// replaced; either only over the write it made (its etag).
enum Undo {
    Remove(Ref, scion_store::ETag),
    Restore(Ref, scion_store::ETag),
}

/// How receiving a checkpoint went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CheckpointReceipt {
    /// The checkpoint was made on the receiver.
    Created,
    /// The receiver had it already, naming the same version.
    Same,
    /// The receiver has a checkpoint of that name naming another version; left as it is.
    Differs,
}

impl Engine {
    /// Point `b` at `incoming` if its head is still what `expect` says. Versions keep
    /// their number where it is higher than the receiving branch's; otherwise they count
    /// on from it.
    pub fn receive_head(
        &self,
        b: &BranchRef,
        incoming: &Incoming,
        expect: Expect,
        receipt: Receipt<'_>,
    ) -> EngineResult<Received> {
        let age = self.store_time()?.since(receipt.started);
        if age.saturating_mul(2) > self.min_grace() && !self.holds_segments(receipt.reused)? {
            return Err(EngineError::CommitExpired {
                branch: b.clone(),
                took_secs: age.as_secs(),
            });
        }
        let (received, undo) = match expect {
            Expect::Absent => self.receive_new(b, incoming)?,
            Expect::Head(h) => self.receive_move(b, incoming, h, &receipt)?,
        };
        // A `gc` that marked before the move may have swept a segment found lying
        // unreachable here: then the move is taken back, as a commit's is, unless the ref
        // moved again since.
        if !self.holds_segments(receipt.reused)? {
            match undo {
                Some(Undo::Remove(r, etag)) => self.remove_own_ref(b, &r, &etag)?,
                Some(Undo::Restore(mut previous, etag)) => {
                    let _ = self.write_ref(b, &mut previous, &etag);
                }
                None => {}
            }
            return Err(EngineError::CommitLost { branch: b.clone() });
        }
        Ok(received)
    }

    fn receive_new(&self, b: &BranchRef, i: &Incoming) -> EngineResult<(Received, Option<Undo>)> {
        let now = self.store_time()?;
        let mut r = Ref {
            schema: crate::refs::REF_SCHEMA,
            root: i.root,
            version: i.version,
            page_size: i.page_size,
            page_count: i.page_count,
            fork_root: i.fork_root,
            fork_version: i.fork_version,
            init_root: i.init_root,
            parent: i.parent.clone(),
            protected: i.protected || b.branch.tracking().is_some(),
            created_at: now,
            touched_at: now,
            epoch: 0,
            lease: None,
            ttl_secs: None,
            destroying_since: None,
            safety: None,
            meta: i.meta.clone(),
            history: Vec::new(),
            history_before: None,
            checkouts: Vec::new(),
            nonce: Default::default(),
        };
        let etag = self.create_ref(b, &mut r)?;
        let received = Received {
            branch: b.clone(),
            version: r.version,
            created: true,
            history_entry: 0,
        };
        Ok((received, Some(Undo::Remove(r, etag))))
    }

    fn receive_move(
        &self,
        b: &BranchRef,
        i: &Incoming,
        expect: Locator,
        receipt: &Receipt<'_>,
    ) -> EngineResult<(Received, Option<Undo>)> {
        let (r, etag) = self.read_ref(b)?;
        if r.root != expect {
            return Err(EngineError::Conflict { branch: b.clone() });
        }
        let tracking = b.branch.tracking().is_some();
        if r.protected && !receipt.force && !receipt.fast_forward && !tracking {
            return Err(EngineError::Protected {
                branch: b.clone(),
                action: "replacing its head with a version not made from it",
            });
        }
        self.check_not_leased(b, &r, receipt.force || tracking)?;
        if !r.checkouts.is_empty() && !receipt.force && !tracking {
            return Err(EngineError::CheckedOut {
                branch: b.clone(),
                checkouts: r
                    .checkouts
                    .iter()
                    .map(|c| format!("{}:{}", c.host, c.path))
                    .collect(),
            });
        }
        if r.root == i.root {
            let received = Received {
                branch: b.clone(),
                version: r.version,
                created: false,
                history_entry: r.history.last().map_or(0, |e| e.seq),
            };
            return Ok((received, None));
        }
        let touched = self.store_time()?;
        let version = i.version.max(r.version + 1);
        let mv = HeadMove::with_detail(receipt.op, receipt.detail.clone());
        let (next, written) = self.publish_head(b, &r, etag, None, &mv, |next| {
            next.root = i.root;
            next.version = version;
            next.page_size = i.page_size;
            next.page_count = i.page_count;
            next.touched_at = touched;
            Ok(())
        })?;
        let received = Received {
            branch: b.clone(),
            version: next.version,
            created: false,
            history_entry: next.history.last().map_or(0, |e| e.seq),
        };
        Ok((received, Some(Undo::Restore(r, written))))
    }

    /// Bind checkpoint `name` of `b` to a version that arrived from another store, unless
    /// a checkpoint of that name exists already.
    pub fn receive_checkpoint(
        &self,
        b: &BranchRef,
        name: &CheckpointName,
        c: &Checkpoint,
    ) -> EngineResult<CheckpointReceipt> {
        match self.bind_checkpoint(b, name, c.root, c.version, c.meta.clone()) {
            Ok(_) => Ok(CheckpointReceipt::Created),
            Err(EngineError::CheckpointExists { .. }) => {
                Ok(if self.read_checkpoint(b, name)?.root == c.root {
                    CheckpointReceipt::Same
                } else {
                    CheckpointReceipt::Differs
                })
            }
            Err(e) => Err(e),
        }
    }
}
