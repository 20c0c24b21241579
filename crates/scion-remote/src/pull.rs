//! `scion pull`: bring a remote branch's head here as a remote-tracking branch, then bring
//! it into the local branch: a new branch, a fast-forward, or a merge with `scion merge`'s
//! rules (conflicts are data in the report, and nothing is half-applied).

use scion_core::ops::receive::{Expect, Incoming, Receipt};
use scion_core::progress::Progress;
use scion_core::{BranchName, BranchRef, EngineError, Scion, Target};
use scion_merge::{MergeOptions, MergeReport, Outcome};
use serde::Serialize;

use crate::push::{send, wanted_roots, Sent};
use crate::{head_of, record_tracking, tracking_branch, Remote, RemoteResult, Transferred};

/// How to pull.
#[derive(Debug, Clone, Default)]
pub struct PullOptions {
    /// The local branch to bring the remote's head into (default: the same name).
    pub into: Option<BranchName>,
    /// How a merge runs, when the local branch has moved on its own
    /// (`merge.allow_protected` lets it move a protected branch).
    pub merge: MergeOptions,
    /// Fetch into the remote-tracking branch only; leave the local branch alone.
    pub fetch_only: bool,
}

/// How a pull ended for the local branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PullOutcome {
    /// It already held every change of the remote's head.
    UpToDate,
    /// It did not exist; it is now a branch at the remote's head.
    Created,
    /// It had not moved since the versions they share: it now names the remote's head.
    FastForward,
    /// Both had moved: a new version holds both sides' changes.
    Merged,
    /// Both had moved and the merge stopped at conflicts or violations: the local branch
    /// is as it was, the remote's head is in the tracking branch.
    Conflicts,
    /// Only the tracking branch moved (`--fetch-only`).
    Fetched,
}

/// What a pull did.
#[derive(Debug, Clone, Serialize)]
pub struct PullReport {
    /// The branch at the remote.
    pub remote_branch: String,
    pub remote: String,
    pub location: String,
    pub remote_version: u64,
    /// The remote-tracking branch that now names the remote's head.
    pub tracking: String,
    /// The local branch brought up to it.
    pub into: String,
    pub outcome: PullOutcome,
    pub transfer: Transferred,
    /// The merge's report, when the local branch existed.
    pub merge: Option<MergeReport>,
}

/// Pull `b` (named as the remote names it) from `remote` into `local`.
pub fn pull(
    local: &Scion,
    remote: &Remote,
    b: &BranchRef,
    opts: &PullOptions,
    progress: &dyn Progress,
) -> RemoteResult<PullReport> {
    let tracking = tracking_branch(&remote.name, b)?;
    let into = BranchRef::new(b.db.clone(), opts.into.clone().unwrap_or(b.branch.clone()));
    if into.branch.tracking().is_some() {
        return Err(EngineError::TrackingBranch {
            branch: into.clone(),
        }
        .into());
    }
    let theirs = match remote.store.engine().read_ref(b) {
        Ok((r, _)) => r,
        Err(EngineError::BranchNotFound { .. }) => {
            return Err(EngineError::BranchNotFound {
                branch: b.clone(),
                remote: Some(remote.name.clone()),
            }
            .into())
        }
        Err(EngineError::DatabaseNotFound { .. }) => {
            return Err(EngineError::DatabaseNotFound {
                db: b.db.clone(),
                remote: Some(remote.name.clone()),
            }
            .into())
        }
        Err(e) => return Err(e.into()),
    };
    let sent = fetch(local, remote, &theirs, &[], &[&tracking, &into], progress)?;
    record_tracking(local, &tracking, &theirs, remote, Some(&sent))?;

    let mut report = PullReport {
        remote_branch: b.to_string(),
        remote: remote.name.to_string(),
        location: remote.location.clone(),
        remote_version: theirs.version,
        tracking: tracking.to_string(),
        into: into.to_string(),
        outcome: PullOutcome::Fetched,
        transfer: sent.report,
        merge: None,
    };
    if opts.fetch_only {
        return Ok(report);
    }
    if head_of(local, &into)?.is_none() {
        let receipt = Receipt {
            op: scion_core::history::HeadOp::Fetch,
            detail: format!("from {} ({})", remote.name, remote.location),
            force: false,
            fast_forward: true,
            reused: &[],
            started: local.engine().store_clock()?,
        };
        local.engine().receive_head(
            &into,
            &Incoming::from_ref(&theirs),
            Expect::Absent,
            receipt,
        )?;
        report.outcome = PullOutcome::Created;
        return Ok(report);
    }
    let src = Target {
        branch: tracking,
        checkpoint: None,
    };
    let merged = scion_merge::merge(
        local.engine(),
        &mut local.working_files(),
        &src,
        &into,
        &opts.merge,
    )?;
    report.outcome = match merged.outcome {
        Outcome::UpToDate => PullOutcome::UpToDate,
        Outcome::FastForward => PullOutcome::FastForward,
        Outcome::Merged => PullOutcome::Merged,
        Outcome::Conflicts => PullOutcome::Conflicts,
    };
    report.merge = Some(merged);
    Ok(report)
}

/// Bring the segments of `theirs` (a ref of the remote) and of `also` (its checkpoints'
/// versions) here, pruned against the first of `near` (local branches) that exists: their
/// page maps share most of it.
pub(crate) fn fetch(
    local: &Scion,
    remote: &Remote,
    theirs: &scion_core::refs::Ref,
    also: &[scion_core::format::Locator],
    near: &[&BranchRef],
    progress: &dyn Progress,
) -> RemoteResult<Sent> {
    let mut have = None;
    for b in near {
        if let Some(r) = head_of(local, b)? {
            have = Some(r);
            break;
        }
    }
    let mut wanted = wanted_roots(theirs, have.as_ref());
    wanted.extend_from_slice(also);
    send(
        &remote.store,
        local,
        &wanted,
        have.map(|h| h.root),
        progress,
    )
}
