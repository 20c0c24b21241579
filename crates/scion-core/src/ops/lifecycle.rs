//! Moving and removing branches: rollback, promote, destroy, protect, touch, and deleting
//! checkpoints. Each head move is one compare-and-swap of a root pointer; no page is copied.

use std::time::Duration;

use scion_store::StoreError;
use serde::Serialize;

use crate::checkout::{CheckoutState, DbFiles};
use crate::error::{CoreError, CoreResult};
use crate::format::Locator;
use crate::names::{BranchName, BranchRef, CheckpointName, Target};
use crate::refs::{
    checkpoint_key, checkpoints_prefix, ref_key, Parent, Ref, SafetyKind, SafetyMark,
};
use crate::sqlite_io;
use crate::Scion;

/// Safety forks live this long unless told otherwise.
pub const DEFAULT_BACKUP_TTL: Duration = Duration::from_secs(24 * 3600);

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
    pub version: u64,
    /// Version number of the head that was replaced.
    pub abandoned_version: u64,
    /// Where the replaced head was kept.
    pub safety_fork: Option<String>,
    /// The checkout was refreshed (path) or had uncheckpointed changes discarded.
    pub checkout: Option<String>,
    pub discarded_changes: bool,
    /// What went wrong after the head moved (the move itself stands).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DestroyReport {
    pub branch: String,
    pub checkpoints_removed: usize,
    pub checkout_files_removed: usize,
}

impl Scion {
    /// Repoint `b` at one of its checkpoints (or `fork`/`init`).
    pub fn rollback(
        &self,
        b: &BranchRef,
        to: &CheckpointName,
        opts: &MoveOptions,
    ) -> CoreResult<MoveReport> {
        let target = self.resolve(&Target {
            branch: b.clone(),
            checkpoint: Some(to.clone()),
        })?;
        let (r, etag) = self.read_ref(b)?;
        if opts.no_backup && r.protected && !opts.force {
            return Err(CoreError::Protected {
                branch: b.to_string(),
                action: "a rollback without a safety fork",
            });
        }
        self.move_head(
            b,
            r,
            etag,
            target.root,
            format!("{b}@{to}"),
            SafetyKind::PreRollback,
            opts,
        )
    }

