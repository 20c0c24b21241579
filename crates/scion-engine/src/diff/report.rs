//! What a diff reports: per table rows added, removed and changed, and schema changes.

use serde::Serialize;

use super::rows::RowChanges;

#[derive(Debug, Clone, Default)]
pub struct DiffOptions {
    pub table: Option<String>,
    pub sql: bool,
    /// List the differing rows themselves, at most this many per table.
    pub rows: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SchemaChange {
    pub kind: String,
    pub name: String,
    /// added, removed or changed
    pub change: String,
    pub old_sql: Option<String>,
    pub new_sql: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TableDiff {
    pub table: String,
    /// How rows are matched: "primary key (id)", or "rowid" where the table has none.
    pub matched_by: String,
    pub added: usize,
    pub removed: usize,
    pub changed: usize,
    /// The rows themselves, with `DiffOptions::rows`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<RowChanges>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DiffReport {
    pub left: String,
    pub right: String,
    pub schema_changes: Vec<SchemaChange>,
    pub tables: Vec<TableDiff>,
    /// Pages the two versions do not share, found from the page maps alone.
    pub pages_differing: usize,
    /// Pages actually read to compute the diff.
    pub pages_read: u64,
    pub sql: Option<String>,
    /// Sides that are branch heads whose checkout file holds changes not checkpointed: the
    /// diff compares committed versions, so those changes are not in it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unsaved_checkouts: Vec<String>,
    /// With `--working`: the sides read from their checkout file, changes not
    /// checkpointed included.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub working_files: Vec<String>,
}
