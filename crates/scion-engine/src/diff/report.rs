//! What a diff reports: per table rows added, removed and changed, and schema changes.

use serde::Serialize;

use super::rows::RowChanges;

/// What a diff compares and how it reports.
#[derive(Debug, Clone, Default)]
pub struct DiffOptions {
    /// Only this table.
    pub table: Option<String>,
    /// Also write the SQL that turns the left side into the right.
    pub sql: bool,
    /// List the differing rows themselves, at most this many per table.
    pub rows: Option<usize>,
}

/// A schema object added, removed or changed.
#[derive(Debug, Clone, Serialize)]
pub struct SchemaChange {
    /// `table`, `index`, `view` or `trigger`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// added, removed or changed
    pub change: String,
    /// Its `CREATE` statement on the left.
    pub old_sql: Option<String>,
    /// Its `CREATE` statement on the right.
    pub new_sql: Option<String>,
}

/// One table's rows that differ.
#[derive(Debug, Clone, Serialize)]
pub struct TableDiff {
    /// The table.
    pub table: String,
    /// How rows are matched: "primary key (id)", or "rowid" where the table has none.
    pub matched_by: String,
    /// Rows only on the right.
    pub added: usize,
    /// Rows only on the left.
    pub removed: usize,
    /// Rows on both sides with different values.
    pub changed: usize,
    /// The rows themselves, with `DiffOptions::rows`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<RowChanges>,
}

/// What differs between two versions.
#[derive(Debug, Clone, Serialize)]
pub struct DiffReport {
    /// The left side, as named.
    pub left: String,
    /// The right side, as named.
    pub right: String,
    /// Schema objects that differ.
    pub schema_changes: Vec<SchemaChange>,
    /// Tables whose rows differ.
    pub tables: Vec<TableDiff>,
    /// Pages the two versions do not share, found from the page maps alone.
    pub pages_differing: usize,
    /// Pages actually read to compute the diff.
    pub pages_read: u64,
    /// The SQL that turns the left side into the right, when asked for.
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
