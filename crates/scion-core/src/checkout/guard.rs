//! The working tree's side of a head move: a checkout holding changes is never stranded
//! by a rollback, promote, undo or restore, and a clean one follows the head. The engine
//! moves the ref; [`CheckoutGuard`] judges the file against the very ref the move replaces
//! before it moves, and refreshes the file after.

use std::path::PathBuf;

use super::state::{refuse_unsaved, CheckoutState, Inspection};
use crate::error::{CoreError, CoreResult};
use crate::names::{BranchName, BranchRef, CheckpointName};
use crate::ops::lifecycle::{MoveOptions, MoveReport};
use crate::ops::moves::MoveGuard;
use crate::refs::Ref;
use crate::{sqlite_io, Scion};

/// Keeps `scion`'s checkout of the moving branch safe.
pub(crate) struct CheckoutGuard<'a> {
    scion: &'a Scion,
    judged: Option<Inspection>,
}

impl<'a> CheckoutGuard<'a> {
    pub(crate) fn of(scion: &'a Scion) -> Self {
        CheckoutGuard {
            scion,
            judged: None,
        }
    }
}

impl MoveGuard for CheckoutGuard<'_> {
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
                    "the checkout was left as it is, with changes made while the head moved ({e}); export them, then `scion checkout {b} --force`"
                ));
            }
            Err(CoreError::CheckoutBusy { path }) => {
                report.warnings.push(format!(
                    "the checkout {} is open in another connection, so it was left as it was (now stale: it holds the previous head); the next `scion checkout {b}` once nobody holds it brings the new head",
                    path.display()
                ));
            }
            Err(e) => return Err(e),
        }
        Ok(())
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
            .rollback_with(b, to, opts, &mut CheckoutGuard::of(self))
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
            .promote_with(source, onto, opts, &mut CheckoutGuard::of(self))
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
        self.engine().publish_merge_with(
            dst,
            expect,
            result,
            merged,
            allow_protected,
            &mut CheckoutGuard::of(self),
        )
    }

    /// Undo `b`'s latest move, as [`Engine::undo`](crate::Engine::undo) does, keeping
    /// its checkout safe.
    pub fn undo(&self, b: &BranchRef, opts: &MoveOptions) -> CoreResult<MoveReport> {
        self.engine()
            .undo_with(b, opts, &mut CheckoutGuard::of(self))
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
            .restore_with(b, to, opts, &mut CheckoutGuard::of(self))
    }
}
