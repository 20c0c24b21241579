//! What a merge can fail with (conflicts and violations are not failures: they are data in
//! the report).

use scion_core::{CoreError, EngineError};

/// Why a merge did not run to a report.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// The store, a ref or a head move refused or failed (a lease held, a protected
    /// destination, the destination moved while the merge ran, ...).
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("{src} and {dst} share no version: neither was made from the other or from a version the other was made from")]
    NoBase { src: String, dst: String },
    #[error("{src} and {dst} have {} best common versions ({}), left by merges that crossed; which one to merge against is a choice scion does not make for you", bases.len(), bases.join(", "))]
    SeveralBases {
        src: String,
        dst: String,
        bases: Vec<String>,
    },
    #[error("the versions of {src} and {dst} were written before scion recorded where versions come from, so their common version is unknown{}", candidate_list(candidates))]
    BaseUnknown {
        src: String,
        dst: String,
        candidates: Vec<String>,
    },
    #[error("{table} is a virtual table of module {module}, which scion cannot merge: only the module can read its shadow tables (scion merges fts3, fts4, fts5, rtree and geopoly)")]
    UnknownVirtualTable { table: String, module: String },
    #[error("virtual table {table} cannot be merged: {reason}")]
    UnmergeableVirtualTable { table: String, reason: String },
    #[error("--base {base} is a version of another database than {dst}")]
    BaseOfAnotherDatabase { base: String, dst: String },
    #[error("{src} and {dst} are branches of different databases; a merge brings together branches of one database")]
    DifferentDatabases { src: String, dst: String },
    #[error("{branch} cannot be merged into itself")]
    SameBranch { branch: String },
    #[error("resolution {id:?}: {reason}")]
    InvalidResolution { id: String, reason: String },
    /// SQLite failed while applying the merge to its scratch version (not a constraint:
    /// those are reported as violations).
    #[error("applying the merge failed ({context}): {source}")]
    Apply {
        context: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("registering the scion VFS failed (SQLite code {0})")]
    Vfs(i32),
}

fn candidate_list(candidates: &[String]) -> String {
    if candidates.is_empty() {
        return String::new();
    }
    format!(
        "; their branches' lineage suggests {}",
        candidates.join(" or ")
    )
}

impl MergeError {
    pub(crate) fn apply(context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> Self {
        let context = context.into();
        move |source| MergeError::Apply { context, source }
    }
}

impl From<EngineError> for MergeError {
    fn from(e: EngineError) -> Self {
        MergeError::Core(e.into())
    }
}

pub type MergeResult<T> = Result<T, MergeError>;

impl MergeError {
    /// How front ends present this error: the exit code, stable code and hint of the one
    /// code set (a store error keeps its own).
    pub fn describe(&self) -> scion_core::described::Described {
        use scion_core::described::{describe, Context, Described, Exit};
        let d = |exit, code, hint: Option<String>| Described { exit, code, hint };
        match self {
            MergeError::Core(e) => describe(e, Context::Merge),
            MergeError::NoBase { .. } => d(
                Exit::InvalidInput,
                "no_merge_base",
                Some("name the version both started from: --base db@branch[@checkpoint]".into()),
            ),
            MergeError::SeveralBases { .. } => d(
                Exit::InvalidInput,
                "no_merge_base",
                Some("name the one to merge against: --base db@branch[@checkpoint] (a checkpoint or head holding it)".into()),
            ),
            MergeError::BaseUnknown { candidates, .. } => d(
                Exit::InvalidInput,
                "no_merge_base",
                Some(match candidates.first() {
                    Some(c) => format!("check the candidates and pass the right one, e.g. --base {c}"),
                    None => "name the version both started from: --base db@branch[@checkpoint]".into(),
                }),
            ),
            MergeError::DifferentDatabases { .. }
            | MergeError::SameBranch { .. }
            | MergeError::BaseOfAnotherDatabase { .. }
            | MergeError::UnknownVirtualTable { .. }
            | MergeError::UnmergeableVirtualTable { .. } => {
                d(Exit::InvalidInput, "invalid_input", None)
            }
            MergeError::InvalidResolution { .. } => d(
                Exit::InvalidInput,
                "invalid_resolution",
                Some("a resolution is \"ours\", \"theirs\", a cell's value, or for a row an object of column values; ids come from the report of a --dry-run".into()),
            ),
            MergeError::Apply { .. } | MergeError::Vfs(_) => d(Exit::Failure, "merge_failed", None),
        }
    }

    /// Whether the same merge may succeed if retried (the destination moved meanwhile).
    pub fn is_retryable(&self) -> bool {
        matches!(self, MergeError::Core(e) if e.is_retryable())
    }
}
