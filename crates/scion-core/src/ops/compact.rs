//! Compaction in the working tree: the engine's ([`Engine::compact`]), refusing to
//! strand a checkout's unsaved changes and pointing a clean checkout's record at the new
//! head; and the janitor's sweep of fragmented branches.
//!
//! [`Engine::compact`]: scion_engine::Engine::compact

use std::collections::{HashMap, HashSet};

use serde::Serialize;

pub use scion_engine::ops::compact::*;

use crate::checkout::CheckoutFiles;
use crate::error::{CoreError, CoreResult, EngineError};
use crate::format::Locator;
use crate::names::BranchRef;
use crate::Scion;

impl Scion {
    /// Rewrite a branch head into fresh segments in page order (full frames, no deltas),
    /// so that it reads sequentially and segments only older versions use can go.
    pub fn compact(&self, b: &BranchRef, force: bool) -> CoreResult<CompactReport> {
        self.compact_scope(b, force, CompactScope::All)
    }

    /// [`Scion::compact`] of what `scope` names, as
    /// [`Engine::compact`](scion_engine::Engine::compact) does it, keeping this
    /// host's checkout of the branch safe.
    pub fn compact_scope(
        &self,
        b: &BranchRef,
        force: bool,
        scope: CompactScope,
    ) -> CoreResult<CompactReport> {
        self.engine
            .compact(b, force, scope, &mut CheckoutFiles::of(self))
    }
}

/// When the janitor compacts a branch on its own (`Scion::compact_fragmented`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FragmentationPolicy {
    /// Compact when at least this share (0 to 1) of the head's pages lie in small segments.
    pub scattered_share: f64,
    /// ... and the head has not moved for this long: a writer mid-transaction on the
    /// branch would otherwise find the head moved under it at its commit.
    pub idle: std::time::Duration,
}

/// What one sweep of `compact_fragmented` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FragmentationSweep {
    /// Branches looked at.
    pub branches: usize,
    /// Branches compacted.
    pub compacted: Vec<CompactReport>,
    /// Fragmented past the share, but left alone: leased, holding unsaved changes in a
    /// checkout, or moved meanwhile (`branch: reason`).
    pub skipped: Vec<String>,
}

impl Scion {
    /// Compact (scattered pages only) every branch whose head is fragmented past
    /// `policy` and idle, never one under a live lease or with unsaved checkout changes.
    /// `judged` remembers heads already found not fragmented enough (branch to head root),
    /// so a daemon sweeping every round walks each head's page map once, not every round.
    pub fn compact_fragmented(
        &self,
        policy: FragmentationPolicy,
        judged: &mut HashMap<String, Locator>,
    ) -> CoreResult<FragmentationSweep> {
        let now = self.engine.store_clock()?.as_system_time();
        let mut sweep = FragmentationSweep::default();
        let mut seen = HashSet::new();
        for db in self.engine.list_databases()? {
            for (branch, r) in self.engine.list_branches(&db)? {
                if r.destroying_since.is_some() {
                    continue;
                }
                sweep.branches += 1;
                let b = BranchRef::new(db.clone(), branch);
                let key = b.to_string();
                seen.insert(key.clone());
                if judged.get(&key) == Some(&r.root) {
                    continue;
                }
                // Idle: no commit, fork or touch within the window (a fresh fork of an old
                // version is activity, though its head was made long ago).
                let root = self.engine.root_record(&r.root)?;
                let made_at = std::time::UNIX_EPOCH
                    + std::time::Duration::from_millis(
                        root.ancestry.as_ref().map_or(0, |a| a.made_at_ms),
                    );
                let last = made_at
                    .max(r.created_at.as_system_time())
                    .max(r.touched_at.as_system_time());
                if now.duration_since(last).unwrap_or_default() < policy.idle {
                    continue;
                }
                let f = self.engine.fragmentation(&r.root)?;
                if f.small_segments < 2 || f.scattered_share() < policy.scattered_share {
                    judged.insert(key, r.root);
                    continue;
                }
                match self.compact_scope(&b, false, CompactScope::Scattered) {
                    Ok(report) => sweep.compacted.push(report),
                    Err(e) if left_alone(&e) => sweep.skipped.push(format!("{b}: {e}")),
                    Err(e) => return Err(e),
                }
            }
        }
        // Branches gone since: forget them.
        judged.retain(|k, _| seen.contains(k));
        Ok(sweep)
    }
}

/// Refusals that mean "someone is using this branch": the sweep leaves it for later.
fn left_alone(e: &CoreError) -> bool {
    matches!(
        e,
        CoreError::DirtyCheckout { .. }
            | CoreError::UnknownCheckout { .. }
            | CoreError::CheckoutBusy { .. }
            | CoreError::Engine(
                EngineError::LeaseHeld { .. }
                    | EngineError::Conflict { .. }
                    | EngineError::BeingDestroyed { .. }
                    | EngineError::BranchNotFound { .. }
            )
    )
}
