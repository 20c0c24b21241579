//! Leases: the exclusive, expiring right to move a branch's head. Stored in the ref, so
//! taking one is a compare-and-swap that also bumps the branch's epoch; expiry is judged by
//! the store's clock.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::clock::StoreTime;
use crate::error::{EngineError, EngineResult};
use crate::names::BranchRef;
use crate::refs::{Lease, Ref};
use crate::Engine;
use scion_store::ETag;

/// How long an at-rest operation (a checkpoint) holds the lease it takes for itself.
pub(crate) const OPERATION_LEASE: Duration = Duration::from_secs(120);

/// A branch's lease as `lease list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LeaseInfo {
    /// The leased branch.
    pub branch: BranchRef,
    /// Who holds it.
    pub holder: String,
    /// The ref's epoch it was taken at.
    pub epoch: u64,
    /// When it ends (store clock).
    pub expires: StoreTime,
    /// Whether it has not ended yet.
    pub live: bool,
}

/// Whether `lease` is still in force at `now` (the store's clock).
pub fn is_live(lease: &Lease, now: SystemTime) -> bool {
    lease.expires.as_system_time() > now
}

/// A holder named like the default (`host:boot:pidns/pid`) whose process no longer exists
/// holds nothing: a killed command must not block its branch until the lease expires. Only
/// a holder from this very boot and pid namespace can be judged so; holders on other hosts
/// or containers (even with the same host name) and names set with `--holder` are trusted
/// until expiry.
fn holder_is_dead(holder: &str) -> bool {
    // A holder acting for a part of its process (`…/pid#session`) dies with the process.
    let holder = holder
        .split_once('#')
        .map_or(holder, |(process, _)| process);
    let Some((place, pid)) = holder.rsplit_once('/') else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    let this = crate::engine::default_holder();
    let this_place = this.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
    place == this_place && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// What [`Engine::lease`] does with a branch's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseChange {
    /// Take the lease (or take it again) for `ttl`. Every acquisition bumps the branch's
    /// epoch, fencing any earlier holder.
    Acquire {
        /// How long it lasts (store clock).
        ttl: Duration,
    },
    /// Extend the holder's lease by `ttl` from now without a new epoch (the holder's
    /// pending commits stay valid), and touch the branch.
    Renew {
        /// The epoch the holder took the lease at.
        epoch: u64,
        /// How long it lasts from now.
        ttl: Duration,
    },
    /// Give the lease up. An expired lease, or one whose holder's process is gone, is
    /// released whoever held it; another holder's live lease only with `force` (which
    /// fences that holder: its next commit loses its compare-and-swap).
    Release {
        /// Release another holder's live lease too.
        force: bool,
    },
}

/// What [`Engine::lease`] left: the lease and the branch's ref after the change.
#[derive(Debug, Clone)]
pub struct LeaseOutcome {
    /// The lease in force after an acquisition or renewal; the lease given up by a release
    /// (`None` when the branch had none).
    pub lease: Option<LeaseInfo>,
    /// The branch's ref as the change wrote it: the base for the holder's next commit.
    pub head: Ref,
    /// The ref's tag, for that commit's compare-and-swap.
    pub tag: ETag,
}

/// Refuse if anyone but `holder` holds a live lease on `r` whose process may still be there.
/// The store's clock is read only for such a lease: a VFS write checks this at the start
/// of every transaction, and most branches carry no lease.
fn refuse_other_holder(
    b: &BranchRef,
    r: &Ref,
    holder: &str,
    now: impl FnOnce() -> EngineResult<StoreTime>,
) -> EngineResult<()> {
    let Some(l) = r.lease.as_ref().filter(|l| l.holder != holder) else {
        return Ok(());
    };
    if is_live(l, now()?.as_system_time()) && !holder_is_dead(&l.holder) {
        return Err(EngineError::LeaseHeld {
            branch: b.clone(),
            holder: l.holder.clone(),
            expires: l.expires.to_string(),
        });
    }
    Ok(())
}

