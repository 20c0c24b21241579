//! A branch's head history (see [`crate::history`]): recording each move, reading it back
//! (`scion log`), moving along it (`undo`, `restore`), bringing a destroyed branch back,
//! and the versions it keeps from `gc`.

use std::collections::HashSet;
use std::time::Duration;

use scion_store::{PutMode, StoreError};
use serde::Serialize;

use crate::clock::StoreTime;
use crate::conditional::put_exact;
use crate::error::{EngineError, EngineResult};
use crate::format::Locator;
use crate::history::{
    history_prefix, newest_ms_of_key, DestroyedBranch, HeadEntry, HeadMove, HeadOp, HistoryObject,
    HISTORY_ROOT, HISTORY_SCHEMA, INLINE_KEEP, INLINE_MAX,
};
use crate::names::BranchRef;
use crate::ops::moves::WorkingFiles;
use crate::ops::moves::{HeadTarget, MoveOptions, MoveReport};
use crate::refs::{kept_meta, Ref, REF_SCHEMA};
use crate::Engine;

/// A branch's head history as read back, newest entry first.
#[derive(Debug, Clone, Serialize)]
pub struct HeadHistory {
    /// The branch.
    pub branch: BranchRef,
    /// False when the branch was destroyed: `restore` brings it back.
    pub live: bool,
    /// Who made the branch, when a front end with owners made it (kept by a destroy
    /// record, so a destroyed branch still names it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<crate::names::Owner>,
    /// The entries read, newest first.
    pub entries: Vec<HeadEntry>,
    /// Entries older than these exist but were not read (the limit was reached).
    pub more: bool,
    /// Older entries were removed by `gc` once they passed the store's retention.
    pub expired_before: bool,
}

/// Walks a history newest first, reading history objects only as far as it is asked to.
struct HistoryWalk<'a> {
    scion: &'a Engine,
    /// Oldest first: the walk pops from the end.
    pending: Vec<HeadEntry>,
    next_object: Option<String>,
    expired: bool,
}

impl<'a> HistoryWalk<'a> {
    fn of_ref(scion: &'a Engine, r: &Ref) -> Self {
        HistoryWalk {
            scion,
            pending: r.history.clone(),
            next_object: r.history_before.clone(),
            expired: false,
        }
    }

    fn from_object(scion: &'a Engine, object: HistoryObject) -> Self {
        HistoryWalk {
            scion,
            pending: object.entries,
            next_object: object.previous,
            expired: false,
        }
    }

