//! Moving a branch's head to a version it or its history names: rollback, promote (and,
//! in `history.rs`, undo and restore). Each move is one compare-and-swap of a root pointer,
//! recorded in the head history; no page is copied. The engine moves refs only: a caller
//! with files that follow the head (the working tree's checkouts) passes a [`MoveGuard`].

use std::time::Duration;

use crate::error::{EngineError, EngineResult};
use crate::format::{Locator, Parents};
use crate::history::{HeadMove, HeadOp, MergedFrom};
use crate::names::{BranchName, BranchRef, CheckpointName, Target};
use crate::ops::lifecycle::{HeadTarget, MoveOptions, MoveReport, DEFAULT_BACKUP_TTL};
use crate::refs::{Parent, Ref, SafetyKind, SafetyMark};
use crate::{Engine, ResolvedVersion};

/// What else must hold, and follow, when a head moves.
pub(crate) trait MoveGuard {
    /// What the guard can refuse or fail with, the engine's own errors included.
    type Error: From<EngineError>;
    /// Before `b`'s head moves from `r`: refuse the move, or get ready for [`Self::after`].
    fn before(&mut self, b: &BranchRef, r: &Ref, force: bool) -> Result<(), Self::Error>;
    /// After it moved: bring along what follows the head, and say so in `report`.
    fn after(
        &mut self,
        b: &BranchRef,
        report: &mut MoveReport,
        force: bool,
    ) -> Result<(), Self::Error>;
}

/// Nothing follows the head: the engine's own moves. A branch with a recorded checkout
/// is refused without `force`: the engine cannot bring that file along, and its changes
/// would be stranded on the old head.
pub(crate) struct StoreOnly;

impl MoveGuard for StoreOnly {
    type Error = EngineError;

    fn before(&mut self, b: &BranchRef, r: &Ref, force: bool) -> EngineResult<()> {
        if force {
            return Ok(());
        }
        crate::ops::pages::refuse_checked_out(b, r)
    }

    fn after(&mut self, _: &BranchRef, _: &mut MoveReport, _: bool) -> EngineResult<()> {
        Ok(())
    }
}

impl Engine {
    /// Repoint `b` at one of its checkpoints (or `fork`/`init`). A protected branch needs
    /// `force`: the move is undoable (`undo`), but an agent must not make it unasked.
    pub fn rollback(
        &self,
        b: &BranchRef,
        to: &CheckpointName,
        opts: &MoveOptions,
    ) -> EngineResult<MoveReport> {
        self.rollback_with(b, to, opts, &mut StoreOnly)
    }

    /// [`Engine::rollback`], with `guard` told before and after the head moves.
    pub(crate) fn rollback_with<G: MoveGuard>(
        &self,
        b: &BranchRef,
        to: &CheckpointName,
        opts: &MoveOptions,
        guard: &mut G,
    ) -> Result<MoveReport, G::Error> {
        let target = self.resolve(&Target {
            branch: b.clone(),
            checkpoint: Some(to.clone()),
        })?;
        let (r, etag) = self.read_ref(b)?;
        if r.protected && !opts.force {
            return Err(EngineError::Protected {
                branch: b.clone(),
                action: "rolling it back",
            }
            .into());
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
            guard,
        )
    }

    /// Repoint `onto` at the head of `source` (same database).
    pub fn promote(
        &self,
        source: &BranchRef,
        onto: &BranchName,
        opts: &MoveOptions,
    ) -> EngineResult<MoveReport> {
        self.promote_with(source, onto, opts, &mut StoreOnly)
    }

    /// [`Engine::promote`], with `guard` told before and after the head moves.
    pub(crate) fn promote_with<G: MoveGuard>(
        &self,
        source: &BranchRef,
        onto: &BranchName,
        opts: &MoveOptions,
        guard: &mut G,
    ) -> Result<MoveReport, G::Error> {
        let target_ref = BranchRef::new(source.db.clone(), onto.clone());
        let (src, _) = self.read_ref(source)?;
        let (r, etag) = self.read_ref(&target_ref)?;
        if r.protected && !opts.force {
            return Err(EngineError::Protected {
                branch: target_ref.clone(),
                action: "promoting onto it",
            }
            .into());
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
            guard,
        )
    }

