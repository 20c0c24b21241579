//! `destroy` in the working tree: the engine's, refusing a branch whose checkout is open
//! or holds changes, and removing its checkout files.

use scion_engine::ops::lifecycle::DestroyReport;

use crate::checkout::CheckoutFiles;
use crate::error::CoreResult;
use crate::names::BranchRef;
use crate::Scion;

impl Scion {
    /// Remove a branch: its ref, its checkpoints and its local checkout files. Its data
    /// goes at the next `gc` that finds it unreachable.
    pub fn destroy(&self, b: &BranchRef, force: bool) -> CoreResult<DestroyReport> {
        self.engine.destroy(b, force, &mut CheckoutFiles::of(self))
    }
}