impl Engine {
    /// Refuse if someone other than this process holds a live lease on `r`.
    pub(crate) fn check_not_leased(&self, b: &BranchRef, r: &Ref, force: bool) -> EngineResult<()> {
        if force {
            return Ok(());
        }
        refuse_other_holder(b, r, self.holder(), || self.store_time())
    }

    /// Refuse if anyone but `holder` holds a live lease on `r`: what a writer that takes no
    /// lease of its own (a VFS transaction, fenced by its commit's compare-and-swap) checks
    /// before it starts, so sessions and at-rest operations keep their branch.
    pub fn check_lease_free_for(&self, b: &BranchRef, r: &Ref, holder: &str) -> EngineResult<()> {
        refuse_other_holder(b, r, holder, || self.store_time())
    }

    /// Whether this process already holds a live lease on `r` (taken before the operation).
    pub(crate) fn holds_lease(&self, r: &Ref) -> EngineResult<bool> {
        Ok(match &r.lease {
            Some(l) => l.holder == self.holder() && is_live(l, self.store_now()?),
            None => false,
        })
    }

    /// Change `holder`'s lease on `b` (see [`LeaseChange`]): the one way a lease is taken,
    /// kept or given up. `holder` is usually [`Engine::holder`], or a part of this process
    /// (a daemon's session: `<default holder>#<session>`). Another holder's live lease
    /// refuses an acquisition and a release without `force` ([`EngineError::LeaseHeld`]);
    /// a renewal of a lease that changed hands or epoch is an [`EngineError::Conflict`]
    /// (the holder has been fenced).
    pub fn lease(
        &self,
        b: &BranchRef,
        holder: &str,
        change: LeaseChange,
    ) -> EngineResult<LeaseOutcome> {
        let now = self.store_time()?;
        let mut released = None;
        let (head, tag) = self.update_ref_with(b, false, |r| {
            match change {
                LeaseChange::Acquire { ttl } => {
                    refuse_other_holder(b, r, holder, || Ok(now))?;
                    r.epoch += 1;
                    r.lease = Some(Lease {
                        holder: holder.to_string(),
                        epoch: r.epoch,
                        expires: now.saturating_add(ttl),
                    });
                }
                LeaseChange::Renew { epoch, ttl } => match &mut r.lease {
                    Some(l) if l.holder == holder && l.epoch == epoch => {
                        l.expires = now.saturating_add(ttl);
                        // A held branch is in use: its TTL counts from the last renewal.
                        r.touched_at = now;
                    }
                    _ => return Err(EngineError::Conflict { branch: b.clone() }),
                },
                LeaseChange::Release { force } => {
                    if !force {
                        refuse_other_holder(b, r, holder, || Ok(now))?;
                    }
                    released = r.lease.take();
                }
            }
            Ok(())
        })?;
        let info = |l: &Lease, live: bool| LeaseInfo {
            branch: b.clone(),
            holder: l.holder.clone(),
            epoch: l.epoch,
            expires: l.expires,
            live,
        };
        let lease = match change {
            LeaseChange::Release { .. } => released.as_ref().map(|l| info(l, false)),
            _ => head.lease.as_ref().map(|l| info(l, true)),
        };
        Ok(LeaseOutcome { lease, head, tag })
    }

    /// Every branch that carries a lease, live or expired.
    pub fn lease_list(&self) -> EngineResult<Vec<LeaseInfo>> {
        let now = self.store_now()?;
        let mut out = Vec::new();
        for db in self.list_databases()? {
            for (branch, r) in self.list_branches(&db)? {
                if let Some(l) = r.lease {
                    out.push(LeaseInfo {
                        branch: BranchRef::new(db.clone(), branch),
                        live: is_live(&l, now) && !holder_is_dead(&l.holder),
                        holder: l.holder,
                        epoch: l.epoch,
                        expires: l.expires,
                    });
                }
            }
        }
        Ok(out)
    }
}
