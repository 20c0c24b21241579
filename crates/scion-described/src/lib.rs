//! How errors are presented by every front end (the CLI's exit codes and `--json`, the
//! daemon's HTTP errors, the SDKs' exceptions, the VFS's last failure): one closed set of
//! codes, each with an exit code and a hint that says what to do next. The engine's errors
//! are described here; the working tree's (`scion-core`) build on these words. The
//! libraries below say what went wrong; the words about what to type next live here.

#![deny(missing_docs)]

use scion_store::StoreError;

use scion_engine::names::NameError;
use scion_engine::EngineError;

/// Exit codes are part of the interface: scripts branch on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub enum Exit {
    /// The operation failed (the store, SQLite or the file system).
    Failure = 1,
    /// What was named does not exist.
    NotFound = 3,
    /// What was to be made exists already.
    AlreadyExists = 4,
    /// Another writer won; nothing was changed, and a retry may succeed.
    Conflict = 5,
    /// Refused to protect data (a protected branch, a lease, unsaved changes).
    Refused = 6,
    /// The store holds damaged or missing data.
    Corrupt = 7,
    /// Input that is not valid.
    InvalidInput = 8,
    /// A passing failure (the store briefly unavailable): retry.
    Transient = 9,
    /// Not possible here (a filesystem that cannot clone, a feature not built).
    Unsupported = 10,
    /// A merge found conflicts or violations and published nothing (its report says
    /// which); not an error of the tool.
    MergeStopped = 11,
}

/// An error as front ends present it: exit code, stable code string, and what to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// The exit code.
    pub exit: Exit,
    /// The stable code scripts match on (`dirty_checkout`, `protected`, ...).
    pub code: &'static str,
    /// What to do next, when there is something to say.
    pub hint: Option<String>,
}

/// The command that failed, where a hint depends on it: commands with their own `--force`
/// that discards a checkout's changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Context {
    /// `scion rollback`.
    Rollback,
    /// `scion promote`.
    Promote,
    /// `scion destroy`.
    Destroy,
    /// `scion compact`.
    Compact,
    /// `scion checkout --release`.
    Release,
    /// `scion merge`: it never discards a checkout's changes.
    Merge,
    /// Any other command.
    Other,
}

impl Context {
    /// The command whose `--force` discards a checkout's changes, if this is one.
    pub fn discarding_command(self) -> Option<&'static str> {
        match self {
            Context::Rollback => Some("rollback"),
            Context::Promote => Some("promote"),
            Context::Destroy => Some("destroy"),
            Context::Compact => Some("compact"),
            // Named in full where it is used: it needs the branch.
            Context::Release => None,
            Context::Merge | Context::Other => None,
        }
    }
}

/// An error a front end can present whatever crate it came from: what a caller that is
/// generic over where its errors come from (the merge, over the working files it is given)
/// keeps, boxed, to describe later.
pub trait DescribedError: std::error::Error + Send + Sync + 'static {
    /// How the error is presented when the command `context` failed.
    fn describe(&self, context: Context) -> Described;
    /// Whether the same call may succeed if repeated as is.
    fn is_retryable(&self) -> bool;
    /// The engine's error this one is, or wraps.
    fn engine_error(&self) -> Option<&EngineError>;
}

impl DescribedError for EngineError {
    fn describe(&self, _: Context) -> Described {
        describe_engine(self)
    }

    fn is_retryable(&self) -> bool {
        EngineError::is_retryable(self)
    }

    fn engine_error(&self) -> Option<&EngineError> {
        Some(self)
    }
}

