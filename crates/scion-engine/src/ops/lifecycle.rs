//! Removing and marking branches: destroy, protect, touch, TTLs and deleting checkpoints
//! (head moves, with their options and reports, are in `moves.rs`).

use std::time::Duration;

use scion_store::StoreError;
use serde::Serialize;

use crate::error::{EngineError, EngineResult};
use crate::names::{BranchName, BranchRef, CheckpointName};
use crate::ops::moves::WorkingFiles;
use crate::refs::{checkpoint_key, checkpoints_prefix, ref_key, Ref};
use crate::Engine;

pub use crate::ops::moves::{MoveOptions, MoveReport};

/// What a destroy removed.
#[derive(Debug, Clone, Serialize)]
pub struct DestroyReport {
    /// The branch destroyed.
    pub branch: BranchRef,
    /// Its checkpoints removed.
    pub checkpoints_removed: usize,
    /// Files this host kept of it, removed.
    pub checkout_files_removed: usize,
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
}

/// Destroying a branch.
impl Engine {
    /// Remove a branch: its ref and its checkpoints (the working tree's `destroy` removes
    /// its checkout files too). Its data goes at the next `gc` that finds it unreachable.
    ///
    /// `files` are asked before the claim (unless `force`) and told after the ref is gone:
    /// [`StoreOnly`](crate::ops::moves::StoreOnly) when no host keeps files of the branch.
    pub fn destroy<G: WorkingFiles>(
        &self,
        b: &BranchRef,
        force: bool,
        files: &mut G,
    ) -> Result<DestroyReport, G::Error> {
        let now = self.store_time()?;
        let (_, claimed_etag) = self.update_ref_with(b, true, |r| -> Result<(), G::Error> {
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
            if !force && self.holds_only_recent_head_of_protected(b, r)? {
                return Err(EngineError::Protected {
                    branch: b.clone(),
                    action: "destroying the only recent copy of a protected branch's head",
                }
                .into());
            }
            self.check_not_leased(b, r, force)?;
            if !force {
                files.before_destroy(b, r)?;
            }
            // Claim first: from here on no operation moves or reads this branch.
            r.destroying_since = Some(now);
            Ok(())
        })?;
        self.finish_destroy(b, &claimed_etag, files)
    }

    /// Claim a branch for destruction only if it is still exactly in the state `etag`
    /// names (so a reaper never destroys a branch someone touched since it looked).
    pub(crate) fn reap<G: WorkingFiles>(
        &self,
        b: &BranchRef,
        r: &Ref,
        etag: &scion_store::ETag,
        files: &mut G,
    ) -> Result<Option<DestroyReport>, G::Error> {
        let mut claimed = r.clone();
        claimed.destroying_since = Some(self.store_time()?);
        match self.write_ref(b, &mut claimed, etag) {
            Ok(e) => self.finish_destroy(b, &e, files).map(Some),
            Err(EngineError::Conflict { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Everything after the claim: checkpoints, the ref, local files.
    pub(crate) fn finish_destroy<G: WorkingFiles>(
        &self,
        b: &BranchRef,
        claimed_etag: &scion_store::ETag,
        files: &mut G,
    ) -> Result<DestroyReport, G::Error> {
        // The history outlives the branch: `restore` brings it back while it lasts. An
        // ephemeral branch's goes with it, so gc reclaims its pages at once.
        match self.read_ref_any(b) {
            Ok((r, _)) if r.is_ephemeral() => self.forget_history(b)?,
            Ok((r, _)) => self.record_destroy(b, &r)?,
            Err(EngineError::BranchNotFound { .. } | EngineError::DatabaseNotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        let mut removed = self.delete_checkpoints(b)?;
        match self.backend.delete_if(&ref_key(b), claimed_etag) {
            Ok(()) | Err(StoreError::NotFound { .. }) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        // A checkpoint bound while the claim landed is removed too.
        removed += self.delete_checkpoints(b)?;
        let removed_files = files.after_destroy(b)?;
        Ok(DestroyReport {
            branch: b.clone(),
            checkpoints_removed: removed,
            checkout_files_removed: removed_files,
        })
    }

    fn delete_checkpoints(&self, b: &BranchRef) -> EngineResult<usize> {
        let list = self.backend.list(&checkpoints_prefix(b))?;
        for m in &list {
            self.backend.delete(&m.key)?;
        }
        Ok(list.len())
    }
}
