//! What a merge is asked to do and what it answers: options in, a report out. A dry run and
//! a real run give the same report; only `published` differs.

use std::collections::BTreeMap;

use scion_engine::Target;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// What to do with a conflict no resolution names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Any unresolved conflict publishes nothing.
    #[default]
    Fail,
    /// Keep the destination's side.
    Ours,
    /// Take the source's side.
    Theirs,
}

/// What counts as one conflict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Granularity {
    /// Edits to different columns of one row merge; the same column changed two ways is
    /// a conflict.
    #[default]
    Cell,
    /// Any row both sides changed differently is a conflict, whatever the columns.
    Row,
}

/// Which schema changes a merge carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchemaPolicy {
    /// New tables, indexes, views and triggers are carried; any change to the definition
    /// of a table the other side changed rows of is a schema conflict.
    #[default]
    Refuse,
    /// As `refuse`, and an `ADD COLUMN` on one side is carried even where the other side
    /// changed rows of that table (its rows are matched by column name).
    OneSided,
}

/// One conflict's resolution: a side, or the value(s) to write.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    Ours,
    Theirs,
    /// For a cell conflict, the cell's value; for a row conflict, an object of column
    /// values written over the source's row (or the destination's, where the source
    /// deleted it).
    Value(Json),
}

impl Resolution {
    /// `"ours"`, `"theirs"`, or any other JSON value (written as it is).
    pub fn from_json(v: Json) -> Self {
        match v.as_str() {
            Some("ours") => Resolution::Ours,
            Some("theirs") => Resolution::Theirs,
            _ => Resolution::Value(v),
        }
    }
}

/// How to merge.
#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    /// Compute and check everything, publish nothing.
    pub dry_run: bool,
    pub strategy: Strategy,
    pub granularity: Granularity,
    pub schema_policy: SchemaPolicy,
    /// Resolutions by conflict id; they take precedence over the strategy.
    pub resolutions: BTreeMap<String, Resolution>,
    /// Publish even if the result violates UNIQUE, NOT NULL, CHECK or foreign keys (a
    /// change that SQLite cannot store at all is left out and reported).
    pub allow_violations: bool,
    /// The version both sides are compared against, where the version graph cannot tell
    /// (several best common versions, or versions written before it).
    pub base: Option<Target>,
    /// Merge into a protected branch.
    pub allow_protected: bool,
    /// Rows both sides inserted under the same INTEGER PRIMARY KEY with different values
    /// are two rows: the source's new rows of that table, from the first such id on, get
    /// ids after every id the destination uses, and the source's references to them
    /// through declared foreign keys follow.
    pub renumber: bool,
}

/// How a merge ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The destination already holds every change of the source.
    UpToDate,
    /// The destination had not moved since the base: it now names the source's version.
    FastForward,
    /// A new version of the destination holds both sides' changes.
    Merged,
    /// Conflicts or violations stopped it: nothing was published.
    Conflicts,
}

/// Where the base came from.
#[derive(Debug, Clone, Serialize)]
pub struct BaseReport {
    /// For people: which version, and why it is the base.
    pub how: String,
    pub root: String,
}

/// The kinds of conflict, named ours/theirs: `update/delete` is ours updated the row and
/// theirs deleted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ConflictKind {
    #[serde(rename = "update/update")]
    UpdateUpdate,
    #[serde(rename = "update/delete")]
    UpdateDelete,
    #[serde(rename = "delete/update")]
    DeleteUpdate,
    #[serde(rename = "insert/insert")]
    InsertInsert,
    /// A table without a primary key: one side removed copies of a row the other side no
    /// longer has.
    #[serde(rename = "delete/delete")]
    DeleteDelete,
}

/// One cell both sides changed: the three values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellValues {
    pub name: String,
    pub base: Json,
    pub ours: Json,
    pub theirs: Json,
}

/// One conflict. Its `id` is stable (`table:key` or `table:key:column`), for a
/// resolutions file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conflict {
    pub id: String,
    pub table: String,
    pub kind: ConflictKind,
    pub key: Json,
    /// For a cell (or row) conflict of two updates: the columns and their three values.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<CellValues>,
    /// The whole rows, where a side inserted or deleted one (null: no row).
    pub base: Option<Json>,
    pub ours: Option<Json>,
    pub theirs: Option<Json>,
    /// `ours`, `theirs`, `value` (from the resolutions file) or `unresolved`.
    pub resolution: &'static str,
}

