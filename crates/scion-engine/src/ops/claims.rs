//! Checkout claims: the writable checkout files of a branch, recorded in its ref (host and
//! path), so page writers are refused while a file is the branch's writer. The working tree
//! records a claim before it makes a file and drops it when the file goes.

use scion_store::ETag;

use crate::error::EngineResult;
use crate::names::BranchRef;
use crate::refs::{CheckoutClaim, Ref};
use crate::Engine;

/// What dropping checkout claims left.
#[derive(Debug, Clone)]
pub struct ClaimsDropped {
    /// The ref as it now is.
    pub head: Ref,
    /// Claims of other files dropped with them (`host:path`).
    pub others: Vec<String>,
}

impl Engine {
    /// Record the checkout file `path` on `host` in `b`'s ref (once: a later call finds it
    /// there and writes nothing) and return the ref as it now is.
    pub fn claim_checkout(
        &self,
        b: &BranchRef,
        host: &str,
        path: &str,
    ) -> EngineResult<(Ref, ETag)> {
        let (r, etag) = self.read_ref(b)?;
        if r.checkouts.iter().any(|c| c.is_same_file(host, path)) {
            return Ok((r, etag));
        }
        let since = self.store_time()?;
        self.update_ref_with(b, false, |r| {
            if !r.checkouts.iter().any(|c| c.is_same_file(host, path)) {
                r.checkouts.push(CheckoutClaim {
                    host: host.to_string(),
                    path: path.to_string(),
                    since,
                });
            }
            Ok(())
        })
    }

    /// Drop the claim of `path` on `host` from `b`'s ref; with `all`, every other
    /// host's and path's claim too (their files are left to go stale).
    pub fn drop_checkout_claims(
        &self,
        b: &BranchRef,
        host: &str,
        path: &str,
        all: bool,
    ) -> EngineResult<ClaimsDropped> {
        let mut others = Vec::new();
        let head = self.update_ref(b, |r| {
            others.clear();
            r.checkouts.retain(|c| {
                let mine = c.is_same_file(host, path);
                if !mine && all {
                    others.push(c.to_string());
                }
                !mine && !all
            });
            Ok(())
        })?;
        Ok(ClaimsDropped { head, others })
    }
}
