//! `scion push`: send a branch's head (and, if asked, its checkpoints) to a remote and move
//! the remote's branch to it, fast-forward only.

use scion_core::format::Locator;
use scion_core::history::HeadOp;
use scion_core::ops::receive::{CheckpointReceipt, Expect, Incoming, Receipt};
use scion_core::progress::Progress;
use scion_core::refs::Ref;
use scion_core::{BranchName, BranchRef, EngineError, Scion};
use serde::Serialize;

use crate::Transferred;
use crate::{head_of, record_tracking, tracking_branch, Remote, RemoteError, RemoteResult};
use scion_core::ops::transfer::TransferStats;

/// How to push.
#[derive(Debug, Clone, Default)]
pub struct PushOptions {
    /// The branch's name at the remote (default: its name here).
    pub as_branch: Option<BranchName>,
    /// Send the branch's checkpoints too (create-only: one the remote has is left alone).
    pub checkpoints: bool,
    /// Replace the remote's head even when it is not an ancestor, but only if it is still
    /// the version this store's remote-tracking branch last saw.
    pub force_with_lease: bool,
    /// Move a protected branch, or one leased or checked out, at the remote.
    pub force: bool,
}

/// How a push ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PushOutcome {
    /// The remote's branch already named this version.
    UpToDate,
    /// The branch did not exist at the remote; it does now.
    Created,
    /// The remote's head was an ancestor of the pushed one.
    FastForward,
    /// The remote's head was replaced under `--force-with-lease`.
    Forced,
}

/// What a push did.
#[derive(Debug, Clone, Serialize)]
pub struct PushReport {
    pub branch: String,
    pub remote: String,
    pub location: String,
    /// The branch at the remote.
    pub remote_branch: String,
    pub outcome: PushOutcome,
    /// The pushed head's number here, and the number it has at the remote now.
    pub version: u64,
    pub remote_version: u64,
    /// The remote's version before the push (absent for a new branch).
    pub remote_version_before: Option<u64>,
    pub transfer: Transferred,
    /// Checkpoints sent (`--checkpoints`), and how each was received.
    pub checkpoints: Vec<(String, CheckpointReceipt)>,
    /// This store's remote-tracking branch, moved to the pushed version.
    pub tracking: String,
}

/// Push `b` of `local` to `remote`.
pub fn push(
    local: &Scion,
    remote: &Remote,
    b: &BranchRef,
    opts: &PushOptions,
    progress: &dyn Progress,
) -> RemoteResult<PushReport> {
    let dst = BranchRef::new(
        b.db.clone(),
        opts.as_branch.clone().unwrap_or(b.branch.clone()),
    );
    for named in [b, &dst] {
        if named.branch.tracking().is_some() {
            return Err(EngineError::TrackingBranch {
                branch: named.clone(),
            }
            .into());
        }
    }
    let (src, _) = local.engine().read_ref(b)?;
    let tracking = tracking_branch(&remote.name, &dst)?;
    let theirs = head_of(&remote.store, &dst)?;
    let outcome = decide(
        local,
        remote,
        b,
        &src,
        &dst,
        &tracking,
        theirs.as_ref(),
        opts,
    )?;

    let checkpoints = if opts.checkpoints {
        local.engine().list_checkpoints(b)?
    } else {
        Vec::new()
    };
    // What the remote holds whole already: its head of the branch, or of the branch this
    // one was forked from, whose page map the pushed one mostly shares.
    let have = match &theirs {
        Some(t) => Some(t.clone()),
        None => match &src.parent {
            Some(p) => match BranchName::new(&p.branch) {
                Ok(name) => head_of(&remote.store, &BranchRef::new(b.db.clone(), name))?,
                Err(_) => None,
            },
            None => None,
        },
    };
    let mut wanted = wanted_roots(&src, have.as_ref());
    wanted.extend(checkpoints.iter().map(|(_, c)| c.root));
    let transfer = send(
        local,
        &remote.store,
        &wanted,
        have.map(|h| h.root),
        progress,
    )?;

    let remote_version = if outcome == PushOutcome::UpToDate {
        theirs.as_ref().map_or(src.version, |t| t.version)
    } else {
        let expect = match &theirs {
            Some(t) => Expect::Head(t.root),
            None => Expect::Absent,
        };
        let receipt = Receipt {
            op: HeadOp::Push,
            detail: format!("{b} from {}", local.engine().location()),
            force: opts.force,
            fast_forward: outcome != PushOutcome::Forced,
            reused: &transfer.reused,
            started: transfer.started,
        };
        match remote
            .store
            .engine()
            .receive_head(&dst, &Incoming::from_ref(&src), expect, receipt)
        {
            Ok(r) => r.version,
            // Another writer moved it since it was read: the remote has news.
            Err(EngineError::Conflict { .. } | EngineError::BranchExists { .. }) => {
                let now = head_of(&remote.store, &dst)?;
                return Err(EngineError::NotFastForward {
                    remote: remote.name.clone(),
                    branch: dst.clone(),
                    theirs: now.map_or(0, |r| r.version),
                }
                .into());
            }
            Err(e) => return Err(e.into()),
        }
    };
    // Checkpoints follow the head: their data arrived with it, and the branch exists now.
    let mut received_checkpoints = Vec::new();
    for (name, c) in &checkpoints {
        let got = remote.store.engine().receive_checkpoint(&dst, name, c)?;
        received_checkpoints.push((name.to_string(), got));
    }
    let (pushed, _) = remote.store.engine().read_ref(&dst)?;
    record_tracking(local, &tracking, &pushed, remote, None)?;
    Ok(PushReport {
        branch: b.to_string(),
        remote: remote.name.to_string(),
        location: remote.location.clone(),
        remote_branch: dst.to_string(),
        outcome,
        version: src.version,
        remote_version,
        remote_version_before: theirs.map(|t| t.version),
        transfer: transfer.report,
        checkpoints: received_checkpoints,
        tracking: tracking.to_string(),
    })
}

