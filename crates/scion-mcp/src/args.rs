//! The tools' arguments. Every struct refuses unknown fields, so a misspelt `forse: true`
//! is an error rather than a silent no-op; `branch` defaults to `main`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

fn main_branch() -> String {
    "main".to_string()
}

fn max_rows() -> usize {
    200
}

fn max_bytes() -> usize {
    1 << 20
}

fn row_limit() -> usize {
    100
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Only this database (default: all).
    pub database: Option<String>,
    /// List each branch's checkpoints too.
    #[serde(default = "yes")]
    pub include_checkpoints: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkArgs {
    /// The database.
    pub database: String,
    /// The branch to fork from.
    #[serde(default = "main_branch")]
    pub branch: String,
    /// The new branch's name (a-z, 0-9, '.', '_', '-').
    pub new_branch: String,
    /// A checkpoint of `branch` to fork at (default: its head).
    pub at: Option<String>,
    /// How long the fork lives without activity, e.g. "2h" (default: the server's; capped
    /// by the server's maximum).
    pub ttl: Option<String>,
    /// Also open a session on the new fork (its file is then captured live).
    #[serde(default)]
    pub open_session: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckoutArgs {
    pub database: String,
    #[serde(default = "main_branch")]
    pub branch: String,
    /// A checkpoint to check out (read-only).
    pub at: Option<String>,
    /// A read-only file of the head instead of the writable checkout.
    #[serde(default)]
    pub read_only: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointArgs {
    pub database: String,
    #[serde(default = "main_branch")]
    pub branch: String,
    /// The checkpoint's name (unique on the branch).
    pub name: String,
    /// Kept with the checkpoint when the branch has a live session.
    #[serde(default)]
    pub meta: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackArgs {
    pub database: String,
    #[serde(default = "main_branch")]
    pub branch: String,
    /// The checkpoint to go back to.
    pub to: String,
    /// Needed for a protected branch (main is); refused unless the server allows force.
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogArgs {
    pub database: String,
    #[serde(default = "main_branch")]
    pub branch: String,
    /// At most this many entries, newest first (default 20).
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoArgs {
    pub database: String,
    pub branch: String,
    /// Needed for a protected branch (main is); refused unless the server allows force.
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreArgs {
    pub database: String,
    pub branch: String,
    /// The head-history entry (its `seq`, from scion_log) whose result to restore; default:
    /// a destroyed branch as it was, or the head before the latest undo.
    pub to: Option<u64>,
    /// Needed for a protected branch (main is); refused unless the server allows force.
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromoteArgs {
    pub database: String,
    /// The branch whose head is promoted.
    pub source: String,
    /// The branch that takes it.
    #[serde(default = "main_branch")]
    pub target: String,
    /// Needed for a protected target (main is); refused unless the server allows force.
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MergeArgs {
    pub database: String,
    /// The branch whose changes are merged (`branch`, or `branch@checkpoint`).
    pub source: String,
    /// The branch that receives them.
    #[serde(default = "main_branch")]
    pub target: String,
    /// Report what the merge would do and publish nothing (the default: run it once to
    /// see the conflicts, then again with `dry_run: false`).
    #[serde(default = "yes")]
    pub dry_run: bool,
    /// `fail` (default: any conflict left publishes nothing), `ours` or `theirs`.
    #[serde(default)]
    pub strategy: Option<String>,
    /// By conflict id from the report: "ours", "theirs", or the value to write.
    #[serde(default)]
    pub resolutions: Option<serde_json::Map<String, serde_json::Value>>,
    /// Rows both branches added under the same INTEGER PRIMARY KEY are kept as two rows:
    /// the source's get new ids after the target's, and its rows that refer to them
    /// through a foreign key follow (the report lists each id given).
    #[serde(default)]
    pub renumber: bool,
    /// Needed for a protected target (main is); refused unless the server allows force.
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DestroyArgs {
    pub database: String,
    pub branch: String,
    /// Needed for main and protected branches; refused unless the server allows force.
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TouchArgs {
    pub database: String,
    #[serde(default = "main_branch")]
    pub branch: String,
    /// A new TTL, e.g. "2h" (capped by the server's maximum).
    pub ttl: Option<String>,
    /// Needed to make a branch this agent does not own expire sooner; refused unless the
    /// server allows force.
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    pub database: String,
    /// `branch[@checkpoint]`.
    pub left: String,
    /// `branch[@checkpoint]`.
    pub right: String,
    /// Only this table.
    pub table: Option<String>,
    /// List the differing rows themselves (at most `limit` per table).
    #[serde(default)]
    pub rows: bool,
    #[serde(default = "row_limit")]
    pub limit: usize,
    /// Also give SQL that turns left into right.
    #[serde(default)]
    pub sql: bool,
    /// Read a side that is a branch with a checkout holding changes not yet checkpointed
    /// from that file, so the diff shows work in progress.
    #[serde(default)]
    pub working: bool,
    /// At most this many bytes of result; beyond it the row details are left out.
    #[serde(default = "max_bytes")]
    pub max_bytes: usize,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryArgs {
    pub database: String,
    /// One read-only statement (writes, ATTACH and writable pragmas are refused).
    pub sql: String,
    /// The versions to run it on, `branch[@checkpoint]` each (1 to 8).
    pub targets: Vec<String>,
    /// Other versions to read beside each target in the same statement, by schema name:
    /// `{"base": "main", "before": "main@v1"}` makes `base.items` and `before.items`
    /// (up to 8; read-only).
    #[serde(default)]
    pub attach: std::collections::BTreeMap<String, String>,
    /// Values for `?` parameters.
    #[serde(default)]
    pub params: Vec<serde_json::Value>,
    #[serde(default = "max_rows")]
    pub max_rows: usize,
    #[serde(default = "max_bytes")]
    pub max_bytes: usize,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionOpenArgs {
    pub database: String,
    /// The branch to capture; with `fork_from`, the new branch's name.
    pub branch: Option<String>,
    /// Fork this branch first: `"main"`, `"main@checkpoint"`, or `{branch, at?}`.
    pub fork_from: Option<ForkFrom>,
    /// The fork's TTL (with `fork_from`), and the session's.
    pub ttl: Option<String>,
    /// Close the session after this long without a commit or a request (default 30m).
    pub idle_timeout: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ForkFrom {
    Name(String),
    At { branch: String, at: Option<String> },
}

impl ForkFrom {
    /// As the daemon takes it: `branch` or `branch@checkpoint`.
    pub fn spec(&self) -> String {
        match self {
            ForkFrom::Name(s) => s.clone(),
            ForkFrom::At { branch, at: None } => branch.clone(),
            ForkFrom::At {
                branch,
                at: Some(c),
            } => format!("{branch}@{c}"),
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionCloseArgs {
    /// The session's id (s-...), or the branch it captures (db@branch).
    pub session_id: String,
    /// Commit what was captured before closing (false is refused: this server never
    /// discards captured work).
    #[serde(default = "yes")]
    pub flush: bool,
    /// Name the final state as this checkpoint first.
    pub checkpoint: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionStatusArgs {
    /// One session, by id (s-...) or by the branch it captures (db@branch); default: all.
    pub session_id: Option<String>,
}
