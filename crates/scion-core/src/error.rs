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
    /// The engine refused or failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The checkout holds changes never checkpointed.
    #[error("checkout {path} has changes that were never checkpointed")]
    DirtyCheckout {
        /// The file.
        path: PathBuf,
        /// Its branch.
        branch: BranchRef,
    },
    /// A file where the checkout goes, with no record scion can account for.
    #[error("checkout {path} has no scion record; it may hold changes scion cannot account for")]
    UnknownCheckout {
        /// The file.
        path: PathBuf,
        /// Its branch.
        branch: BranchRef,
    },
    /// The checkout was made from a head the branch has moved from, and holds changes.
    #[error(
        "checkout {path} was materialized from an older version of {branch}, which has moved since"
    )]
    StaleCheckout {
        /// The file.
        path: PathBuf,
        /// Its branch.
        branch: BranchRef,
    },
    /// The checkout is open in a connection.
    #[error("checkout {path} is open in another connection")]
    CheckoutBusy {
        /// The checkout file.
        path: PathBuf,
    },
    /// SQLite journal files beside the path of a new database.
    #[error("{path} has SQLite journal files beside it ({files}); a new database there would take in their contents")]
    JournalLeftovers {
        /// The file.
        path: PathBuf,
        /// The journal files found.
        files: String,
    },
    /// An output path inside the trees scion manages.
    #[error("refusing to write {path}: it is inside {tree}, which scion manages")]
    InsideStore {
        /// The file.
        path: PathBuf,
        /// The tree it is inside.
        tree: PathBuf,
    },
    /// The output file exists, and was not to be replaced.
    #[error("{path} already exists")]
    OutputExists {
        /// The file.
        path: PathBuf,
    },
    /// The output's directory does not exist.
    #[error("directory {path} does not exist")]
    NoSuchDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// The output path is a directory.
    #[error("{path} is a directory; give the path of the file to write")]
    OutputIsDirectory {
        /// The path given.
        path: PathBuf,
    },
    /// `--clone always`, and the filesystem cannot clone.
    #[error("clone policy is 'always' but {reason}; refusing to make a full copy")]
    CloneUnsupported {
        /// Why not.
        reason: String,
    },
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

/// A name that is not one, as the engine reports it.
impl From<scion_engine::names::NameError> for CoreError {
    fn from(e: scion_engine::names::NameError) -> Self {
        CoreError::Engine(e.into())
    }
}