    fn next(&mut self) -> EngineResult<Option<HeadEntry>> {
        loop {
            if let Some(e) = self.pending.pop() {
                return Ok(Some(e));
            }
            let Some(key) = self.next_object.take() else {
                return Ok(None);
            };
            match self.scion.backend.get(&key) {
                Ok((bytes, _)) => {
                    let o = HistoryObject::decode(&bytes, &key)?;
                    self.pending = o.entries;
                    self.next_object = o.previous;
                }
                Err(StoreError::NotFound { .. }) => {
                    self.expired = true;
                    return Ok(None);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The entry numbered `seq`, walking back no further than it.
    fn find(&mut self, seq: u64) -> EngineResult<Option<HeadEntry>> {
        while let Some(e) = self.next()? {
            if e.seq == seq {
                return Ok(Some(e));
            }
            if e.seq < seq {
                break;
            }
        }
        Ok(None)
    }
}

/// The number the next move of `r`'s head gets.
fn next_seq(r: &Ref) -> u64 {
    let last = r.history.last().map(|e| e.seq).or_else(|| {
        // A ref whose inline entries all spilled (never written so, but readable).
        let key = r.history_before.as_deref()?;
        key.rsplit('/').next()?.split('-').nth(1)?.parse().ok()
    });
    last.map_or(1, |s| s + 1)
}

/// The versions named by entries at or after `cutoff`.
pub(crate) fn young_roots(
    entries: &[HeadEntry],
    cutoff: StoreTime,
) -> impl Iterator<Item = (Locator, StoreTime)> + '_ {
    entries
        .iter()
        .filter(move |e| e.at >= cutoff)
        .flat_map(|e| e.roots().map(move |l| (l, e.at)))
}

/// What the history keeps from `gc` (each root with the time of the entry that names it),
/// and the objects past their retention.
pub(crate) struct HistoryMarks {
    pub roots: Vec<(Locator, StoreTime)>,
    pub expired_objects: Vec<String>,
}

impl Engine {
    /// Append the move from `current` to `next` to `next`'s history; when the ref would
    /// hold more than [`INLINE_MAX`] entries, the older ones go into a new history object
    /// first (create-only, so a move that then loses its race leaves only an extra copy).
    pub(crate) fn record_move(
        &self,
        b: &BranchRef,
        current: &Ref,
        next: &mut Ref,
        mv: &HeadMove,
        at: StoreTime,
    ) -> EngineResult<()> {
        let own = self.holder();
        let holder = match &current.lease {
            Some(l) if l.holder == own || l.holder.starts_with(&format!("{own}#")) => {
                l.holder.clone()
            }
            _ => own.to_string(),
        };
        next.history.push(HeadEntry {
            seq: next_seq(current),
            op: mv.op,
            old: Some(current.root),
            old_version: current.version,
            new: Some(next.root),
            new_version: next.version,
            at,
            holder,
            by: crate::actor::current(),
            detail: mv.detail.clone(),
            undoes: mv.undoes,
            merged: mv.merged.clone(),
        });
        if next.history.len() > INLINE_MAX {
            let older: Vec<HeadEntry> = next
                .history
                .drain(..next.history.len() - INLINE_KEEP)
                .collect();
            let object = HistoryObject {
                schema: HISTORY_SCHEMA,
                branch: b.to_string(),
                previous: next.history_before.clone(),
                entries: older,
                destroyed: None,
            };
            let key = object.key(b);
            put_exact(
                self.backend.as_ref(),
                &key,
                &object.encode(),
                PutMode::Create,
            )?;
            next.history_before = Some(key);
        }
        Ok(())
    }

    /// Remove the history objects of an ephemeral branch about to be destroyed.
    pub(crate) fn forget_history(&self, b: &BranchRef) -> EngineResult<()> {
        let keys: Vec<String> = self
            .backend
            .list(&history_prefix(&b.db, &b.branch))?
            .into_iter()
            .map(|m| m.key)
            .collect();
        for chunk in keys.chunks(1000) {
            self.backend.delete_many(chunk)?;
        }
        Ok(())
    }

    /// Keep a branch about to be destroyed in its history: its last entries and a
    /// `destroy` entry, with what `restore` needs to bring it back.
    pub(crate) fn record_destroy(&self, b: &BranchRef, r: &Ref) -> EngineResult<()> {
        let mut entries = r.history.clone();
        entries.push(HeadEntry {
            seq: next_seq(r),
            op: HeadOp::Destroy,
            old: Some(r.root),
            old_version: r.version,
            new: None,
            new_version: r.version,
            at: self.store_time()?,
            holder: self.holder().to_string(),
            by: crate::actor::current(),
            detail: None,
            undoes: None,
            merged: None,
        });
        let object = HistoryObject {
            schema: HISTORY_SCHEMA,
            branch: b.to_string(),
            previous: r.history_before.clone(),
            entries,
            destroyed: Some(DestroyedBranch {
                fork_root: r.fork_root,
                fork_version: r.fork_version,
                init_root: r.init_root,
                parent: r.parent.clone(),
                protected: r.protected,
                ttl_secs: r.ttl_secs,
                meta: kept_meta(r),
            }),
        };
        put_exact(
            self.backend.as_ref(),
            &object.key(b),
            &object.encode(),
            PutMode::Create,
        )?;
        Ok(())
    }

    /// The newest history object of a branch that no longer exists: its destroy record.
    fn destroyed_record(&self, b: &BranchRef) -> EngineResult<Option<(String, HistoryObject)>> {
        let mut keys: Vec<String> = self
            .backend
            .list(&history_prefix(&b.db, &b.branch))?
            .into_iter()
            .map(|m| m.key)
            .collect();
        keys.sort();
        let Some(key) = keys.pop() else {
            return Ok(None);
        };
        let (bytes, _) = self.backend.get(&key)?;
        let object = HistoryObject::decode(&bytes, &key)?;
        Ok(object.destroyed.is_some().then_some((key, object)))
    }

    /// `b`'s head history, newest first, at most `limit` entries. A destroyed branch's
    /// history is read from its destroy record while that lasts.
    pub fn head_history(&self, b: &BranchRef, limit: Option<usize>) -> EngineResult<HeadHistory> {
        let (mut walk, live, owner) = match self.read_ref_any(b) {
            Ok((r, _)) => (HistoryWalk::of_ref(self, &r), true, r.owner()),
            Err(
                e @ (EngineError::BranchNotFound { .. } | EngineError::DatabaseNotFound { .. }),
            ) => match self.destroyed_record(b)? {
                Some((_, object)) => {
                    let owner = object.destroyed.as_ref().and_then(|d| d.owner());
                    (HistoryWalk::from_object(self, object), false, owner)
                }
                None => return Err(e),
            },
            Err(e) => return Err(e),
        };
        let mut entries = Vec::new();
        let mut more = false;
        while let Some(e) = walk.next()? {
            if limit.is_some_and(|l| entries.len() >= l) {
                more = true;
                break;
            }
            entries.push(e);
        }
        Ok(HeadHistory {
            branch: b.clone(),
            live,
            owner,
            entries,
            more,
            expired_before: walk.expired,
        })
    }

    /// Whether an entry of `r`'s history at or after `cutoff` names `root`. Entries come
    /// newest first, so the walk stops at the first older one instead of reading every
    /// history object the branch has.
    pub(crate) fn history_names_since(
        &self,
        r: &Ref,
        root: Locator,
        cutoff: StoreTime,
    ) -> EngineResult<bool> {
        let mut walk = HistoryWalk::of_ref(self, r);
        while let Some(e) = walk.next()? {
            if e.at < cutoff {
                return Ok(false);
            }
            if e.roots().any(|l| l == root) {
                return Ok(true);
            }
        }
        Ok(false)
    }
    /// Move `b`'s head back over its latest move that no undo has undone yet, as git's
    /// `reset` to a reflog entry or jj's `undo`. Repeated, it walks further back; the
    /// undo is itself a move in the history, so `restore` can redo.
    ///
    /// `files` are asked before the head moves and told after: [`StoreOnly`](crate::ops::moves::StoreOnly) when no host's
    /// files follow the branch, the working tree's checkouts otherwise.
    pub fn undo<G: WorkingFiles>(
        &self,
        b: &BranchRef,
        opts: &MoveOptions,
        guard: &mut G,
    ) -> Result<MoveReport, G::Error> {
        let (r, etag) = self.read_ref(b)?;
        if r.protected && !opts.force {
            return Err(EngineError::Protected {
                branch: b.clone(),
                action: "undoing a move of it",
            }
            .into());
        }
        let mut walk = HistoryWalk::of_ref(self, &r);
        let mut undone = HashSet::new();
        let target = loop {
            let Some(e) = walk.next()? else {
                return Err(EngineError::NothingToUndo {
                    branch: b.clone(),
                    reason: if walk.expired {
                        "its older history passed the store's retention".into()
                    } else {
                        "its history holds no move that was not undone".into()
                    },
                }
                .into());
            };
            if let Some(seq) = e.undoes {
                undone.insert(seq);
                continue;
            }
            if !undone.contains(&e.seq) {
                break e;
            }
        };
        let Some(old) = target.old else {
            return Err(EngineError::NothingToUndo {
                branch: b.clone(),
                reason: format!(
                    "move #{} brought the branch back after a destroy; destroying it again removes it",
                    target.seq
                ),
            }.into());
        };
        self.move_head(
            b,
            r,
            etag,
            HeadTarget {
                root: old,
                version: target.old_version,
                to: format!("the head before move #{} ({})", target.seq, target.op),
                mv: HeadMove {
                    op: HeadOp::Undo,
                    detail: Some(format!("#{} {}", target.seq, target.op)),
                    undoes: Some(target.seq),
                    merged: None,
                },
                safety: None,
            },
            opts,
            guard,
        )
        .map(|mut report| {
            report.undid_entry = Some(target.seq);
            report
        })
    }

    /// Put `b`'s head where entry `to` of its history left it. A destroyed branch is
    /// brought back by name (by default as it was when destroyed) while its history lasts.
    ///
    /// `files` are asked before the head moves and told after: [`StoreOnly`](crate::ops::moves::StoreOnly) when no host's
    /// files follow the branch, the working tree's checkouts otherwise.
    pub fn restore<G: WorkingFiles>(
        &self,
        b: &BranchRef,
        to: Option<u64>,
        opts: &MoveOptions,
        guard: &mut G,
    ) -> Result<MoveReport, G::Error> {
        let (r, etag) = match self.read_ref(b) {
            Ok(x) => x,
            Err(
                e @ (EngineError::BranchNotFound { .. } | EngineError::DatabaseNotFound { .. }),
            ) => {
                return match self.destroyed_record(b)? {
                    Some((key, object)) => Ok(self.restore_destroyed(b, key, object, to)?),
                    None => Err(e.into()),
                };
            }
            Err(e) => return Err(e.into()),
        };
        let Some(seq) = to else {
            return Err(EngineError::RestoreNeedsEntry { branch: b.clone() }.into());
        };
        if r.protected && !opts.force {
            return Err(EngineError::Protected {
                branch: b.clone(),
                action: "restoring it to an earlier head",
            }
            .into());
        }
        let entry = HistoryWalk::of_ref(self, &r)
            .find(seq)?
            .ok_or_else(|| history_entry_not_found(b, seq))?;
        let root = entry.new.ok_or_else(|| EngineError::InvalidInput {
            reason: format!("entry #{seq} of {b} is its destroy; name an entry before it"),
        })?;
        self.move_head(
            b,
            r,
            etag,
            HeadTarget {
                root,
                version: entry.new_version,
                to: format!("the head move #{seq} ({}) left", entry.op),
                mv: HeadMove::with_detail(HeadOp::Restore, format!("#{seq}")),
                safety: None,
            },
            opts,
            guard,
        )
    }

    fn restore_destroyed(
        &self,
        b: &BranchRef,
        key: String,
        object: HistoryObject,
        to: Option<u64>,
    ) -> EngineResult<MoveReport> {
        let destroyed = object.destroyed.clone().expect("a destroy record");
        let last = object.entries.last().expect("entries").clone();
        let (root, seq, to_version) = match to {
            None => (
                last.old.expect("a destroy entry names the head"),
                last.seq,
                last.old_version,
            ),
            Some(seq) => {
                let entry = HistoryWalk::from_object(self, object)
                    .find(seq)?
                    .ok_or_else(|| history_entry_not_found(b, seq))?;
                // The destroy entry itself means the head it removed.
                match entry.new {
                    Some(new) => (new, seq, entry.new_version),
                    None => (
                        entry.old.expect("an entry names a head"),
                        seq,
                        entry.old_version,
                    ),
                }
            }
        };
        let record = self.reader.root(&root)?;
        let now = self.store_time()?;
        let version = last.old_version + 1;
        let mut r = Ref {
            schema: REF_SCHEMA,
            root,
            version,
            page_size: record.page_size,
            page_count: record.page_count,
            fork_root: destroyed.fork_root,
            fork_version: destroyed.fork_version,
            init_root: destroyed.init_root,
            parent: destroyed.parent,
            protected: destroyed.protected,
            created_at: now,
            touched_at: now,
            epoch: 0,
            lease: None,
            ttl_secs: destroyed.ttl_secs,
            destroying_since: None,
            safety: None,
            meta: destroyed.meta,
            history: vec![HeadEntry {
                seq: last.seq + 1,
                op: HeadOp::Restore,
                old: None,
                old_version: last.old_version,
                new: Some(root),
                new_version: version,
                at: now,
                holder: self.holder().to_string(),
                by: crate::actor::current(),
                detail: Some(format!("#{seq}")),
                undoes: None,
                merged: None,
            }],
            history_before: Some(key),
            checkouts: Vec::new(),
            nonce: Default::default(),
        };
        self.create_ref(b, &mut r)?;
        let to = if to.is_some() {
            format!("the head move #{seq} left")
        } else {
            format!("the head it had when destroyed (move #{seq})")
        };
        Ok(MoveReport {
            branch: b.clone(),
            to,
            to_version,
            revived: true,
            ttl_secs: r.ttl_secs,
            undid_entry: None,
            version,
            abandoned_version: last.old_version,
            history_entry: last.seq + 1,
            safety_fork: None,
            protected: r.protected,
            checkout: None,
            discarded_changes: false,
            warnings: Vec::new(),
        })
    }
}

impl Engine {
    /// The versions entries younger than the store's history retention name, in refs
    /// (`refs`) and in history objects, and the objects whose entries are all older.
    pub(crate) fn history_marks<'r>(
        &self,
        refs: impl IntoIterator<Item = &'r Ref>,
        retention: Duration,
    ) -> EngineResult<HistoryMarks> {
        let cutoff = self.store_time()?.saturating_sub(retention);
        let cutoff_ms = crate::clock::unix_ms(cutoff.as_system_time());
        let mut roots: Vec<(Locator, StoreTime)> = refs
            .into_iter()
            .flat_map(|r| young_roots(&r.history, cutoff).collect::<Vec<_>>())
            .collect();
        let mut expired_objects = Vec::new();
        for m in self.backend.list(HISTORY_ROOT)? {
            match newest_ms_of_key(&m.key) {
                Some(ms) if ms < cutoff_ms => {
                    expired_objects.push(m.key);
                    continue;
                }
                // A name scion did not write: kept, and read like the others.
                _ => {}
            }
            match self.backend.get(&m.key) {
                Ok((bytes, _)) => {
                    let o = HistoryObject::decode(&bytes, &m.key)?;
                    roots.extend(young_roots(&o.entries, cutoff));
                }
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(HistoryMarks {
            roots,
            expired_objects,
        })
    }
}

fn history_entry_not_found(b: &BranchRef, seq: u64) -> EngineError {
    EngineError::HistoryEntryNotFound {
        branch: b.clone(),
        entry: seq,
    }
}
