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
}

pub type RemoteResult<T> = Result<T, RemoteError>;

/// A name that is not one, as the engine reports it.
impl From<scion_core::names::NameError> for RemoteError {
    fn from(e: scion_core::names::NameError) -> Self {
        RemoteError::Engine(e.into())
    }
}