/// How the engine's error `e` is presented (whatever the command: none of its hints
/// depends on one).
pub fn describe_engine(e: &EngineError) -> Described {
    use EngineError::*;
    let d = |exit, code, hint: Option<String>| Described { exit, code, hint };
    match e {
        Name(NameError::InvalidName { reason, .. }) => d(Exit::InvalidInput, "invalid_name", scion_engine::names::CHARACTER_REASONS.contains(reason).then(|| "names use a-z, 0-9, '.', '_' and '-' and start with a letter or digit".into())),
        // The reason says what was expected.
        Name(NameError::InvalidTarget { .. }) => d(Exit::InvalidInput, "invalid_name", None),
        Name(NameError::InvalidOwner { .. }) => d(Exit::InvalidInput, "invalid_input", None),
        NotInitialized { .. } => d(Exit::NotFound, "not_initialized", Some("run `scion init`, or point --store / SCION_STORE at an existing store".into())),
        AlreadyInitialized { .. } => d(Exit::AlreadyExists, "already_initialized", None),
        FormatTooNew { .. } => d(Exit::Unsupported, "format_too_new", Some("upgrade scion to read this store".into())),
        DatabaseNotFound { .. } => d(Exit::NotFound, "database_not_found", Some("`scion status` lists the databases".into())),
        DatabaseExists { .. } => d(Exit::AlreadyExists, "database_exists", None),
        BranchNotFound { branch, .. } => d(Exit::NotFound, "branch_not_found", Some(format!("`scion branches {}` lists the branches", branch.db))),
        BranchExists { .. } => d(Exit::AlreadyExists, "branch_exists", Some("pick another name".into())),
        CheckpointNotFound { checkpoint } => d(Exit::NotFound, "checkpoint_not_found", Some(format!("`scion checkpoints {}` lists them", checkpoint.branch))),
        CheckpointExists { .. } => d(Exit::AlreadyExists, "checkpoint_exists", Some("checkpoint names are unique per branch; pick another".into())),
        ReservedName { .. } => d(Exit::InvalidInput, "reserved_name", Some("'fork' and 'init' always name the fork point and the created version".into())),
        Conflict { .. } => d(Exit::Conflict, "conflict", Some("read the branch again and retry if it still makes sense".into())),
        CheckedOut { branch, .. } => d(Exit::Refused, "checked_out", Some(format!("write through the checkout file, or keep its changes with `scion checkpoint {branch} <name>` and release it with `scion checkout {branch} --release`"))),
        NotSqlite { .. } => d(Exit::InvalidInput, "not_sqlite", None),
        CheckpointTarget { branch, checkpoint } => d(Exit::InvalidInput, "checkpoint_target", Some(format!("`scion checkout {branch}@{checkpoint} --read-only` gives a read-only file of it; `scion fork {branch} <new> --at {checkpoint}` a branch to write on"))),
        SourceBusy { .. } => d(Exit::Transient, "source_busy", Some("retry once the writer has committed".into())),
        HotJournal { path } => d(Exit::Refused, "hot_journal", Some(format!("have SQLite roll the interrupted transaction back by reading it once with write access, as `sqlite3 {} \"PRAGMA quick_check\"` does, then retry", shell_quoted(path)))),
        Corrupt { .. } => d(Exit::Corrupt, "corrupt", Some("the store holds damaged or missing data; nothing was changed; `scion verify` lists what is damaged".into())),
        Protected { .. } => d(Exit::Refused, "protected", Some("protected branches need --force for this".into())),
        RestoreNeedsEntry { branch } => d(Exit::InvalidInput, "invalid_input", Some(format!("`scion log {branch}` lists the entries; `scion restore {branch} --to <entry>` brings one back"))),
        LeaseHeld { holder, branch, .. } => d(Exit::Refused, "lease_held", Some(match session_of(holder) {
            Some(id) => format!("{branch} is being captured by session {id} of `scion serve`: commit through it with `scion session flush {id}`, or close it first with `scion session close {id}`"),
            None => format!("wait for the lease to expire, act as its holder (--holder / SCION_HOLDER), or break it with `scion lease release {branch} --force`"),
        })),
        BeingDestroyed { branch } => d(Exit::NotFound, "being_destroyed", Some(format!("a destroy of it was interrupted: `scion destroy {branch}` finishes it (so does any `gc` a minute after)"))),
        NoSuchTable { .. } => d(Exit::NotFound, "no_such_table", None),
        InvalidDuration { .. } => d(Exit::InvalidInput, "invalid_duration", Some("durations look like 30s, 10m, 2h, 7d".into())),
        InvalidInput { .. } => d(Exit::InvalidInput, "invalid_input", None),
        NothingToUndo { branch, .. } => d(Exit::Refused, "nothing_to_undo", Some(format!("`scion log {branch}` lists its moves; `scion restore {branch} --to <entry>` picks any of them"))),
        HistoryEntryNotFound { branch, .. } => d(Exit::NotFound, "history_entry_not_found", Some(format!("`scion log {branch}` lists the entries still kept"))),
        SegmentCollision { .. } => d(Exit::Transient, "segment_collision", Some("retry".into())),
        CommitExpired { .. } => d(Exit::Transient, "commit_expired", Some("retry; nothing was published".into())),
        CommitLost { .. } => d(Exit::Transient, "commit_lost", Some("retry the commit; never run `gc --force` with a short grace while others write".into())),
        VerifyFailed { .. } => d(Exit::Corrupt, "verify_failed", Some("restore damaged branches from a checkpoint or another store; `scion verify --json` lists each problem".into())),
        GraceBelowMinimum { .. } => d(Exit::Refused, "grace_below_minimum", Some("use a longer --grace, or --force when nothing else writes to the store".into())),
        RemoteNotFound { .. } => d(Exit::NotFound, "remote_not_found", Some("`scion remote list` shows them; `scion remote add <name> <location>` adds one".into())),
        RemoteExists { .. } => d(Exit::AlreadyExists, "remote_exists", Some("`scion remote remove <name>` first to point it elsewhere".into())),
        NotFastForward { remote, branch, .. } => d(Exit::Conflict, "not_fast_forward", Some(format!("`scion pull {remote} {branch}` brings their version and merges it; push again after it, or overwrite theirs with --force-with-lease"))),
        RemoteMoved { remote, branch, .. } => d(Exit::Conflict, "remote_moved", Some(format!("`scion pull {remote} {branch}` shows what they have now"))),
        TrackingBranch { branch } => d(Exit::Refused, "tracking_branch", Some(format!("fork it to write on it: `scion fork {branch} <new>`"))),
        Store(s) if s.is_retryable() => d(Exit::Transient, "store_transient", Some("retry; the store may be briefly unavailable".into())),
        Store(StoreError::NotFound { .. } | StoreError::OutOfRange { .. }) => d(Exit::Corrupt, "missing_data", Some("the store lacks data a version needs; `scion verify` lists what is damaged".into())),
        Store(StoreError::Unauthorized { .. }) => d(Exit::Refused, "unauthorized", Some("check the store's credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and permissions".into())),
        Store(StoreError::Config(m)) if m.starts_with("Azure") => d(Exit::InvalidInput, "store_config", Some("check --store and the AZURE_STORAGE_* variables (AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY or a SAS token, or AZURE_STORAGE_USE_EMULATOR=true)".into())),
        Store(StoreError::Config(_)) => d(Exit::InvalidInput, "store_config", Some("check --store and the SCION_S3_* variables".into())),
        Store(_) => d(Exit::Failure, "store_error", None),
        Sqlite { .. } => d(Exit::Failure, "sqlite_error", None),
        Io { .. } => d(Exit::Failure, "io_error", None),
    }
}

/// The daemon session a lease holder names (`<process>#<session id>`), if any.
fn session_of(holder: &str) -> Option<&str> {
    holder
        .split_once('#')
        .map(|(_, id)| id)
        .filter(|id| id.starts_with("s-"))
}

/// `path` as a shell word: as it is when that is safe, else in single quotes.
pub fn shell_quoted(path: &std::path::Path) -> String {
    let text = path.display().to_string();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}
