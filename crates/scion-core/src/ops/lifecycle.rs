//! Removing and marking branches: destroy, protect, touch, TTLs and deleting checkpoints,
//! with the options and reports of head moves (the moves themselves are in `moves.rs`).

use std::time::Duration;

use scion_store::StoreError;
use serde::Serialize;

use crate::checkout::DbFiles;
use crate::error::{CoreError, CoreResult, EngineError, EngineResult};
use crate::format::Locator;
use crate::history::HeadMove;
use crate::names::{BranchName, BranchRef, CheckpointName};
use crate::refs::{checkpoint_key, checkpoints_prefix, ref_key, Ref, SafetyKind};
use crate::sqlite_io;
use crate::{Engine, Scion};

/// Safety forks live this long unless told otherwise.
pub(crate) const DEFAULT_BACKUP_TTL: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone, Default)]
pub struct MoveOptions {
    /// Override protection, another holder's lease, and uncheckpointed changes.
    pub force: bool,
    /// Keep no safety fork (a protected branch then also needs `force`).
    pub no_backup: bool,
    pub backup_ttl: Option<Duration>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MoveReport {
    pub branch: String,
    /// The version the head now holds, and where it came from.
    pub to: String,
    /// The number `to` had where it came from (a checkpoint's, the source branch's).
    pub to_version: u64,
    /// The head's number now: every move adds one.
    pub version: u64,
    /// Version number of the head that was replaced.
    pub abandoned_version: u64,
    /// The number of this move in the branch's head history (`scion log`).
    pub history_entry: u64,
    /// The branch had been destroyed, and `restore` brought it back.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub revived: bool,
    /// A revived branch's TTL in seconds, counted afresh from the restore.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_secs: Option<u64>,
    /// On an undo: the history entry it took back. `restore --to` that entry redoes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undid_entry: Option<u64>,
    /// A branch that also names the replaced head (the history keeps it either way).
    pub safety_fork: Option<String>,
    /// The branch is protected: taking this move back (`undo`) needs force too.
    pub protected: bool,
    /// The checkout was refreshed (path) or had uncheckpointed changes discarded.
    pub checkout: Option<String>,
    pub discarded_changes: bool,
    /// What went wrong after the head moved (the move itself stands).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Where a head move goes, and how it is recorded.
pub(crate) struct HeadTarget {
    pub root: Locator,
    /// The number the version had where it came from.
    pub version: u64,
    /// For people: what the head now holds.
    pub to: String,
    pub mv: HeadMove,
    /// Name the replaced head by a safety fork of this kind too.
    pub safety: Option<SafetyKind>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DestroyReport {
    pub branch: String,
    pub checkpoints_removed: usize,
    pub checkout_files_removed: usize,
}

impl Scion {
    /// Remove a branch: its ref, its checkpoints and its local checkout files. Its data
    /// goes at the next `gc` that finds it unreachable.
    pub fn destroy(&self, b: &BranchRef, force: bool) -> CoreResult<DestroyReport> {
        let now = self.engine.store_time()?;
        let (_, claimed_etag) = self.engine.update_ref_with(b, true, |r| {
            if r.destroying_since.is_some() {
                // Finishing an interrupted destroy.
                return Ok(());
            }
            if (r.protected || b.branch.as_str() == "main") && !force {
                return Err(EngineError::Protected {
                    branch: b.clone(),
                    action: "destroying it",
                }
                .into());
            }
            if !force && self.engine.holds_only_recent_head_of_protected(b, r)? {
                return Err(EngineError::Protected {
                    branch: b.clone(),
                    action: "destroying the only recent copy of a protected branch's head",
                }
                .into());
            }
            self.engine.check_not_leased(b, r, force)?;
            let path = self.checkout_path(b);
            if !force {
                if path.exists() && sqlite_io::in_use(&path)? {
                    return Err(CoreError::CheckoutBusy { path });
                }
                crate::checkout::refuse_unsaved(&self.inspect(&path, &r.root)?, &path, b)?;
            }
            // Claim first: from here on no operation moves or reads this branch.
            r.destroying_since = Some(now);
            Ok(())
        })?;
        self.finish_destroy(b, &claimed_etag)
    }

    /// Claim a branch for destruction only if it is still exactly in the state `etag`
    /// names (so a reaper never destroys a branch someone touched since it looked).
    pub(crate) fn reap(
        &self,
        b: &BranchRef,
        r: &Ref,
        etag: &scion_store::ETag,
    ) -> CoreResult<Option<DestroyReport>> {
        let mut claimed = r.clone();
        claimed.destroying_since = Some(self.engine.store_time()?);
        match self.engine.write_ref(b, &mut claimed, etag) {
            Ok(e) => self.finish_destroy(b, &e).map(Some),
            Err(EngineError::Conflict { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Everything after the claim: checkpoints, the ref, local files.
    pub(crate) fn finish_destroy(
        &self,
        b: &BranchRef,
        claimed_etag: &scion_store::ETag,
    ) -> CoreResult<DestroyReport> {
        // The history outlives the branch: `restore` brings it back while it lasts. An
        // ephemeral branch's goes with it, so gc reclaims its pages at once.
        match self.engine.read_ref_any(b) {
            Ok((r, _)) if r.is_ephemeral() => self.engine.forget_history(b)?,
            Ok((r, _)) => self.engine.record_destroy(b, &r)?,
            Err(EngineError::BranchNotFound { .. } | EngineError::DatabaseNotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        let mut removed = self.delete_checkpoints(b)?;
        match self.engine.backend.delete_if(&ref_key(b), claimed_etag) {
            Ok(()) | Err(StoreError::NotFound { .. }) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        // A checkpoint bound while the claim landed is removed too.
        removed += self.delete_checkpoints(b)?;
        let files = self.remove_checkout_files(b)?;
        Ok(DestroyReport {
            branch: b.to_string(),
            checkpoints_removed: removed,
            checkout_files_removed: files,
        })
    }

    fn delete_checkpoints(&self, b: &BranchRef) -> CoreResult<usize> {
        let list = self.engine.backend.list(&checkpoints_prefix(b))?;
        for m in &list {
            self.engine.backend.delete(&m.key)?;
        }
        Ok(list.len())
    }

    /// Remove the branch's checkout (journals before the database) and its read-only
    /// checkouts. The branch is already claimed for destruction, so they go even if a
    /// connection opened one since `destroy` checked.
    fn remove_checkout_files(&self, b: &BranchRef) -> CoreResult<usize> {
        let mut n = DbFiles::checkout(self.checkout_path(b)).remove_all()?;
        let ro_dir = self.read_only_dir(&b.db);
        if let Ok(entries) = std::fs::read_dir(&ro_dir) {
            let prefix = format!("{}@", b.branch);
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(&prefix) && name.ends_with(".db") {
                    n += DbFiles::checkout(e.path()).remove_all()?;
                }
            }
        }
        Ok(n)
    }
}

/// Store-only branch upkeep: protection, activity, TTL, checkpoint removal.
impl Engine {
    /// Whether `r` is a safety fork of a protected branch whose history (within the
    /// store's retention) does not name `r`'s head: destroying it would leave that head to
    /// the next `gc`. Stores written before the head history have such forks.
    fn holds_only_recent_head_of_protected(&self, b: &BranchRef, r: &Ref) -> EngineResult<bool> {
        let Some(mark) = &r.safety else {
            return Ok(false);
        };
        let Ok(of_name) = BranchName::new(&mark.of) else {
            return Ok(false);
        };
        let of = BranchRef::new(b.db.clone(), of_name);
        let of_ref = match self.read_ref_any(&of) {
            Ok((of_ref, _)) => of_ref,
            Err(EngineError::BranchNotFound { .. } | EngineError::DatabaseNotFound { .. }) => {
                return Ok(false)
            }
            Err(e) => return Err(e),
        };
        if !of_ref.protected || of_ref.root == r.root {
            return Ok(false);
        }
        let cutoff = self.store_time()?.saturating_sub(self.history_retention()?);
        Ok(!self.history_names_since(&of_ref, r.root, cutoff)?)
    }

    /// Protect `b` (or stop protecting it): a protected branch refuses moves, destroys
    /// and page writes that are not forced.
    pub fn set_protected(&self, b: &BranchRef, protected: bool) -> EngineResult<()> {
        self.update_ref(b, |r| {
            r.protected = protected;
            Ok(())
        })?;
        Ok(())
    }

    /// Reset the branch's activity clock, and set (`Some(Some(d))`) or clear
    /// (`Some(None)`) its TTL.
    pub fn touch(&self, b: &BranchRef, ttl: Option<Option<Duration>>) -> EngineResult<Ref> {
        let now = self.store_time()?;
        self.update_ref(b, |r| {
            r.touched_at = now;
            if let Some(t) = ttl {
                r.ttl_secs = t.map(|d| d.as_secs().max(1));
            }
            Ok(())
        })
    }

    /// Remove checkpoint `name` of `b` (never `fork` or `init`).
    pub fn delete_checkpoint(&self, b: &BranchRef, name: &CheckpointName) -> EngineResult<()> {
        if name.is_reserved() {
            return Err(EngineError::ReservedName {
                name: name.to_string(),
            });
        }
        self.read_ref(b)?;
        self.read_checkpoint(b, name)?;
        self.backend.delete(&checkpoint_key(b, name))?;
        Ok(())
    }

    /// Set a new branch's TTL right after forking it.
    pub fn set_ttl(&self, b: &BranchRef, ttl: Duration) -> EngineResult<()> {
        self.touch(b, Some(Some(ttl))).map(drop)
    }
}
