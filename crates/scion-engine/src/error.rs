use std::path::PathBuf;

use scion_store::StoreError;

use crate::names::{BranchRef, DbName, RemoteName, Target};

/// What an [`Engine`](crate::Engine) operation can refuse or fail at: the store, its names,
/// refs and versions, and the SQLite files it reads or writes as a whole. Nothing about this
/// host's checkouts, which an engine does not have.
///
/// Not `#[non_exhaustive]`, unlike the engine's other enums: `scion-described` matches it
/// whole, so an error added here cannot reach a front end without its own stable code.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A name, target or owner that is not one (refused where it was parsed).
    #[error(transparent)]
    Name(#[from] crate::names::NameError),
    /// No store at the location.
    #[error("no scion store at {location}")]
    NotInitialized {
        /// Where the store is, or was looked for.
        location: String,
    },
    /// `init` found a store at the location already.
    #[error("a scion store already exists at {location}")]
    AlreadyInitialized {
        /// Where the store is, or was looked for.
        location: String,
    },
    /// An object written by a newer scion, which this one must not rewrite.
    #[error("{what} has format version {found}, newer than this scion understands ({supported}); upgrade scion")]
    FormatTooNew {
        /// What was read (an object or file written by a newer scion).
        what: String,
        /// Its format version.
        found: u32,
        /// The newest format version this scion reads.
        supported: u32,
    },
    /// No such database.
    #[error("database {db}{} does not exist", at_remote(remote))]
    DatabaseNotFound {
        /// The database.
        db: DbName,
        /// The remote store looked in, when it was not this one.
        remote: Option<RemoteName>,
    },
    /// `create` found the database already.
    #[error("database {db} already exists")]
    DatabaseExists {
        /// The database.
        db: DbName,
    },
    /// No such branch.
    #[error("branch {branch}{} does not exist", at_remote(remote))]
    BranchNotFound {
        /// The branch.
        branch: BranchRef,
        /// The remote store looked in, when it was not this one.
        remote: Option<RemoteName>,
    },
    /// A branch of that name exists already.
    #[error("branch {branch} already exists")]
    BranchExists {
        /// The branch.
        branch: BranchRef,
    },
    /// No such checkpoint.
    #[error("checkpoint {checkpoint} does not exist")]
    CheckpointNotFound {
        /// The checkpoint, as `db@branch@name`.
        checkpoint: Target,
    },
    /// A checkpoint of that name exists already (names are never rebound).
    #[error("checkpoint {checkpoint} already exists")]
    CheckpointExists {
        /// The checkpoint, as `db@branch@name`.
        checkpoint: Target,
    },
    /// A checkpoint name scion keeps for itself (`fork`, `init`).
    #[error("checkpoint name {name:?} is reserved")]
    ReservedName {
        /// The name asked for.
        name: String,
    },
    /// Another writer moved the branch first; this operation changed nothing.
    #[error("branch {branch} changed while this operation ran (another writer won); nothing was changed by this one")]
    Conflict {
        /// The branch.
        branch: BranchRef,
    },
    /// A page writer (the VFS, a capture) refused: the branch is written through its
    /// checkout files.
    #[error("branch {branch} is checked out ({}): it is written through that file, not by page writers", checkouts.join(", "))]
    CheckedOut {
        /// The branch.
        branch: BranchRef,
        /// `host:path` of each writable checkout.
        checkouts: Vec<String>,
    },
    /// A file to read is locked by a writer.
    #[error("{path} is locked by another connection (a write in progress); it was not read")]
    SourceBusy {
        /// The file.
        path: PathBuf,
    },
    /// A file to read holds an interrupted transaction.
    #[error("{path} has a hot journal ({path}-journal): a transaction was interrupted and must be rolled back before the file can be read")]
    HotJournal {
        /// The file.
        path: PathBuf,
    },
    /// A file that is not a SQLite database scion can read.
    #[error("{path} is not a usable SQLite database: {reason}")]
    NotSqlite {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A checkpoint named where a branch head is needed.
    #[error("{branch}@{checkpoint} names a checkpoint; a writable checkout is of a branch head")]
    CheckpointTarget {
        /// The branch.
        branch: BranchRef,
        /// The checkpoint named.
        checkpoint: String,
    },
    /// Damaged or missing data in the store.
    #[error("corrupt store data in {object}: {reason}")]
    Corrupt {
        /// The store object (or file) it was found in.
        object: String,
        /// Why.
        reason: String,
    },
    /// The branch is protected and the operation was not forced.
    #[error("branch {branch} is protected: {action} needs force")]
    Protected {
        /// The branch.
        branch: BranchRef,
        /// What was refused (`destroying it`, ...).
        action: &'static str,
    },
    /// Another holder's lease on the branch is live.
    #[error("branch {branch} is leased by {holder} until {expires}")]
    LeaseHeld {
        /// The branch.
        branch: BranchRef,
        /// Who holds the lease.
        holder: String,
        /// When it ends (store clock).
        expires: String,
    },
    /// The branch is being destroyed.
    #[error("branch {branch} is being destroyed")]
    BeingDestroyed {
        /// The branch.
        branch: BranchRef,
    },
    /// A diff of a table neither side has.
    #[error("table {table:?} exists on neither side of the diff")]
    NoSuchTable {
        /// The table asked for.
        table: String,
    },
    /// A duration that does not parse.
    #[error("invalid duration {value:?}: {reason}")]
    InvalidDuration {
        /// The text given.
        value: String,
        /// Why.
        reason: String,
    },
    /// A commit outlived half the store's minimum grace and lost data to a GC; nothing was
    /// published.
    #[error("a commit to {branch} took {took_secs} s, longer than half the store's minimum GC grace, and a GC removed part of it meanwhile; nothing was published: retry")]
    CommitExpired {
        /// The branch.
        branch: BranchRef,
        /// How long the commit took, in seconds.
        took_secs: u64,
    },
    /// A published commit lost data to a GC run below the minimum grace; the head was put
    /// back.
    #[error("a commit to {branch} was published, but a GC run with a grace below the store's minimum removed its data; the previous head was put back: retry, and keep gc's grace at or above the minimum")]
    CommitLost {
        /// The branch.
        branch: BranchRef,
    },
    /// `verify` found damage.
    #[error("the store failed verification: {problems} problem(s)")]
    VerifyFailed {
        /// How many problems were found.
        problems: usize,
    },
    /// A GC grace below the store's minimum, not forced.
    #[error("a grace of {grace} is below this store's minimum of {minimum}: a commit in flight could lose its data; force it only while nothing else writes to the store")]
    GraceBelowMinimum {
        /// The grace asked for.
        grace: String,
        /// The store's minimum grace.
        minimum: String,
    },
    /// `undo` found no move to take back.
    #[error("nothing to undo on {branch}: {reason}")]
    NothingToUndo {
        /// The branch.
        branch: BranchRef,
        /// Why.
        reason: String,
    },
    /// No such entry in the branch's head history.
    #[error("{branch} has no history entry #{entry}")]
    HistoryEntryNotFound {
        /// The branch.
        branch: BranchRef,
        /// The entry asked for.
        entry: u64,
    },
    /// Input an operation cannot take, with the reason.
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// Why.
        reason: String,
    },
    /// `restore` of a branch that exists, without the history entry to go back to.
    #[error("{branch} exists: name the history entry to restore")]
    RestoreNeedsEntry {
        /// The branch.
        branch: BranchRef,
    },
    /// A segment id drawn at random was taken (retried before it reaches a caller).
    #[error("segment id {id} is already taken in the store; retry the operation")]
    SegmentCollision {
        /// The segment id.
        id: String,
    },
    /// No remote of that name.
    #[error("no remote named {remote}")]
    RemoteNotFound {
        /// The remote's name.
        remote: RemoteName,
    },
    /// A remote of that name exists already.
    #[error("remote {remote} already exists ({location})")]
    RemoteExists {
        /// The remote's name.
        remote: RemoteName,
        /// Where the store is, or was looked for.
        location: String,
    },
    /// A push the remote's branch is not an ancestor of.
    #[error("{remote}'s {branch} has a version this side does not hold (version {theirs}): pull and merge first")]
    NotFastForward {
        /// The remote's name.
        remote: RemoteName,
        /// The branch.
        branch: BranchRef,
        /// The number of the remote's version.
        theirs: u64,
    },
    /// The remote's branch moved between reading and pushing.
    #[error("{remote}'s {branch} moved since it was last seen (expected {expected}, found {found}); nothing was pushed: pull first")]
    RemoteMoved {
        /// The remote's name.
        remote: RemoteName,
        /// The branch.
        branch: BranchRef,
        /// The remote head this store last saw (`version N (root)`).
        expected: Box<str>,
        /// The remote head found now.
        found: Box<str>,
    },
    /// A remote-tracking branch written by anything but a pull.
    #[error("{branch} is a remote-tracking branch: only a pull moves it")]
    TrackingBranch {
        /// The branch.
        branch: BranchRef,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// SQLite failed on a file.
    #[error("SQLite error on {path}: {source}")]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: rusqlite::Error,
    },
    /// An I/O failure on a file.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },
}

