//! The working tree's side of a head move: a checkout holding changes is never stranded
//! by a rollback, promote, undo or restore, and a clean one follows the head. The engine
//! moves the ref; [`CheckoutFiles`] judges the file against the very ref the move replaces
//! before it moves, and refreshes the file after.

use std::path::PathBuf;

use super::files::DbFiles;
use super::sidecar::Sidecar;
use super::state::{refuse_unsaved, CheckoutState, Inspection};
use crate::error::{CoreError, CoreResult};
use crate::names::{BranchName, BranchRef, CheckpointName};
use crate::refs::Ref;
use crate::Scion;
use scion_engine::ops::lifecycle::{MoveOptions, MoveReport};
use scion_engine::ops::moves::WorkingFiles;
use scion_engine::sqlite_io;

/// This host's checkout files of a store, as the engine consults them when it moves,
/// rewrites, destroys or collects a branch ([`Scion::working_files`]): a checkout holding
/// changes is never stranded, and a clean one follows the head.
pub struct CheckoutFiles<'a> {
    scion: &'a Scion,
    judged: Option<Inspection>,
}

impl<'a> CheckoutFiles<'a> {
    pub(crate) fn of(scion: &'a Scion) -> Self {
        CheckoutFiles {
            scion,
            judged: None,
        }
    }
}

impl Scion {
    /// This host's checkout files, for an engine operation that takes
    /// [`WorkingFiles`] (a merge).
    pub fn working_files(&self) -> CheckoutFiles<'_> {
        CheckoutFiles::of(self)
    }
}

