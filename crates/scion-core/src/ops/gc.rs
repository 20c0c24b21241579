//! Garbage collection in the working tree: the engine's reap and mark-and-sweep
//! ([`Engine::gc`](scion_engine::Engine::gc)), keeping branches whose checkout is
//! open or holds changes, and sweeping the leftovers of interrupted checkouts.

use std::time::Duration;

pub use scion_engine::ops::gc::*;

use crate::checkout::CheckoutFiles;
use crate::error::CoreResult;
use crate::Scion;

impl Scion {
    /// Reap branches whose TTL passed (keeping, and touching, those whose checkout is open
    /// or holds changes) and finish interrupted destroys: the first step of `gc`, cheap
    /// enough to run on its own on a schedule.
    pub fn reap_expired(&self) -> CoreResult<ReapReport> {
        self.engine.reap_expired(&mut CheckoutFiles::of(self))
    }

    /// Reap expired branches, finish interrupted destroys, then mark and sweep, and remove
    /// what interrupted checkouts left behind. A grace below the store's minimum needs
    /// `force`: a commit slower than half of it could otherwise lose a segment it is about
    /// to publish.
    pub fn gc(&self, grace: Duration, force: bool) -> CoreResult<GcReport> {
        self.engine.gc(grace, force, &mut CheckoutFiles::of(self))
    }
}