impl EngineError {
    /// Whether the same call may succeed if repeated as is.
    pub fn is_retryable(&self) -> bool {
        match self {
            EngineError::Store(e) => e.is_retryable(),
            EngineError::SourceBusy { .. }
            | EngineError::SegmentCollision { .. }
            | EngineError::CommitExpired { .. }
            | EngineError::CommitLost { .. }
            | EngineError::LeaseHeld { .. } => true,
            _ => false,
        }
    }

    /// A database SQLite refuses to read as one (garbage bytes, a damaged file).
    pub fn is_unreadable_database(&self) -> bool {
        match self {
            EngineError::NotSqlite { .. } => true,
            EngineError::Sqlite {
                source: rusqlite::Error::SqliteFailure(e, _),
                ..
            } => matches!(
                e.code,
                rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt
            ),
            _ => false,
        }
    }

    /// SQLite said another connection holds a lock it needs.
    pub(crate) fn is_sqlite_busy(&self) -> bool {
        matches!(
            self,
            EngineError::Sqlite {
                source: rusqlite::Error::SqliteFailure(e, _),
                ..
            } if matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            )
        )
    }

    /// An I/O failure at `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        EngineError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn sqlite(path: impl Into<PathBuf>, source: rusqlite::Error) -> Self {
        EngineError::Sqlite {
            path: path.into(),
            source,
        }
    }

    /// Damaged data in the store object (or file) `object`, for `reason`.
    pub(crate) fn corrupt(object: impl Into<String>, reason: impl Into<String>) -> Self {
        EngineError::Corrupt {
            object: object.into(),
            reason: reason.into(),
        }
    }
}

/// The result of an engine operation.
pub type EngineResult<T> = Result<T, EngineError>;

/// ` at REMOTE` for an error about another store, else nothing.
fn at_remote(remote: &Option<RemoteName>) -> String {
    remote
        .as_ref()
        .map(|r| format!(" at {r}"))
        .unwrap_or_default()
}
