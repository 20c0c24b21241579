//! What the working tree can refuse or fail at: the engine's errors, and those about this
//! host's checkout files.

use std::path::PathBuf;

use scion_engine::BranchRef;
pub(crate) use scion_engine::{EngineError, EngineResult};
use scion_store::StoreError;

/// What a [`Scion`](crate::Scion) operation can refuse or fail at: an engine error, or one
/// about this host's checkout files. The CLI, the daemon and the SDKs map both, in one place
/// ([`crate::described`]), to an exit code, a stable code and a hint.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("checkout {path} has changes that were never checkpointed")]
    DirtyCheckout { path: PathBuf, branch: BranchRef },
    #[error("checkout {path} has no scion record; it may hold changes scion cannot account for")]
    UnknownCheckout { path: PathBuf, branch: BranchRef },
    #[error(
        "checkout {path} was materialized from an older version of {branch}, which has moved since"
    )]
    StaleCheckout { path: PathBuf, branch: BranchRef },
    #[error("checkout {path} is open in another connection")]
    CheckoutBusy { path: PathBuf },
    #[error("{path} has SQLite journal files beside it ({files}); a new database there would take in their contents")]
    JournalLeftovers { path: PathBuf, files: String },
    #[error("refusing to write {path}: it is inside {tree}, which scion manages")]
    InsideStore { path: PathBuf, tree: PathBuf },
    #[error("{path} already exists")]
    OutputExists { path: PathBuf },
    #[error("directory {path} does not exist")]
    NoSuchDirectory { path: PathBuf },
    #[error("{path} is a directory; give the path of the file to write")]
    OutputIsDirectory { path: PathBuf },
    #[error("clone policy is 'always' but {reason}; refusing to make a full copy")]
    CloneUnsupported { reason: String },
}

impl CoreError {
    /// Whether the same call may succeed if repeated as is.
    pub fn is_retryable(&self) -> bool {
        match self {
            CoreError::Engine(e) => e.is_retryable(),
            CoreError::CheckoutBusy { .. } => true,
            _ => false,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        EngineError::io(path, source).into()
    }
}

impl From<StoreError> for CoreError {
    fn from(e: StoreError) -> Self {
        CoreError::Engine(e.into())
    }
}

/// The result of a working-tree operation.
pub type CoreResult<T> = Result<T, CoreError>;