/// Whether the push may go ahead, and as what.
#[allow(clippy::too_many_arguments)]
fn decide(
    local: &Scion,
    remote: &Remote,
    b: &BranchRef,
    src: &Ref,
    dst: &BranchRef,
    tracking: &BranchRef,
    theirs: Option<&Ref>,
    opts: &PushOptions,
) -> RemoteResult<PushOutcome> {
    let Some(t) = theirs else {
        if !opts.force && !related_at_remote(local, remote, src, dst)? {
            return Err(RemoteError::UnrelatedHistory {
                branch: b.to_string(),
                remote: remote.name.to_string(),
                db: dst.db.to_string(),
            });
        }
        return Ok(PushOutcome::Created);
    };
    if t.root == src.root {
        return Ok(PushOutcome::UpToDate);
    }
    if is_ancestor_here(local, &t.root, &src.root)? {
        return Ok(PushOutcome::FastForward);
    }
    if !opts.force_with_lease {
        return Err(EngineError::NotFastForward {
            remote: remote.name.clone(),
            branch: dst.clone(),
            theirs: t.version,
        }
        .into());
    }
    let Some(seen) = head_of(local, tracking)? else {
        return Err(RemoteError::NoLease {
            branch: b.to_string(),
            tracking: tracking.to_string(),
        });
    };
    if seen.root != t.root {
        return Err(EngineError::RemoteMoved {
            remote: remote.name.clone(),
            branch: dst.clone(),
            expected: format!("version {} ({})", seen.version, seen.root).into(),
            found: format!("version {} ({})", t.version, t.root).into(),
        }
        .into());
    }
    Ok(PushOutcome::Forced)
}

/// Whether a branch new to the remote belongs to the database of that name there: the
/// remote lacks the database, or one of its branches was made from the same import (every
/// branch keeps its database's created version) or has a head this store's branch descends
/// from. Two `scion create shop` made separately share none.
fn related_at_remote(
    local: &Scion,
    remote: &Remote,
    src: &Ref,
    dst: &BranchRef,
) -> RemoteResult<bool> {
    let theirs = match remote.store.engine().list_branches(&dst.db) {
        Ok(list) => list,
        Err(EngineError::DatabaseNotFound { .. }) => return Ok(true),
        Err(e) => return Err(e.into()),
    };
    for (_, r) in &theirs {
        if r.init_root == src.init_root || is_ancestor_here(local, &r.root, &src.root)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether `ancestor` is `of` or below it in this store's version graph. A version this
/// store does not hold is no ancestor of its own.
pub(crate) fn is_ancestor_here(s: &Scion, ancestor: &Locator, of: &Locator) -> RemoteResult<bool> {
    if !s.engine().holds_segments([&ancestor.segment])? {
        return Ok(false);
    }
    match s.engine().is_ancestor(ancestor, of) {
        Ok(answer) => Ok(answer == Some(true)),
        // A version between the two swept here: the graph cannot prove it, and an unproven
        // push is refused as one that would lose data.
        Err(EngineError::Corrupt { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The versions a transfer of `r` sends: its head, and its fork point and first version
/// unless the receiver's ref `have` holds them already (then they are there whole).
pub(crate) fn wanted_roots(r: &Ref, have: Option<&Ref>) -> Vec<Locator> {
    let held = |v: Locator| have.is_some_and(|h| [h.root, h.fork_root, h.init_root].contains(&v));
    let mut wanted = vec![r.root];
    wanted.extend([r.fork_root, r.init_root].into_iter().filter(|v| !held(*v)));
    wanted
}

/// One transfer's figures, and what the receipt needs.
pub(crate) struct Sent {
    pub report: Transferred,
    pub reused: Vec<scion_core::format::SegmentId>,
    pub started: scion_core::clock::StoreTime,
}

/// Send `wanted` from `from` to `to`, where `to` holds `have` whole.
pub(crate) fn send(
    from: &Scion,
    to: &Scion,
    wanted: &[Locator],
    have: Option<Locator>,
    progress: &dyn Progress,
) -> RemoteResult<Sent> {
    let started = to.engine().store_clock()?;
    let plan = from.engine().plan_transfer(to.engine(), wanted, have)?;
    let stats: TransferStats = from.engine().send_segments(to.engine(), &plan, progress)?;
    Ok(Sent {
        report: Transferred {
            segments_needed: plan.needed().count() as u64,
            ancestors: plan.ancestors,
            stats,
        },
        reused: plan.present,
        started,
    })
}