    /// Publish a merge's result as `dst`'s head, only if the head is still `expect` (the
    /// version the merge read as ours): one compare-and-swap, recorded in the history with
    /// what was merged. A protected `dst` needs `allow_protected`; a lease or a checkout
    /// holding changes refuses it either way.
    pub fn publish_merge(
        &self,
        dst: &BranchRef,
        expect: &ResolvedVersion,
        result: Locator,
        merged: MergedFrom,
        allow_protected: bool,
    ) -> EngineResult<MoveReport> {
        self.publish_merge_with(dst, expect, result, merged, allow_protected, &mut StoreOnly)
    }

    /// [`Engine::publish_merge`], with `guard` told before and after the head moves.
    pub(crate) fn publish_merge_with<G: MoveGuard>(
        &self,
        dst: &BranchRef,
        expect: &ResolvedVersion,
        result: Locator,
        merged: MergedFrom,
        allow_protected: bool,
        guard: &mut G,
    ) -> Result<MoveReport, G::Error> {
        let (r, etag) = self.read_ref(dst)?;
        if r.root != expect.root || r.version != expect.version {
            return Err(EngineError::Conflict {
                branch: dst.clone(),
            }
            .into());
        }
        if r.protected && !allow_protected {
            return Err(EngineError::Protected {
                branch: dst.clone(),
                action: "merging into it",
            }
            .into());
        }
        let from = format!("{}@{}", dst.db, merged.branch);
        // A fast-forward names the source's own version; any other merge gets a version
        // of its own, whose parents are both sides.
        let result = if result == merged.root {
            result
        } else {
            self.seal_root_with_parents(&result, Parents::Two(expect.root, merged.root))?
        };
        let mv = HeadMove {
            op: HeadOp::Merge,
            detail: Some(from.clone()),
            undoes: None,
            merged: Some(merged),
        };
        let target = HeadTarget {
            root: result,
            version: r.version + 1,
            to: format!("{from} merged into {dst}"),
            mv,
            safety: None,
        };
        self.move_head(dst, r, etag, target, &MoveOptions::default(), guard)
    }

    /// Move `b`'s head (read as `r` with `etag`) to `target.root`, recorded in its history.
    pub(crate) fn move_head<G: MoveGuard>(
        &self,
        b: &BranchRef,
        r: Ref,
        etag: scion_store::ETag,
        target: HeadTarget,
        opts: &MoveOptions,
        guard: &mut G,
    ) -> Result<MoveReport, G::Error> {
        let HeadTarget {
            root,
            version: to_version,
            to,
            mv,
            safety,
        } = target;
        self.check_not_leased(b, &r, opts.force)?;
        guard.before(b, &r, opts.force)?;
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
                Err(e) if !matches!(e, EngineError::BranchExists { .. }) => return Err(e.into()),
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
        let mut report = MoveReport {
            branch: b.to_string(),
            to,
            to_version,
            version: next.version,
            abandoned_version: r.version,
            history_entry,
            revived: false,
            ttl_secs: None,
            undid_entry: None,
            safety_fork,
            protected: next.protected,
            checkout: None,
            discarded_changes: false,
            warnings,
        };
        guard.after(b, &mut report, opts.force)?;
        Ok(report)
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
    ) -> EngineResult<BranchRef> {
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
                Err(e @ EngineError::BranchExists { .. }) => last = Some(e),
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
    ) -> EngineResult<(BranchRef, Ref)> {
        let name = BranchName::new(name)?;
        let fork = BranchRef::new(b.db.clone(), name);
        let now = self.store_time()?;
        let mut keep = Ref {
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
        // The head it keeps was the owner's: so is the safety fork.
        keep.set_owner(r.owner().as_ref());
        Ok((fork, keep))
    }
}
