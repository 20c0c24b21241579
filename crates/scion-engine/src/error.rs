use std::path::PathBuf;

use scion_store::StoreError;

use crate::names::{BranchRef, DbName, RemoteName};

/// What an [`Engine`](crate::Engine) operation can refuse or fail at: the store, its names,
/// refs and versions, and the SQLite files it reads or writes as a whole. Nothing about this
/// host's checkouts, which an engine does not have.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    #[error("invalid {kind} name {name:?}: {reason}")]
    InvalidName {
        kind: &'static str,
        name: String,
        reason: &'static str,
    },
    #[error("invalid target {target:?}: {reason}")]
    InvalidTarget {
        target: String,
        reason: &'static str,
    },
    #[error("no scion store at {location} (run `scion init` first)")]
    NotInitialized { location: String },
    #[error("a scion store already exists at {location}")]
    AlreadyInitialized { location: String },
    #[error("{what} has format version {found}, newer than this scion understands ({supported}); upgrade scion")]
    FormatTooNew {
        what: String,
        found: u32,
        supported: u32,
    },
    #[error("database {db}{} does not exist", at_remote(remote))]
    DatabaseNotFound {
        db: DbName,
        /// The remote store looked in, when it was not this one.
        remote: Option<RemoteName>,
    },
    #[error("database {db} already exists")]
    DatabaseExists { db: DbName },
    #[error("branch {branch}{} does not exist", at_remote(remote))]
    BranchNotFound {
        branch: BranchRef,
        /// The remote store looked in, when it was not this one.
        remote: Option<RemoteName>,
    },
    #[error("branch {branch} already exists")]
    BranchExists { branch: BranchRef },
    #[error("checkpoint {checkpoint} does not exist")]
    CheckpointNotFound { checkpoint: String },
    #[error("checkpoint {checkpoint} already exists")]
    CheckpointExists { checkpoint: String },
    #[error("checkpoint name {name:?} is reserved")]
    ReservedName { name: String },
    #[error("branch {branch} changed while this operation ran (another writer won); nothing was changed by this one")]
    Conflict { branch: BranchRef },
    #[error("branch {branch} is checked out ({}): it is written through that file, not by page writers", checkouts.join(", "))]
    CheckedOut {
        branch: BranchRef,
        /// `host:path` of each writable checkout.
        checkouts: Vec<String>,
    },
    #[error("{path} is locked by another connection (a write in progress); it was not read")]
    SourceBusy { path: PathBuf },
    #[error("{path} has a hot journal ({path}-journal): a transaction was interrupted and must be rolled back before the file can be read")]
    HotJournal { path: PathBuf },
    #[error("{path} is not a usable SQLite database: {reason}")]
    NotSqlite { path: PathBuf, reason: String },
    #[error("{branch}@{checkpoint} names a checkpoint; a writable checkout is of a branch head")]
    CheckpointTarget {
        branch: BranchRef,
        checkpoint: String,
    },
    #[error("corrupt store data in {object}: {reason}")]
    Corrupt { object: String, reason: String },
    #[error("branch {branch} is protected: {action} needs --force")]
    Protected {
        branch: BranchRef,
        action: &'static str,
    },
    #[error("branch {branch} is leased by {holder} until {expires}")]
    LeaseHeld {
        branch: BranchRef,
        holder: String,
        expires: String,
    },
    #[error("branch {branch} is being destroyed")]
    BeingDestroyed { branch: BranchRef },
    #[error("table {table:?} exists on neither side of the diff")]
    NoSuchTable { table: String },
    #[error("invalid duration {value:?}: {reason}")]
    InvalidDuration { value: String, reason: String },
    #[error("a commit to {branch} took {took_secs} s, longer than half the store's minimum GC grace, and a GC removed part of it meanwhile; nothing was published: retry")]
    CommitExpired { branch: BranchRef, took_secs: u64 },
    #[error("a commit to {branch} was published, but a GC run with a grace below the store's minimum removed its data; the previous head was put back: retry, and keep `gc --grace` at or above the minimum")]
    CommitLost { branch: BranchRef },
    #[error("the store failed verification: {problems} problem(s)")]
    VerifyFailed { problems: usize },
    #[error("a grace of {grace} is below this store's minimum of {minimum}: a commit in flight could lose its data; pass --force only while nothing else writes to the store")]
    GraceBelowMinimum { grace: String, minimum: String },
    #[error("nothing to undo on {branch}: {reason}")]
    NothingToUndo { branch: BranchRef, reason: String },
    #[error("{branch} has no history entry #{entry} (`scion log {branch}` lists them)")]
    HistoryEntryNotFound { branch: BranchRef, entry: u64 },
    #[error("invalid input: {reason}")]
    InvalidInput { reason: String },
    #[error("segment id {id} is already taken in the store; retry the operation")]
    SegmentCollision { id: String },
    #[error("no remote named {remote} (`scion remote list` shows them)")]
    RemoteNotFound { remote: String },
    #[error("remote {remote} already exists ({location})")]
    RemoteExists { remote: String, location: String },
    #[error("{remote}'s {branch} has a version this side does not hold (version {theirs}): pull and merge first")]
    NotFastForward {
        remote: String,
        branch: BranchRef,
        theirs: u64,
    },
    #[error("{remote}'s {branch} moved since it was last seen (expected {expected}, found {found}); nothing was pushed: pull first")]
    RemoteMoved {
        remote: RemoteName,
        branch: BranchRef,
        /// The remote head this store last saw (`version N (root)`).
        expected: Box<str>,
        /// The remote head found now.
        found: Box<str>,
    },
    #[error("{branch} is a remote-tracking branch: only `scion pull` moves it")]
    TrackingBranch { branch: BranchRef },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("SQLite error on {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("i/o error on {path}: {source}")]
    Io {
        path: PathBuf,
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

    pub fn corrupt(object: impl Into<String>, reason: impl Into<String>) -> Self {
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
