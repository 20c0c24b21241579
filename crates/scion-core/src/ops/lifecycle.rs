//! Moving and removing branches: rollback, promote, destroy, protect, touch, and deleting
//! checkpoints. Each head move is one compare-and-swap of a root pointer; no page is copied.

use std::time::Duration;

use scion_store::StoreError;
use serde::Serialize;

use crate::checkout::{CheckoutState, DbFiles};
use crate::error::{CoreError, CoreResult};
use crate::format::Locator;
use crate::history::{HeadMove, HeadOp};
use crate::names::{BranchName, BranchRef, CheckpointName, Target};
use crate::refs::{
    checkpoint_key, checkpoints_prefix, ref_key, Parent, Ref, SafetyKind, SafetyMark,
};
use crate::sqlite_io;
use crate::Scion;

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
    /// Repoint `b` at one of its checkpoints (or `fork`/`init`). A protected branch needs
    /// `force`: the move is undoable (`undo`), but an agent must not make it unasked.
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
        if r.protected && !opts.force {
            return Err(CoreError::Protected {
                branch: b.to_string(),
                action: "rolling it back",
            });
        }
        self.move_head(
            b,
            r,
            etag,
            HeadTarget {
                root: target.root,
                version: target.version,
                to: format!("{b}@{to}"),
                mv: HeadMove::with_detail(HeadOp::Rollback, format!("{b}@{to}")),
                safety: Some(SafetyKind::PreRollback),
            },
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
            HeadTarget {
                root: src.root,
                version: src.version,
                to: source.to_string(),
                mv: HeadMove::with_detail(HeadOp::Promote, source.to_string()),
                safety: Some(SafetyKind::PrePromote),
            },
            opts,
        )
    }

    /// Move `b`'s head (read as `r` with `etag`) to `target.root`, recorded in its history.
    pub(crate) fn move_head(
        &self,
        b: &BranchRef,
        r: Ref,
        etag: scion_store::ETag,
        target: HeadTarget,
        opts: &MoveOptions,
    ) -> CoreResult<MoveReport> {
        let HeadTarget {
            root,
            version: to_version,
            to,
            mv,
            safety,
        } = target;
        self.check_not_leased(b, &r, opts.force)?;
        // The checkout must be safe to replace before anything moves.
        let path = self.checkout_path(b);
        let judged = self.inspect(&path, &r.root)?;
        let state = judged.state;
        if !opts.force {
            crate::checkout::refuse_unsaved(&judged, &path, b)?;
        }
        // An open checkout is never rewritten under its connections (invariant 7). With
        // force the head moves anyway and the file is left stale for the next checkout.
        if !opts.force && path.exists() && sqlite_io::in_use(&path)? {
            return Err(CoreError::CheckoutBusy { path });
        }
        let page_count = self.reader.root(&root)?.page_count;
        // The abandoned head is in the history; a safety fork names it too, for people and
        // scripts, under a name of its own (never one an earlier move used). It is made
        // before the head moves: a move that then loses its race leaves a harmless fork.
        let ttl = opts.backup_ttl.unwrap_or(DEFAULT_BACKUP_TTL);
        let mut warnings = Vec::new();
        let mut safety_fork = None;
        if let Some(kind) = safety.filter(|_| !opts.no_backup) {
            match self.create_safety_fork(b, &r, kind, ttl) {
                Ok(fork) => safety_fork = Some(fork.to_string()),
                // A store that fails the write fails the move, before anything moved.
                Err(e) if !matches!(e, CoreError::BranchExists { .. }) => return Err(e),
                Err(e) => warnings.push(format!(
                    "no safety fork was made ({e}); the replaced head (version {}) is in the history: `scion log {b}`",
                    r.version
                )),
            }
        }
        let touched = self.store_time()?;
        let (next, _) = self.publish_head(b, &r, etag, None, &mv, |next| {
            next.root = root;
            next.version = r.version + 1;
            next.page_count = page_count;
            next.touched_at = touched;
            Ok(())
        })?;
        let history_entry = next.history.last().map_or(0, |e| e.seq);
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
                Err(
                    e @ (CoreError::DirtyCheckout { .. }
                    | CoreError::StaleCheckout { .. }
                    | CoreError::UnknownCheckout { .. }),
                ) => {
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
            to_version,
            version: next.version,
            abandoned_version: r.version,
            history_entry,
            revived: false,
            safety_fork,
            protected: next.protected,
            checkout,
            discarded_changes,
            warnings,
        })
    }

    /// Make the safety fork that keeps `r`'s head: `<branch>-<suffix>-v<version>`, or with
    /// `-2`, `-3`, ... after it when that name is taken. An existing branch is never
    /// replaced.
    fn create_safety_fork(
        &self,
        b: &BranchRef,
        r: &Ref,
        kind: SafetyKind,
        ttl: Duration,
    ) -> CoreResult<BranchRef> {
        let base = format!("{}-{}-v{}", b.branch, kind.suffix(), r.version);
        let mut last = None;
        for n in 1..=8 {
            let name = if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            let (fork, mut keep) = self.safety_fork_ref(b, &name, r, kind, ttl)?;
            match self.create_ref(&fork, &mut keep) {
                Ok(_) => return Ok(fork),
                Err(e @ CoreError::BranchExists { .. }) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("at least one name was tried"))
    }

    /// The safety fork named `name` that keeps `r`'s head.
    fn safety_fork_ref(
        &self,
        b: &BranchRef,
        name: &str,
        r: &Ref,
        kind: SafetyKind,
        ttl: Duration,
    ) -> CoreResult<(BranchRef, Ref)> {
        let name = BranchName::new(name)?;
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
            history: Vec::new(),
            history_before: None,
            checkouts: Vec::new(),
            nonce: Default::default(),
        };
        Ok((fork, keep))
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
            if !force && self.holds_only_recent_head_of_protected(b, r)? {
                return Err(CoreError::Protected {
                    branch: b.to_string(),
                    action: "destroying the only recent copy of a protected branch's head",
                });
            }
            self.check_not_leased(b, r, force)?;
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
        // The history outlives the branch: `restore` brings it back while it lasts.
        match self.read_ref_any(b) {
            Ok((r, _)) => self.record_destroy(b, &r)?,
            Err(CoreError::BranchNotFound { .. } | CoreError::DatabaseNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
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

    /// Whether `r` is a safety fork of a protected branch whose history (within the
    /// store's retention) does not name `r`'s head: destroying it would leave that head to
    /// the next `gc`. Stores written before the head history have such forks.
    fn holds_only_recent_head_of_protected(&self, b: &BranchRef, r: &Ref) -> CoreResult<bool> {
        let Some(mark) = &r.safety else {
            return Ok(false);
        };
        let Ok(of_name) = BranchName::new(&mark.of) else {
            return Ok(false);
        };
        let of = BranchRef::new(b.db.clone(), of_name);
        let of_ref = match self.read_ref_any(&of) {
            Ok((of_ref, _)) => of_ref,
            Err(CoreError::BranchNotFound { .. } | CoreError::DatabaseNotFound { .. }) => {
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
