//! What a push, pull or clone can fail with.

use scion_core::{CoreError, EngineError};
use scion_merge::MergeError;

/// Why a transfer did not run to a report. Refusals of the stores (a branch that moved, a
/// protected branch, a missing remote) are the engine's errors, with its codes and hints.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error("remote {remote} ({location}) is this store itself")]
    SameStore { remote: String, location: String },
    #[error("{branch} has no remote-tracking branch {tracking}: --force-with-lease needs to know which of the remote's versions was last seen; pull first")]
    NoLease { branch: String, tracking: String },
    #[error("{dir} already exists and is not empty: clone makes a new store")]
    CloneTargetExists { dir: String },
    #[error("{branch} shares no version with database {db} at remote {remote}: pushed, it would graft an unrelated history onto a database of the same name")]
    UnrelatedHistory {
        branch: String,
        remote: String,
        db: String,
    },
}

impl RemoteError {
    /// How front ends present the errors of transfers themselves (the engine's, the
    /// working tree's and the merge's describe themselves).
    pub fn describe(&self) -> Option<scion_core::described::Described> {
        use scion_core::described::{Described, Exit};
        let d = |exit, code, hint: &str| Described {
            exit,
            code,
            hint: Some(hint.to_string()),
        };
        Some(match self {
            RemoteError::Engine(_) | RemoteError::Core(_) | RemoteError::Merge(_) => return None,
            RemoteError::SameStore { .. } => d(Exit::InvalidInput, "invalid_input", "a remote names another store: `scion remote add NAME LOCATION`"),
            RemoteError::NoLease { .. } => d(Exit::Refused, "no_lease", "`scion pull` first, then push again with --force-with-lease"),
            RemoteError::CloneTargetExists { .. } => d(Exit::AlreadyExists, "already_exists", "clone into a new or empty directory"),
            RemoteError::UnrelatedHistory { .. } => d(Exit::Refused, "unrelated_history", "push under a database name the remote does not have, or pass --force to push it all the same"),
        })
    }
}

pub type RemoteResult<T> = Result<T, RemoteError>;

/// A name that is not one, as the engine reports it.
impl From<scion_core::names::NameError> for RemoteError {
    fn from(e: scion_core::names::NameError) -> Self {
        RemoteError::Engine(e.into())
    }
}
