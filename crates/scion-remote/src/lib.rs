//! `scion-remote`: branches that travel between stores. `push` sends a branch's version to
//! a remote store and moves the branch there by compare-and-swap, fast-forward only;
//! `pull` brings a remote branch's version into a remote-tracking branch
//! (`db@origin~main`) and then fast-forwards or merges the local branch with `scion
//! merge`'s rules; `clone` makes a new local store holding a remote's databases.
//!
//! What travels is decided by the engine (`scion_core::ops::transfer`): the segments the
//! versions need that the receiver lacks, found by walking the page map beside the
//! receiver's head, checked as they arrive and written create-only. The ref moves last,
//! so no reader on the receiving side ever meets a head whose data is not all there, and
//! a transfer cut short leaves only whole segments that a rerun skips.

mod clone;
mod error;
mod follow;
mod pull;
mod push;

use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::history::HeadOp;
use scion_core::ops::receive::{Expect, Incoming, Receipt, Received};
use scion_core::ops::transfer::TransferStats;
use scion_core::progress::ProgressSink;
use scion_core::refs::Ref;
use scion_core::{BranchName, BranchRef, EngineError, RemoteName, Scion};
use serde::Serialize;

pub use clone::{clone, CloneOptions, CloneReport, ClonedBranch};
pub use error::{RemoteError, RemoteResult};
pub use follow::{follow, FollowOptions, FollowPush, FollowSummary};
pub use pull::{pull, PullOptions, PullOutcome, PullReport};
use push::Sent;
pub use push::{push, PushOptions, PushOutcome, PushReport};

/// Another store, attached under the name this store gives it.
pub struct Remote {
    pub name: RemoteName,
    pub location: String,
    pub store: Scion,
    /// The requests made to it, and their bytes.
    pub requests: std::sync::Arc<scion_store::CountingBackend>,
}

impl Remote {
    /// Attach to remote `name` of `local`, as its settings record it.
    pub fn open(local: &Scion, name: &RemoteName, progress: ProgressSink) -> RemoteResult<Self> {
        let location = local.engine().remote_location(name)?;
        Self::open_at(local, name.clone(), &location, progress)
    }

    /// Attach to the store at `location`, named `name` from `local`'s side.
    pub fn open_at(
        local: &Scion,
        name: RemoteName,
        location: &str,
        progress: ProgressSink,
    ) -> RemoteResult<Self> {
        let spec = StoreSpec::parse(location)?;
        if let StoreSpec::Local(dir) = &spec {
            if !dir.join("scion.json").exists() {
                return Err(EngineError::NotInitialized {
                    location: dir.display().to_string(),
                }
                .into());
            }
        }
        let options = AttachOptions {
            progress,
            segment_cache: false,
            ..Default::default()
        };
        let attached = Scion::attach(&spec, options)?;
        let (store, requests) = (attached.scion, attached.counter);
        if store.engine().store_id() == local.engine().store_id() {
            return Err(RemoteError::SameStore {
                remote: name.to_string(),
                location: location.to_string(),
            });
        }
        Ok(Remote {
            name,
            location: location.to_string(),
            store,
            requests,
        })
    }
}

/// The head of `b` in `s`, or `None` when the branch (or its database) does not exist.
pub(crate) fn head_of(s: &Scion, b: &BranchRef) -> RemoteResult<Option<Ref>> {
    match s.engine().read_ref(b) {
        Ok((r, _)) => Ok(Some(r)),
        Err(EngineError::BranchNotFound { .. } | EngineError::DatabaseNotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The remote-tracking branch of `local` that follows `branch` of `remote`.
pub(crate) fn tracking_branch(
    remote: &RemoteName,
    b: &BranchRef,
) -> Result<BranchRef, scion_core::EngineError> {
    Ok(BranchRef::new(
        b.db.clone(),
        BranchName::tracking_of(remote, &b.branch)?,
    ))
}

/// Point `local`'s tracking branch at `theirs` (a version whose segments are all here).
pub(crate) fn record_tracking(
    local: &Scion,
    tracking: &BranchRef,
    theirs: &Ref,
    remote: &Remote,
    sent: Option<&Sent>,
) -> RemoteResult<Received> {
    let expect = match head_of(local, tracking)? {
        Some(t) => Expect::Head(t.root),
        None => Expect::Absent,
    };
    let mut incoming = Incoming::from_ref(theirs);
    incoming.protected = true;
    let receipt = Receipt {
        op: HeadOp::Fetch,
        detail: format!("from {} ({})", remote.name, remote.location),
        force: true,
        fast_forward: true,
        reused: sent.map_or(&[][..], |s| &s.reused),
        started: match sent {
            Some(s) => s.started,
            None => local.engine().store_clock()?,
        },
    };
    Ok(local
        .engine()
        .receive_head(tracking, &incoming, expect, receipt)?)
}

/// Objects and bytes of one transfer, and what the walk found, as reports show them.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Transferred {
    /// Segments the versions needed beyond what the receiver's head already shared.
    pub segments_needed: u64,
    /// Versions of the graph below the head whose root records travelled.
    pub ancestors: u64,
    #[serde(flatten)]
    pub stats: TransferStats,
}

impl Transferred {
    pub(crate) fn add(&mut self, other: Transferred) {
        self.segments_needed += other.segments_needed;
        self.ancestors += other.ancestors;
        self.stats.objects_sent += other.stats.objects_sent;
        self.stats.bytes_sent += other.stats.bytes_sent;
        self.stats.objects_skipped += other.stats.objects_skipped;
    }
}
