//! Row changes between two versions as data, for an operation that computes with them (a
//! merge): the same page-skipping walk as `diff`, returning rows instead of counting them.

use std::collections::BTreeSet;

use super::btree::Value;
use super::collect::{collect_rows, read_schema};
use super::pages::{changed_pages, VersionPages};
use super::table::{row_key, table_shape, Row, Rows, SchemaRow, TableShape};
use crate::error::EngineResult;
use crate::format::Locator;
use crate::Engine;

/// One object of `sqlite_schema` (a table, index, view or trigger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaObject {
    /// `table`, `index`, `view` or `trigger`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// The table it belongs to (its own name for a table).
    pub table: String,
    /// Its `CREATE` statement; none for an automatic index.
    pub sql: Option<String>,
}

/// How one table's rows are laid out and matched, in one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableLayout {
    /// Column names in record order (a WITHOUT ROWID table stores its key columns first).
    pub columns: Vec<String>,
    /// Record positions of the primary key's columns; empty when rows are matched by
    /// rowid (an INTEGER PRIMARY KEY, or no primary key at all).
    pub key: Vec<usize>,
    /// Record position of an INTEGER PRIMARY KEY column: its value is the rowid.
    pub rowid_alias: Option<usize>,
}

impl TableLayout {
    /// Rows are matched by a rowid that is not a declared key: the table has no primary
    /// key, so its rowids are not stable across versions.
    pub fn keyless(&self) -> bool {
        self.key.is_empty() && self.rowid_alias.is_none()
    }

    /// The key `row` is matched by in a [`RowDelta`] of this layout: its rowid where the
    /// table has no declared key columns, else its key columns' values. A caller that
    /// changes a row's key values computes its new key with this.
    pub fn match_key(&self, row: &DeltaRow) -> Vec<u8> {
        row_key(row.rowid, &row.values, &self.key)
    }
}

impl From<&TableShape> for TableLayout {
    fn from(s: &TableShape) -> Self {
        TableLayout {
            columns: s.columns.clone(),
            key: s.key.clone(),
            rowid_alias: s.rowid_alias,
        }
    }
}

/// A row as one version stores it: values in record order (an INTEGER PRIMARY KEY holds
/// the rowid, a whole number in a REAL column is the real it reads back as).
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaRow {
    /// Its rowid; none in a WITHOUT ROWID table.
    pub rowid: Option<i64>,
    /// Its values, in record order.
    pub values: Vec<Value>,
}

/// One row that differs: absent before (added), absent after (removed), or both.
#[derive(Debug, Clone, PartialEq)]
pub struct RowDelta {
    /// What rows are matched by: the key's values, or the rowid. Equal keys in two deltas
    /// from one base name the same row.
    pub key: Vec<u8>,
    /// The row before; none when it was added.
    pub before: Option<DeltaRow>,
    /// The row after; none when it was removed.
    pub after: Option<DeltaRow>,
}

/// One table's changed rows between two versions.
#[derive(Debug, Clone)]
pub struct TableDelta {
    /// The table.
    pub table: String,
    /// The layout before and after; none where the table does not exist on that side.
    pub before: Option<TableLayout>,
    /// The layout after.
    pub after: Option<TableLayout>,
    /// Every row whose values differ, in key order; when `whole`, every row of both
    /// sides, equal ones too.
    pub rows: Vec<RowDelta>,
    /// The table's definition or root page changed, so it was read whole on both sides
    /// and `rows` lists all of them: what rebuilding it needs.
    pub whole: bool,
}

/// What changed from one version to another: both schemas and every changed row.
#[derive(Debug, Clone)]
pub struct VersionDelta {
    /// The schema of the version compared from.
    pub schema_before: Vec<SchemaObject>,
    /// The schema of the version compared to.
    pub schema_after: Vec<SchemaObject>,
    /// Tables with at least one changed row, by name.
    pub tables: Vec<TableDelta>,
    /// Pages the two versions do not share.
    pub pages_differing: usize,
    /// Pages read to find the rows.
    pub pages_read: u64,
}