/// A schema object changed in a way the merge does not combine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemaConflict {
    pub kind: String,
    pub name: String,
    pub reason: String,
    pub base_sql: Option<String>,
    pub ours_sql: Option<String>,
    pub theirs_sql: Option<String>,
}

/// A schema change of the source carried into the result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemaStep {
    pub kind: String,
    pub name: String,
    /// `create`, `drop`, `add-column` or `rebuild`.
    pub action: &'static str,
    pub sql: Option<String>,
}

/// What the result would break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    Unique,
    PrimaryKey,
    NotNull,
    Check,
    ForeignKey,
    /// Another constraint SQLite enforced (its message says which).
    Constraint,
}

/// One violation, row by row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    pub kind: ViolationKind,
    pub table: String,
    /// The row that breaks it: its key (for a foreign key, the child row's rowid).
    pub key: Json,
    /// For a foreign key: the parent table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// SQLite's words, for a constraint it enforced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Per table: what the source brought and how much of it merged.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TableReport {
    pub table: String,
    pub matched_by: String,
    /// An ordinary table keyed by an INTEGER PRIMARY KEY (its rowid; a virtual table's
    /// rowids are its module's): rows both sides added under one id are kept apart by
    /// `renumber`.
    pub keyed_by_id: bool,
    pub theirs_inserted: usize,
    pub theirs_updated: usize,
    pub theirs_deleted: usize,
    /// Cells of rows both sides changed that merged (different columns) or agreed.
    pub merged_cells: usize,
    pub conflicts: usize,
}

/// A row the source inserted, given a new id because the destination had used its id
/// for another row since the base (`renumber`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Renumbered {
    pub table: String,
    /// The INTEGER PRIMARY KEY column.
    pub column: String,
    /// The id the source gave it.
    pub from: i64,
    /// The id it has in the result.
    pub to: i64,
}

/// References to renumbered rows, through a declared foreign key, in rows the source
/// inserted or changed: made to name the rows' new ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FollowedReferences {
    pub table: String,
    pub column: String,
    /// The table of the renumbered rows.
    pub parent: String,
    /// How many rows' references were changed.
    pub rows: usize,
}

/// The published result.
#[derive(Debug, Clone, Serialize)]
pub struct Published {
    pub version: u64,
    /// The entry in the destination's head history (`scion log`); `scion undo` takes it
    /// back.
    pub history_entry: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl From<scion_engine::ops::moves::MoveReport> for Published {
    fn from(moved: scion_engine::ops::moves::MoveReport) -> Self {
        Published {
            version: moved.version,
            history_entry: moved.history_entry,
            warnings: moved.warnings,
        }
    }
}

/// Everything a merge found and did. Complete whatever the outcome: every conflict and
/// every violation is listed.
#[derive(Debug, Clone, Serialize)]
pub struct MergeReport {
    pub src: String,
    pub dst: String,
    pub dry_run: bool,
    pub outcome: Outcome,
    pub base: BaseReport,
    pub strategy: Strategy,
    pub granularity: Granularity,
    pub schema_policy: SchemaPolicy,
    pub schema: Vec<SchemaStep>,
    pub schema_conflicts: Vec<SchemaConflict>,
    pub tables: Vec<TableReport>,
    pub conflicts: Vec<Conflict>,
    pub violations: Vec<Violation>,
    /// The source's new rows given new ids (`renumber`), in table and id order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub renumbered: Vec<Renumbered>,
    /// The source's references to them that were made to follow.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub followed_references: Vec<FollowedReferences>,
    /// Conflicts no resolution or strategy settled: under `fail` they stop the merge.
    pub unresolved: usize,
    /// Resolution ids that named no conflict (a typo, or a conflict that went away).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unused_resolutions: Vec<String>,
    /// Pages read to compute both sides' changes.
    pub pages_read: u64,
    pub published: Option<Published>,
}

impl MergeReport {
    /// Whether conflicts or violations stopped the merge.
    pub fn stopped(&self) -> bool {
        self.outcome == Outcome::Conflicts
    }
}