    /// Repoint `onto` at the head of `source` (same database).
    pub fn promote(
        &self,
        source: &BranchRef,
        onto: &BranchName,
        opts: &MoveOptions,
    ) -> CoreResult<MoveReport> {
        let target_ref = BranchRef::new(source.db.clone(), onto.clone());
        let (src, _) = self.read_ref(source)?;
        let (r, etag) = self.read_ref(&target_ref)?;
        if r.protected && !opts.force {
            return Err(CoreError::Protected {
                branch: target_ref.to_string(),
                action: "promoting onto it",
            });
        }
        self.move_head(
            &target_ref,
            r,
            etag,
            src.root,
            source.to_string(),
            SafetyKind::PrePromote,
            opts,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn move_head(
        &self,
        b: &BranchRef,
        r: Ref,
        etag: scion_store::ETag,
        root: Locator,
        to: String,
        kind: SafetyKind,
        opts: &MoveOptions,
    ) -> CoreResult<MoveReport> {
        self.check_not_leased(b, &r, opts.force)?;
        // The checkout must be safe to replace before anything moves.
        let path = self.checkout_path(b);
        let judged = self.inspect(&path, &r.root)?;
        let state = judged.state;
        if matches!(state, CheckoutState::Dirty | CheckoutState::Unknown) && !opts.force {
            return Err(CoreError::DirtyCheckout {
                path,
                branch: b.to_string(),
            });
        }
        // An open checkout is never rewritten under its connections (invariant 7). With
        // force the head moves anyway and the file is left stale for the next checkout.
        if !opts.force && path.exists() && sqlite_io::in_use(&path)? {
            return Err(CoreError::CheckoutBusy { path });
        }
        let page_count = self.reader.root(&root)?.page_count;
        // The abandoned head is kept as a safety fork. A new fork is created before the
        // head moves (a move that then loses its race leaves a harmless fork of the head);
        // an earlier safety fork is replaced only once the move is certain, so a move that
        // loses its race never destroys an older backup.
        let ttl = opts.backup_ttl.unwrap_or(DEFAULT_BACKUP_TTL);
        let mut pending_replace = None;
        let mut safety_fork = None;
        if !opts.no_backup {
            let (fork, mut keep) = self.safety_fork_ref(b, &r, kind, ttl)?;
            match self.create_ref(&fork, &mut keep) {
                Ok(_) => safety_fork = Some(fork.to_string()),
                Err(CoreError::BranchExists { .. }) => {
                    // A branch of that name that is not a safety fork is never replaced:
                    // refuse before anything moves.
                    if self.read_ref_any(&fork)?.0.safety.is_none() {
                        return Err(CoreError::BranchExists {
                            branch: fork.to_string(),
                        });
                    }
                    pending_replace = Some((fork, keep));
                }
                Err(e) => return Err(e),
            }
        }
        let touched = self.store_time()?;
        let (next, _) = self.publish_head(b, &r, etag, None, |next| {
            next.root = root;
            next.version = r.version + 1;
            next.page_count = page_count;
            next.touched_at = touched;
        })?;
        let mut warnings = Vec::new();
        if let Some((fork, keep)) = pending_replace {
            match self.replace_safety_fork(&fork, keep) {
                Ok(()) => safety_fork = Some(fork.to_string()),
                Err(e) => warnings.push(format!(
                    "the replaced head (version {}) was not kept as a safety fork: {e}",
                    r.version
                )),
            }
        }
        let mut checkout = None;
        let mut discarded_changes = false;
        if state != CheckoutState::None {
            // Refreshed with the caller's force, judged afresh: a write that landed in the
            // file while the head moved is never discarded without force. (With force, a
            // file not written since the judgement above is not hashed a second time.)
            match self.checkout_judged(b, opts.force, Some(judged)) {
                Ok(report) => {
                    discarded_changes = matches!(
                        report.discarded,
                        Some(CheckoutState::Dirty | CheckoutState::Unknown)
                    );
                    checkout = Some(report.path.display().to_string());
                }
                Err(e @ (CoreError::DirtyCheckout { .. } | CoreError::UnknownCheckout { .. })) => {
                    warnings.push(format!(
                        "the checkout was left as it is, with changes made while the head moved ({e}); export them, then `scion checkout {b} --force`"
                    ));
                }
                Err(CoreError::CheckoutBusy { path }) => {
                    warnings.push(format!(
                        "the checkout {} is open in another connection, so it was left as it was (now stale: it holds the previous head); the next `scion checkout {b}` once nobody holds it brings the new head",
                        path.display()
                    ));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(MoveReport {
            branch: b.to_string(),
            to,
            version: next.version,
            abandoned_version: r.version,
            safety_fork,
            checkout,
            discarded_changes,
            warnings,
        })
    }

    /// The safety fork that keeps `r`'s head as `<branch>-<suffix>`.
    fn safety_fork_ref(
        &self,
        b: &BranchRef,
        r: &Ref,
        kind: SafetyKind,
        ttl: Duration,
    ) -> CoreResult<(BranchRef, Ref)> {
        let name = BranchName::new(&format!("{}-{}", b.branch, kind.suffix()))?;
        let fork = BranchRef::new(b.db.clone(), name);
        let now = self.store_time()?;
        let keep = Ref {
            schema: r.schema,
            root: r.root,
            version: r.version,
            page_size: r.page_size,
            page_count: r.page_count,
            fork_root: r.root,
            fork_version: r.version,
            init_root: r.init_root,
            parent: Some(Parent {
                branch: b.branch.to_string(),
                version: r.version,
                checkpoint: None,
            }),
            protected: false,
            created_at: now,
            touched_at: now,
            epoch: 0,
            lease: None,
            ttl_secs: Some(ttl.as_secs().max(1)),
            destroying_since: None,
            safety: Some(SafetyMark {
                kind,
                of: b.branch.to_string(),
            }),
            meta: Default::default(),
            nonce: Default::default(),
        };
        Ok((fork, keep))
    }

    /// Replace an earlier safety fork (one rolling slot per kind). A branch of that name
    /// that is not a safety fork, is leased by a live holder, or is being destroyed is
    /// never replaced.
    fn replace_safety_fork(&self, fork: &BranchRef, keep: Ref) -> CoreResult<()> {
        self.update_ref_with(fork, true, |old| {
            if old.safety.is_none() {
                return Err(CoreError::BranchExists {
                    branch: fork.to_string(),
                });
            }
            if old.destroying_since.is_some() {
                return Err(CoreError::BeingDestroyed {
                    branch: fork.to_string(),
                });
            }
            self.check_not_leased(fork, old, false)?;
            *old = keep.clone();
            Ok(())
        })?;
        Ok(())
    }

    /// Remove a branch: its ref, its checkpoints and its local checkout files. Its data
    /// goes at the next `gc` that finds it unreachable.
    pub fn destroy(&self, b: &BranchRef, force: bool) -> CoreResult<DestroyReport> {
        let now = self.store_time()?;
        let (_, claimed_etag) = self.update_ref_with(b, true, |r| {
            if r.destroying_since.is_some() {
                // Finishing an interrupted destroy.
                return Ok(());
            }
            if (r.protected || b.branch.as_str() == "main") && !force {
                return Err(CoreError::Protected {
                    branch: b.to_string(),
                    action: "destroying it",
                });
            }
            self.check_not_leased(b, r, force)?;
            let path = self.checkout_path(b);
            if !force {
                if path.exists() && sqlite_io::in_use(&path)? {
                    return Err(CoreError::CheckoutBusy { path });
                }
                crate::checkout::refuse_unsaved(self.inspect(&path, &r.root)?.state, &path, b)?;
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
        claimed.destroying_since = Some(self.store_time()?);
        match self.write_ref(b, &mut claimed, etag) {
            Ok(e) => self.finish_destroy(b, &e).map(Some),
            Err(CoreError::Conflict { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Everything after the claim: checkpoints, the ref, local files.
    pub(crate) fn finish_destroy(
        &self,
        b: &BranchRef,
        claimed_etag: &scion_store::ETag,
    ) -> CoreResult<DestroyReport> {
        let mut removed = self.delete_checkpoints(b)?;
        match self.backend.delete_if(&ref_key(b), claimed_etag) {
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
        let list = self.backend.list(&checkpoints_prefix(b))?;
        for m in &list {
            self.backend.delete(&m.key)?;
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

    pub fn set_protected(&self, b: &BranchRef, protected: bool) -> CoreResult<()> {
        self.update_ref(b, |r| {
            r.protected = protected;
            Ok(())
        })?;
        Ok(())
    }

    /// Reset the branch's activity clock, and set (`Some(Some(d))`) or clear
    /// (`Some(None)`) its TTL.
    pub fn touch(&self, b: &BranchRef, ttl: Option<Option<Duration>>) -> CoreResult<Ref> {
        let now = self.store_time()?;
        self.update_ref(b, |r| {
            r.touched_at = now;
            if let Some(t) = ttl {
                r.ttl_secs = t.map(|d| d.as_secs().max(1));
            }
            Ok(())
        })
    }

    pub fn delete_checkpoint(&self, b: &BranchRef, name: &CheckpointName) -> CoreResult<()> {
        if name.is_reserved() {
            return Err(CoreError::ReservedName {
                name: name.to_string(),
            });
        }
        self.read_ref(b)?;
        self.read_checkpoint(b, name)?;
        self.backend.delete(&checkpoint_key(b, name))?;
        Ok(())
    }

    /// Set a new branch's TTL right after forking it.
    pub fn set_ttl(&self, b: &BranchRef, ttl: Duration) -> CoreResult<()> {
        self.touch(b, Some(Some(ttl))).map(drop)
    }
}