impl WorkingFiles for CheckoutFiles<'_> {
    type Error = CoreError;

    fn before(&mut self, b: &BranchRef, r: &Ref, force: bool) -> CoreResult<()> {
        // The checkout must be safe to replace before anything moves.
        let path: PathBuf = self.scion.checkout_path(b);
        let judged = self.scion.inspect(&path, &r.root)?;
        if !force {
            refuse_unsaved(&judged, &path, b)?;
        }
        // An open checkout is never rewritten under its connections (invariant 7). With
        // force the head moves anyway and the file is left stale for the next checkout.
        if !force && path.exists() && sqlite_io::in_use(&path)? {
            return Err(CoreError::CheckoutBusy { path });
        }
        self.judged = Some(judged);
        Ok(())
    }

    fn after(&mut self, b: &BranchRef, report: &mut MoveReport, force: bool) -> CoreResult<()> {
        let Some(judged) = self.judged.take() else {
            return Ok(());
        };
        if judged.state == CheckoutState::None {
            return Ok(());
        }
        // Refreshed with the caller's force, judged afresh: a write that landed in the
        // file while the head moved is never discarded without force. (With force, a
        // file not written since the judgement above is not hashed a second time.)
        match self.scion.checkout_judged(b, force, Some(judged)) {
            Ok(done) => {
                report.discarded_changes = matches!(
                    done.discarded,
                    Some(CheckoutState::Dirty | CheckoutState::Unknown)
                );
                report.checkout = Some(done.path.display().to_string());
            }
            Err(
                e @ (CoreError::DirtyCheckout { .. }
                | CoreError::StaleCheckout { .. }
                | CoreError::UnknownCheckout { .. }),
            ) => {
                report.warnings.push(format!(
                    "the checkout was left as it is, with changes made while the head moved ({e}); export them, then check {b} out again with force"
                ));
            }
            Err(CoreError::CheckoutBusy { path }) => {
                report.warnings.push(format!(
                    "the checkout {} is open in another connection, so it was left as it was (now stale: it holds the previous head); the next checkout of {b} once nobody holds it brings the new head",
                    path.display()
                ));
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }
    /// A checkout of `b` holding changes not checkpointed would be stranded by the move.
    fn refuse_unsaved(&mut self, b: &BranchRef, r: &Ref) -> CoreResult<()> {
        let path = || self.scion.checkout_path(b);
        match self.scion.checkout_state(b, &r.root)? {
            CheckoutState::Dirty => Err(CoreError::DirtyCheckout {
                path: path(),
                branch: b.clone(),
            }),
            CheckoutState::Unknown => Err(CoreError::UnknownCheckout {
                path: path(),
                branch: b.clone(),
            }),
            _ => Ok(()),
        }
    }

    fn before_rewrite(&mut self, b: &BranchRef, r: &Ref, force: bool) -> CoreResult<()> {
        let path = self.scion.checkout_path(b);
        let judged = self.scion.inspect(&path, &r.root)?;
        if !force {
            refuse_unsaved(&judged, &path, b)?;
        }
        self.judged = Some(judged);
        Ok(())
    }

    /// A clean checkout holds the same bytes: its record is pointed at the new root.
    fn after_rewrite(&mut self, b: &BranchRef, old: &Ref, new: &Ref) -> CoreResult<()> {
        if self.judged.take().map(|j| j.state) != Some(CheckoutState::Clean) {
            return Ok(());
        }
        let path = self.scion.checkout_path(b);
        if let Some(mut s) = Sidecar::load(&path, &old.root)? {
            s.root = new.root;
            s.version = new.version;
            s.store(&path)?;
        }
        Ok(())
    }

    fn before_destroy(&mut self, b: &BranchRef, r: &Ref) -> CoreResult<()> {
        let path = self.scion.checkout_path(b);
        if path.exists() && sqlite_io::in_use(&path)? {
            return Err(CoreError::CheckoutBusy { path });
        }
        refuse_unsaved(&self.scion.inspect(&path, &r.root)?, &path, b)
    }

    /// Remove the branch's checkout (journals before the database) and its read-only
    /// checkouts. The branch is already claimed for destruction, so they go even if a
    /// connection opened one since `destroy` checked.
    fn after_destroy(&mut self, b: &BranchRef) -> CoreResult<usize> {
        let scion = self.scion;
        let mut n = DbFiles::checkout(scion.checkout_path(b)).remove_all()?;
        let ro_dir = scion.read_only_dir(&b.db);
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

    /// An expired branch whose checkout is open or holds changes is still in use: its
    /// file is never deleted under a connection or with unsaved work.
    fn in_use(&mut self, b: &BranchRef, r: &Ref) -> CoreResult<bool> {
        let path = self.scion.checkout_path(b);
        let open = path.exists() && sqlite_io::in_use(&path)?;
        let state = self.scion.inspect(&path, &r.root)?.state;
        Ok(open || matches!(state, CheckoutState::Dirty | CheckoutState::Unknown))
    }

    /// Leftovers of interrupted checkouts: nothing still writes a temp file whose inode
    /// changed longer ago than `min_age`.
    fn sweep_leftovers(&mut self, min_age: std::time::Duration) -> CoreResult<(usize, u64)> {
        let (mut files, mut bytes) = (0, 0);
        for t in self.scion.temp_leftovers()? {
            let age = std::time::SystemTime::now()
                .duration_since(t.changed)
                .unwrap_or_default();
            if age >= min_age && std::fs::remove_file(&t.path).is_ok() {
                files += 1;
                bytes += t.size;
            }
        }
        Ok((files, bytes))
    }
}

/// The head moves of the working tree: the engine's, with this host's checkout of the
/// branch kept safe and brought along.
impl Scion {
    /// Repoint `b` at one of its checkpoints (or `fork`/`init`), as
    /// [`Engine::rollback`](crate::Engine::rollback) does, refusing to strand a checkout's
    /// changes (unless `force`) and refreshing a clean checkout.
    pub fn rollback(
        &self,
        b: &BranchRef,
        to: &CheckpointName,
        opts: &MoveOptions,
    ) -> CoreResult<MoveReport> {
        self.engine()
            .rollback(b, to, opts, &mut CheckoutFiles::of(self))
    }

    /// Repoint `onto` at the head of `source`, as
    /// [`Engine::promote`](crate::Engine::promote) does, keeping `onto`'s checkout safe.
    pub fn promote(
        &self,
        source: &BranchRef,
        onto: &BranchName,
        opts: &MoveOptions,
    ) -> CoreResult<MoveReport> {
        self.engine()
            .promote(source, onto, opts, &mut CheckoutFiles::of(self))
    }

    /// Publish a merge's result as `dst`'s head, as
    /// [`Engine::publish_merge`](crate::Engine::publish_merge) does, refusing to strand a
    /// checkout's changes and refreshing a clean checkout.
    pub fn publish_merge(
        &self,
        dst: &BranchRef,
        expect: &crate::ResolvedVersion,
        result: crate::format::Locator,
        merged: crate::history::MergedFrom,
        allow_protected: bool,
    ) -> CoreResult<MoveReport> {
        self.engine().publish_merge(
            dst,
            expect,
            result,
            merged,
            allow_protected,
            &mut CheckoutFiles::of(self),
        )
    }

    /// Undo `b`'s latest move, as [`Engine::undo`](crate::Engine::undo) does, keeping
    /// its checkout safe.
    pub fn undo(&self, b: &BranchRef, opts: &MoveOptions) -> CoreResult<MoveReport> {
        self.engine().undo(b, opts, &mut CheckoutFiles::of(self))
    }

    /// Put `b`'s head where entry `to` of its history left it (or bring a destroyed
    /// branch back), as [`Engine::restore`](crate::Engine::restore) does, keeping its
    /// checkout safe.
    pub fn restore(
        &self,
        b: &BranchRef,
        to: Option<u64>,
        opts: &MoveOptions,
    ) -> CoreResult<MoveReport> {
        self.engine()
            .restore(b, to, opts, &mut CheckoutFiles::of(self))
    }
}
