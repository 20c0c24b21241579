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

impl Engine {
    /// Refuse if someone other than this process holds a live lease on `r`.
    pub(crate) fn check_not_leased(&self, b: &BranchRef, r: &Ref, force: bool) -> EngineResult<()> {
        if force {
            return Ok(());
        }
        if let Some(l) = &r.lease {
            if l.holder != self.holder()
                && is_live(l, self.store_now()?)
                && !holder_is_dead(&l.holder)
            {
                return Err(EngineError::LeaseHeld {
                    branch: b.clone(),
                    holder: l.holder.clone(),
                    expires: l.expires.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Refuse if anyone but `holder` holds a live lease on `r`: what a writer that takes no
    /// lease of its own (a VFS transaction, fenced by its commit's compare-and-swap) checks
    /// before it starts, so sessions and at-rest operations keep their branch.
    pub fn check_lease_free_for(&self, b: &BranchRef, r: &Ref, holder: &str) -> EngineResult<()> {
        if let Some(l) = &r.lease {
            if l.holder != holder && is_live(l, self.store_now()?) && !holder_is_dead(&l.holder) {
                return Err(EngineError::LeaseHeld {
                    branch: b.clone(),
                    holder: l.holder.clone(),
                    expires: l.expires.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Whether this process already holds a live lease on `r` (taken before the operation).
    pub(crate) fn holds_lease(&self, r: &Ref) -> EngineResult<bool> {
        Ok(match &r.lease {
            Some(l) => l.holder == self.holder() && is_live(l, self.store_now()?),
            None => false,
        })
    }

    /// Take (or renew) the lease on `b` for `ttl`. Refused while another holder's lease is
    /// live. Every acquisition bumps the epoch, fencing any earlier holder.
    pub fn lease_acquire(&self, b: &BranchRef, ttl: Duration) -> EngineResult<LeaseInfo> {
        let now = self.store_time()?;
        let r = self.update_ref(b, |r| {
            self.check_not_leased(b, r, false)?;
            r.epoch += 1;
            r.lease = Some(Lease {
                holder: self.holder().to_string(),
                epoch: r.epoch,
                expires: now.saturating_add(ttl),
            });
            Ok(())
        })?;
        let l = r.lease.expect("just set");
        Ok(LeaseInfo {
            branch: b.clone(),
            holder: l.holder,
            epoch: l.epoch,
            expires: l.expires,
            live: true,
        })
    }

    /// Take the lease on `b` as `holder` (a part of this process, such as a daemon's
    /// session: `<default holder>#<session>`), for `ttl`. Refused while anyone else's lease
    /// is live, including this process's own default holder. Returns the leased ref and
    /// its tag, the base for the holder's first commit.
    pub fn lease_acquire_as(
        &self,
        b: &BranchRef,
        holder: &str,
        ttl: Duration,
    ) -> EngineResult<(Ref, ETag)> {
        let now = self.store_time()?;
        self.update_ref_with(b, false, |r| {
            if let Some(l) = &r.lease {
                if l.holder != holder
                    && is_live(l, now.as_system_time())
                    && !holder_is_dead(&l.holder)
                {
                    return Err(EngineError::LeaseHeld {
                        branch: b.clone(),
                        holder: l.holder.clone(),
                        expires: l.expires.to_string(),
                    });
                }
            }
            r.epoch += 1;
            r.lease = Some(Lease {
                holder: holder.to_string(),
                epoch: r.epoch,
                expires: now.saturating_add(ttl),
            });
            Ok(())
        })
    }

    /// Extend `holder`'s lease on `b` by `ttl` from now without a new epoch (the holder's
    /// pending commits stay valid), and touch the branch. A lease that changed hands or epoch is a
    /// [`EngineError::Conflict`]: the holder has been fenced.
    pub fn lease_renew_as(
        &self,
        b: &BranchRef,
        holder: &str,
        epoch: u64,
        ttl: Duration,
    ) -> EngineResult<(Ref, ETag)> {
        let now = self.store_time()?;
        self.update_ref_with(b, false, |r| match &mut r.lease {
            Some(l) if l.holder == holder && l.epoch == epoch => {
                l.expires = now.saturating_add(ttl);
                // A held branch is in use: its TTL counts from the last renewal.
                r.touched_at = now;
                Ok(())
            }
            _ => Err(EngineError::Conflict { branch: b.clone() }),
        })
    }

    /// Give up `holder`'s lease on `b`; a lease held by anyone else is left alone.
    pub fn lease_release_as(&self, b: &BranchRef, holder: &str) -> EngineResult<()> {
        self.update_ref(b, |r| {
            if r.lease.as_ref().is_some_and(|l| l.holder == holder) {
                r.lease = None;
            }
            Ok(())
        })
        .map(|_| ())
    }

    /// Give up the lease on `b`. Another holder's live lease is released only with
    /// `force` (which fences that holder: its next commit loses its compare-and-swap).
    pub fn lease_release(&self, b: &BranchRef, force: bool) -> EngineResult<Option<LeaseInfo>> {
        let mut released = None;
        self.update_ref(b, |r| {
            self.check_not_leased(b, r, force)?;
            released = r.lease.take();
            Ok(())
        })?;
        Ok(released.map(|l| LeaseInfo {
            branch: b.clone(),
            holder: l.holder,
            epoch: l.epoch,
            expires: l.expires,
            live: false,
        }))
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