impl Engine {
    /// Every row that differs between `before` and `after`, reading only what the two
    /// versions do not share (as `diff` does). A table whose definition or root page
    /// changed is read whole on both sides.
    pub fn version_delta(&self, before: &Locator, after: &Locator) -> EngineResult<VersionDelta> {
        let (br, ar) = (self.reader.root(before)?, self.reader.root(after)?);
        let changed = changed_pages(&self.reader, &br, &ar)?;
        let mut a = VersionPages::new(&self.reader, br);
        let mut b = VersionPages::new(&self.reader, ar);
        let schema_a = read_schema(&mut a)?;
        let schema_b = read_schema(&mut b)?;
        let names: BTreeSet<&str> = schema_a
            .iter()
            .chain(&schema_b)
            .filter(|s| s.kind == "table" && s.root > 0)
            .map(|s| s.name.as_str())
            .collect();
        let mut tables = Vec::new();
        for name in names {
            let find = |s: &[SchemaRow]| {
                s.iter()
                    .find(|x| x.kind == "table" && x.name == name)
                    .cloned()
            };
            let (sa, sb) = (find(&schema_a), find(&schema_b));
            let shape_a = sa.as_ref().map(table_shape).transpose()?.flatten();
            let shape_b = sb.as_ref().map(table_shape).transpose()?.flatten();
            let Some(shape) = shape_b.clone().or(shape_a.clone()) else {
                continue;
            };
            let same_tree =
                matches!((&sa, &sb), (Some(x), Some(y)) if x.sql == y.sql && x.root == y.root);
            if same_tree && changed.is_empty() {
                continue;
            }
            let rows_a = match &sa {
                Some(s) => collect_rows(
                    &mut a,
                    s.root,
                    &changed,
                    !same_tree,
                    shape_a.as_ref().unwrap_or(&shape),
                )?,
                None => Rows::new(),
            };
            let rows_b = match &sb {
                Some(s) => collect_rows(&mut b, s.root, &changed, !same_tree, &shape)?,
                None => Rows::new(),
            };
            let rows = row_deltas(rows_a, rows_b, shape_a.as_ref(), &shape, !same_tree);
            if rows.is_empty() && same_tree {
                continue;
            }
            tables.push(TableDelta {
                table: name.to_string(),
                before: shape_a.as_ref().map(TableLayout::from),
                after: shape_b.as_ref().map(TableLayout::from),
                rows,
                whole: !same_tree,
            });
        }
        let object = |s: SchemaRow| SchemaObject {
            kind: s.kind,
            name: s.name,
            table: s.table,
            sql: s.sql,
        };
        Ok(VersionDelta {
            schema_before: schema_a.into_iter().map(object).collect(),
            schema_after: schema_b.into_iter().map(object).collect(),
            tables,
            pages_differing: changed.len(),
            pages_read: a.pages_read + b.pages_read,
        })
    }
}

/// The rows of `a` and `b` (by key) that differ (all of them with `keep_equal`),
/// REAL-affinity integers read as reals.
fn row_deltas(
    mut a: Rows,
    b: Rows,
    shape_a: Option<&TableShape>,
    shape_b: &TableShape,
    keep_equal: bool,
) -> Vec<RowDelta> {
    let row = |r: Row, shape: &TableShape| {
        let values = r
            .values
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Integer(n) if shape.real.get(i) == Some(&true) => Value::Real(n as f64),
                v => v,
            })
            .collect();
        DeltaRow {
            rowid: r.rowid,
            values,
        }
    };
    let shape_a = shape_a.unwrap_or(shape_b);
    let mut out = Vec::new();
    for (key, new) in b {
        let old = a.remove(&key);
        if !keep_equal && old.as_ref().map(|o| &o.values) == Some(&new.values) {
            continue;
        }
        out.push(RowDelta {
            key,
            before: old.map(|o| row(o, shape_a)),
            after: Some(row(new, shape_b)),
        });
    }
    out.extend(a.into_iter().map(|(key, old)| RowDelta {
        key,
        before: Some(row(old, shape_a)),
        after: None,
    }));
    out.sort_by(|x, y| x.key.cmp(&y.key));
    out
}
