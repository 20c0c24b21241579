//! What a merge can fail with (conflicts and violations are not failures: they are data in
//! the report).

use scion_described::{describe_engine, Context, Described, DescribedError, Exit};
use scion_engine::EngineError;

/// Why a merge did not run to a report.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// The store, a ref or a head move refused or failed (a lease held, a protected
    /// destination, the destination moved while the merge ran, ...).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The working files refused the move (a checkout of the destination holding changes
    /// never checkpointed, or open) or failed.
    #[error(transparent)]
    Files(FilesError),
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
    #[error("the best common version of {src} and {dst} is {base}, but gc reclaimed its pages (versions no branch, checkpoint or fork point names are kept only for the head history's retention)")]
    BaseReclaimed {
        src: String,
        dst: String,
        base: String,
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
    #[error("{src} has rows that merge #{entry} into {dst} gave new ids (in {}), and changes them or rows that refer to them under its own ids: merged now, those changes would land on {dst}'s rows of the same ids", tables.join(", "))]
    RenumberedSource {
        /// The source's branch (a checkpoint of it keeps the same ids).
        src: String,
        dst: String,
        entry: u64,
        tables: Vec<String>,
    },
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

pub type MergeResult<T> = Result<T, MergeError>;

impl MergeError {
    /// How front ends present this error: the exit code, stable code and hint of the one
    /// code set (a store error keeps its own).
    pub fn describe(&self) -> Described {
        let d = |exit, code, hint: Option<String>| Described { exit, code, hint };
        match self {
            MergeError::Engine(e) => describe_engine(e),
            MergeError::Files(e) => e.0.describe(Context::Merge),
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
            MergeError::BaseReclaimed { .. } => d(
                Exit::InvalidInput,
                "no_merge_base",
                Some("name a version both branches hold that is still kept: --base db@branch[@checkpoint] (checkpoints and fork points keep versions from gc; `scion config --history-retention` keeps replaced heads longer)".into()),
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
            MergeError::RenumberedSource { src, dst, .. } => d(
                Exit::Refused,
                "renumbered_source",
                Some(format!(
                    "bring {src} up to date before it changes those rows (`scion merge {dst} --into {src}`, a fast-forward while it has not moved), so they take {dst}'s ids; changes it has made already are made again on a fork of {dst}"
                )),
            ),
            MergeError::Apply { .. } | MergeError::Vfs(_) => d(Exit::Failure, "merge_failed", None),
        }
    }

    /// Whether the same merge may succeed if retried (the destination moved meanwhile).
    pub fn is_retryable(&self) -> bool {
        match self {
            MergeError::Engine(e) => e.is_retryable(),
            MergeError::Files(e) => e.0.is_retryable(),
            _ => false,
        }
    }

    /// The working files' error `e`, kept to be described.
    pub fn files(e: impl DescribedError) -> Self {
        MergeError::Files(FilesError(Box::new(e)))
    }

    /// The engine's error this is, or wraps (through the working files' error).
    pub fn engine_error(&self) -> Option<&EngineError> {
        match self {
            MergeError::Engine(e) => Some(e),
            MergeError::Files(e) => e.0.engine_error(),
            _ => None,
        }
    }

    /// The working files' error, as its own type (`scion_engine::CoreError`).
    pub fn files_error<E: DescribedError>(&self) -> Option<&E> {
        match self {
            MergeError::Files(e) => (e.0.as_ref() as &dyn std::error::Error).downcast_ref(),
            _ => None,
        }
    }
}

/// An error of the working files a merge was given, boxed (the merge does not know their
/// type); [`MergeError::files_error`] gives it back as its own type.
#[derive(Debug)]
pub struct FilesError(Box<dyn DescribedError>);

impl std::fmt::Display for FilesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for FilesError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// A name that is not one, as the engine reports it.
impl From<scion_engine::names::NameError> for MergeError {
    fn from(e: scion_engine::names::NameError) -> Self {
        MergeError::Engine(e.into())
    }
}
