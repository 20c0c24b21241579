//! Moving a branch's head to a version it or its history names: rollback, promote (and,
//! in `history.rs`, undo and restore). Each move is one compare-and-swap of a root pointer,
//! recorded in the head history; no page is copied. The engine moves refs only: a caller
//! with files that follow the head (the working tree's checkouts) passes its [`WorkingFiles`].

use std::time::Duration;

use serde::Serialize;

use crate::error::{EngineError, EngineResult};
use crate::format::{Locator, Parents};
use crate::history::{HeadMove, HeadOp, MergedFrom};
use crate::names::{BranchName, BranchRef, CheckpointName, Target};
use crate::refs::{Parent, Ref, SafetyKind, SafetyMark};
use crate::{Engine, ResolvedVersion};

/// Safety forks live this long unless told otherwise.
pub(crate) const DEFAULT_BACKUP_TTL: Duration = Duration::from_secs(24 * 3600);

/// How a head move may go: what it may override, and whether it keeps a safety fork.
#[derive(Debug, Clone, Default)]
pub struct MoveOptions {
    /// Override protection, another holder's lease, and uncheckpointed changes.
    pub force: bool,
    /// Keep no safety fork (a protected branch then also needs `force`).
    pub no_backup: bool,
    /// How long the safety fork lives (a day unless set).
    pub backup_ttl: Option<Duration>,
}

/// What a head move did.
#[derive(Debug, Clone, Serialize)]
pub struct MoveReport {
    /// The branch moved.
    pub branch: BranchRef,
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
    /// The checkout's changes never checkpointed were discarded (a forced move).
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

/// The files a host keeps of the store's branches (the working tree's checkouts), which
/// the engine consults before it moves, destroys or collects a branch, and brings along
/// after. Every method but the two around a head move has a default that keeps nothing.
pub trait WorkingFiles {
    /// What the files can refuse or fail with, the engine's own errors included.
    type Error: From<EngineError> + From<scion_store::StoreError>;
    /// Before `b`'s head moves from `r`: refuse the move, or get ready for [`Self::after`].
    fn before(&mut self, b: &BranchRef, r: &Ref, force: bool) -> Result<(), Self::Error>;
    /// After it moved: bring along what follows the head, and say so in `report`.
    fn after(
        &mut self,
        b: &BranchRef,
        report: &mut MoveReport,
        force: bool,
    ) -> Result<(), Self::Error>;
    /// Before `b` (read as `r`) is claimed for destruction: refuse it while its files are
    /// open or hold changes (never asked with `force`).
    fn before_destroy(&mut self, b: &BranchRef, r: &Ref) -> Result<(), Self::Error> {
        self.before(b, r, false)
    }
    /// Refuse while `b`'s files (the branch read as `r`) hold changes never checkpointed:
    /// what work that moves the head only at its end (a merge) checks before it starts.
    fn refuse_unsaved(&mut self, b: &BranchRef, r: &Ref) -> Result<(), Self::Error> {
        self.before(b, r, false)
    }
    /// Before `b`'s head (read as `r`) is rewritten into new segments holding the same
    /// bytes (compaction): refuse it while the files hold changes never checkpointed.
    fn before_rewrite(&mut self, b: &BranchRef, r: &Ref, force: bool) -> Result<(), Self::Error> {
        self.before(b, r, force)
    }
    /// After the rewrite moved `b`'s head from `old` to `new`: files that held the old
    /// version hold the new one, byte for byte.
    fn after_rewrite(&mut self, _b: &BranchRef, _old: &Ref, _new: &Ref) -> Result<(), Self::Error> {
        Ok(())
    }
    /// After `b`'s ref is gone: remove the files kept of it, and say how many there were.
    fn after_destroy(&mut self, _b: &BranchRef) -> Result<usize, Self::Error> {
        Ok(0)
    }
    /// Whether `b`'s files are in use (open, or holding changes), so an expired branch is
    /// kept, its TTL counting again from now.
    fn in_use(&mut self, _b: &BranchRef, _r: &Ref) -> Result<bool, Self::Error> {
        Ok(false)
    }
    /// Remove leftovers of interrupted operations whose inode changed at least `min_age`
    /// ago; the files and bytes removed.
    fn sweep_leftovers(&mut self, _min_age: Duration) -> Result<(usize, u64), Self::Error> {
        Ok((0, 0))
    }
}

/// No files on this host: the engine alone. A branch with a recorded checkout is refused
/// without `force`: the engine cannot bring that file along, and its changes would be
/// stranded on the old head.
pub struct StoreOnly;

impl WorkingFiles for StoreOnly {
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
    ///
    /// `files` are asked before the head moves and told after: [`StoreOnly`] when no host's
    /// files follow the branch, the working tree's checkouts otherwise.
    pub fn rollback<G: WorkingFiles>(
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
    ///
    /// `files` are asked before the head moves and told after: [`StoreOnly`] when no host's
    /// files follow the branch, the working tree's checkouts otherwise.
    pub fn promote<G: WorkingFiles>(
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
    ///
    /// `files` are asked before the head moves and told after: [`StoreOnly`] when no host's
    /// files follow the branch, the working tree's checkouts otherwise.
    pub fn publish_merge<G: WorkingFiles>(
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
    pub(crate) fn move_head<G: WorkingFiles>(
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
                    "no safety fork was made ({e}); the replaced head (version {}) is in the branch's head history",
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
            branch: b.clone(),
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
