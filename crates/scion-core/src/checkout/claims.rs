//! Checkouts recorded in their branch's ref: a branch with a writable checkout file is
//! written through that file, and page writers (the VFS) are refused until the checkout is
//! released. The record lives in the store, so the rule holds across hosts.

use std::path::Path;

use scion_store::ETag;
use serde::Serialize;

use super::files::{DbFiles, Expect};
use super::state::{refuse_unsaved, CheckoutState, JUDGE_TRIES};
use crate::error::{CoreError, CoreResult};
use crate::names::BranchRef;
use crate::refs::Ref;
use crate::Scion;
use scion_store::clock::host_name;

/// What `checkout --release` did.
#[derive(Debug, Clone, Serialize)]
pub struct ReleaseReport {
    /// The branch released.
    pub branch: BranchRef,
    /// The checkout file of this host that was released.
    pub path: String,
    /// How many of its files (database, WAL, records) were removed.
    pub files_removed: usize,
    /// What the removed file held that was never checkpointed (with `force`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discarded: Option<CheckoutState>,
    /// Checkouts on other hosts that were released too (with `force`), as `host:path`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub released_elsewhere: Vec<String>,
    /// Writable checkouts of the branch still recorded.
    pub remaining: Vec<String>,
}

impl Scion {
    /// Record the checkout file at `path` in `b`'s ref (once: later calls find it there)
    /// and return the ref as it now is. Recorded before the file is made, so a page
    /// writer that publishes after this point is refused, and one that published before
    /// it is in the head the file is made from.
    pub(crate) fn claim_checkout(&self, b: &BranchRef, path: &Path) -> CoreResult<(Ref, ETag)> {
        let path = path.display().to_string();
        Ok(self.engine.claim_checkout(b, &host_name(), &path)?)
    }

    /// Make sure the checkout file of `b` on this host is recorded in its ref (a file
    /// made before checkouts were recorded, or whose record was released by force
    /// elsewhere), without touching the file: what a capturer that resumes on a file it
    /// did not just check out calls.
    pub fn record_checkout(&self, b: &BranchRef) -> CoreResult<(Ref, ETag)> {
        self.claim_checkout(b, &self.checkout_path(b))
    }

    /// End the writable checkout of `b` on this host: its file is removed and its record
    /// dropped from the ref, so page writers may write the branch again. Refused while the
    /// file holds changes never checkpointed (unless `force`, which discards them, and also
    /// releases the checkouts other hosts recorded, whose files are left to go stale) and
    /// while a connection has it open.
    pub fn release_checkout(&self, b: &BranchRef, force: bool) -> CoreResult<ReleaseReport> {
        let path = self.checkout_path(b);
        let (host, text) = (host_name(), path.display().to_string());
        let (r, _) = self.engine.read_ref(b)?;
        let mut removed = None;
        for _ in 0..JUDGE_TRIES {
            let judged = self.inspect(&path, &r.root)?;
            let discarded = match judged.state {
                CheckoutState::Dirty | CheckoutState::Unknown if !force => {
                    refuse_unsaved(&judged, &path, b)?;
                    None
                }
                CheckoutState::Dirty | CheckoutState::Unknown => Some(judged.state),
                _ => None,
            };
            let expect = if force {
                Expect::Anything
            } else {
                judged.expect()
            };
            // None: written to since it was judged; judge it again.
            if let Some(n) = DbFiles::checkout(path.clone()).remove_if_unused(expect)? {
                removed = Some((n, discarded));
                break;
            }
        }
        let Some((files_removed, discarded)) = removed else {
            return Err(CoreError::CheckoutBusy { path });
        };
        let dropped = self.engine.drop_checkout_claims(b, &host, &text, force)?;
        Ok(ReleaseReport {
            branch: b.clone(),
            path: text,
            files_removed,
            discarded,
            released_elsewhere: dropped.others,
            remaining: dropped
                .head
                .checkouts
                .iter()
                .map(|c| c.to_string())
                .collect(),
        })
    }
}
