//! `diff`: rows added, removed and changed per table between two versions, plus schema
//! changes, reading only what the two versions do not share: map nodes that differ, the
//! b-trees' interior pages, and the changed pages themselves.

mod btree;
mod collect;
mod delta;
mod descent;
pub(crate) mod pages;
mod report;
mod rows;
mod sql;
mod table;

use std::collections::{BTreeMap, BTreeSet};

use crate::format::RootRecord;
pub use btree::Value;
use collect::{collect_rows, read_schema};
pub use delta::{DeltaRow, RowDelta, SchemaObject, TableDelta, TableLayout, VersionDelta};
use pages::{changed_pages, VersionPages};
pub use report::{DiffOptions, DiffReport, SchemaChange, TableDiff};
pub use rows::{RowChange, RowChanges};
use table::{table_shape, Rows, SchemaRow};

use crate::error::{EngineError, EngineResult};
use crate::names::Target;
use crate::{Engine, ResolvedVersion};

/// A SQLite file known to hold one side of a diff, read instead of the store, and how to
/// tell afterwards that it still did when it was read.
pub struct LocalCopy {
    file: std::fs::File,
    still_valid: Box<dyn FnOnce() -> bool>,
}

impl LocalCopy {
    /// `file`, holding the version until `still_valid` says otherwise.
    pub fn new(file: std::fs::File, still_valid: impl FnOnce() -> bool + 'static) -> Self {
        LocalCopy {
            file,
            still_valid: Box::new(still_valid),
        }
    }

    fn split(copy: Option<LocalCopy>) -> (Option<std::fs::File>, Box<dyn FnOnce() -> bool>) {
        match copy {
            Some(c) => (Some(c.file), c.still_valid),
            None => (None, Box::new(|| true)),
        }
    }
}

/// A side of a diff read whole from a SQLite file (a checkout with changes never
/// checkpointed): it has no page map, so every page of both sides is compared.
pub struct WholeFile {
    /// The file, open for reading.
    pub file: std::fs::File,
    /// Its page size in bytes.
    pub page_size: u32,
    /// Its number of pages.
    pub page_count: u32,
}

impl Engine {
    /// Rows and schema changed between two sides, each a resolved version or, where a
    /// [`WholeFile`] is given, that file as it is: O(size), where a diff of two versions
    /// is O(changed pages).
    pub fn diff_whole_files(
        &self,
        (left, lv, wa): (&Target, &ResolvedVersion, Option<WholeFile>),
        (right, rv, wb): (&Target, &ResolvedVersion, Option<WholeFile>),
        opts: &DiffOptions,
    ) -> EngineResult<DiffReport> {
        let side = |v: &ResolvedVersion, w: Option<WholeFile>| -> EngineResult<_> {
            Ok(match w {
                None => (self.reader.root(&v.root)?, None),
                Some(w) => (
                    RootRecord {
                        fanout_bits: crate::pagemap::DEFAULT_FANOUT_BITS,
                        depth: 0,
                        page_size: w.page_size,
                        page_count: w.page_count,
                        change_counter: 0,
                        db_checksum: 0,
                        node: None,
                        ancestry: None,
                    },
                    Some(w.file),
                ),
            })
        };
        let (a, b) = (side(lv, wa)?, side(rv, wb)?);
        let pages = a.0.page_count.max(b.0.page_count);
        let every: BTreeSet<u32> = (1..=pages).collect();
        self.diff_pages(left, right, opts, &every, a, b)
    }

    /// Rows and schema changed between two resolved versions. A side given a
    /// [`LocalCopy`] is read from that file instead of the store; should the copy change
    /// during the read, the diff is redone from the store.
    pub fn diff_versions(
        &self,
        (left, lv, local_a): (&Target, &ResolvedVersion, Option<LocalCopy>),
        (right, rv, local_b): (&Target, &ResolvedVersion, Option<LocalCopy>),
        opts: &DiffOptions,
    ) -> EngineResult<DiffReport> {
        let (lr, rr) = (self.reader.root(&lv.root)?, self.reader.root(&rv.root)?);
        let changed = changed_pages(&self.reader, &lr, &rr)?;
        if local_a.is_some() || local_b.is_some() {
            let (la, still_a) = LocalCopy::split(local_a);
            let (lb, still_b) = LocalCopy::split(local_b);
            let report = self.diff_pages(left, right, opts, &changed, (lr, la), (rr, lb))?;
            if still_a() && still_b() {
                return Ok(report);
            }
        }
        self.diff_pages(left, right, opts, &changed, (lr, None), (rr, None))
    }

    fn diff_pages(
        &self,
        left: &Target,
        right: &Target,
        opts: &DiffOptions,
        changed: &BTreeSet<u32>,
        (lr, la): (RootRecord, Option<std::fs::File>),
        (rr, lb): (RootRecord, Option<std::fs::File>),
    ) -> EngineResult<DiffReport> {
        let mut a = VersionPages::new(&self.reader, lr).with_local(la);
        let mut b = VersionPages::new(&self.reader, rr).with_local(lb);
        let schema_a = read_schema(&mut a)?;
        let schema_b = read_schema(&mut b)?;

        let mut schema_changes = Vec::new();
        let key = |s: &SchemaRow| (s.kind.clone(), s.name.clone());
        let ma: BTreeMap<_, _> = schema_a.iter().map(|s| (key(s), s)).collect();
        let mb: BTreeMap<_, _> = schema_b.iter().map(|s| (key(s), s)).collect();
        for k in ma.keys().chain(mb.keys()).collect::<BTreeSet<_>>() {
            let (x, y) = (ma.get(k), mb.get(k));
            let change = match (x, y) {
                (Some(_), None) => "removed",
                (None, Some(_)) => "added",
                (Some(x), Some(y)) if x.sql != y.sql => "changed",
                _ => continue,
            };
            if k.1.starts_with("sqlite_") {
                continue;
            }
            schema_changes.push(SchemaChange {
                kind: k.0.clone(),
                name: k.1.clone(),
                change: change.to_string(),
                old_sql: x.and_then(|s| s.sql.clone()),
                new_sql: y.and_then(|s| s.sql.clone()),
            });
        }

        let tables: BTreeSet<String> = schema_a
            .iter()
            .chain(&schema_b)
            .filter(|s| s.kind == "table" && !s.name.starts_with("sqlite_") && s.root > 0)
            .map(|s| s.name.clone())
            .filter(|n| opts.table.as_ref().is_none_or(|t| t == n))
            .collect();
        if let Some(t) = &opts.table {
            if tables.is_empty() {
                return Err(EngineError::NoSuchTable { table: t.clone() });
            }
        }
        let mut table_diffs = Vec::new();
        let mut script = sql::Script::default();
        for change in &schema_changes {
            script.schema(change);
        }
        for name in tables {
            let sa = schema_a
                .iter()
                .find(|s| s.kind == "table" && s.name == name);
            let sb = schema_b
                .iter()
                .find(|s| s.kind == "table" && s.name == name);
            let shape_b = sb.map(table_shape).transpose()?.flatten();
            let shape_a = sa.map(table_shape).transpose()?.flatten();
            let Some(shape) = shape_b.clone().or(shape_a.clone()) else {
                continue;
            };
            // Pages are comparable by number only when the table kept its root and shape.
            let same_sql = matches!((sa, sb), (Some(x), Some(y)) if x.sql == y.sql);
            let same_tree = same_sql && sa.map(|x| x.root) == sb.map(|y| y.root);
            if same_tree && changed.is_empty() {
                continue;
            }
            let rows_a = match sa {
                Some(s) => collect_rows(
                    &mut a,
                    s.root,
                    changed,
                    !same_tree,
                    shape_a.as_ref().unwrap_or(&shape),
                )?,
                None => Rows::new(),
            };
            let rows_b = match sb {
                Some(s) => collect_rows(&mut b, s.root, changed, !same_tree, &shape)?,
                None => Rows::new(),
            };
            let (mut added, mut removed, mut changed_rows) = (0, 0, 0);
            let mut listed = opts.rows.map(rows::RowCollector::new);
            for (k, row) in &rows_a {
                match rows_b.get(k) {
                    None => {
                        removed += 1;
                        if same_sql {
                            script.delete(&name, &shape, row);
                        }
                        if let Some(l) = &mut listed {
                            l.removed(&shape, row);
                        }
                    }
                    Some(new) if new.values != row.values => {
                        changed_rows += 1;
                        if same_sql {
                            script.update(&name, &shape, row, new);
                        }
                        if let Some(l) = &mut listed {
                            l.changed(&shape, row, new);
                        }
                    }
                    _ => {}
                }
            }
            for (k, row) in &rows_b {
                if !rows_a.contains_key(k) {
                    added += 1;
                    if same_sql {
                        script.insert(&name, &shape, row);
                    }
                    if let Some(l) = &mut listed {
                        l.added(&shape, row);
                    }
                }
            }
            if !same_sql && sb.is_some() {
                // A new or redefined table: the script creates it and fills it anew.
                for row in rows_b.values() {
                    script.insert(&name, &shape, row);
                }
            }
            let matched_by = if let Some(i) = shape.rowid_alias {
                format!("primary key ({})", shape.columns[i])
            } else if shape.key.is_empty() {
                "rowid (the table has no primary key)".to_string()
            } else {
                format!(
                    "primary key ({})",
                    shape
                        .key
                        .iter()
                        .map(|i| shape.columns[*i].clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            if added + removed + changed_rows > 0 || opts.table.is_some() {
                table_diffs.push(TableDiff {
                    table: name,
                    matched_by,
                    added,
                    removed,
                    changed: changed_rows,
                    rows: listed.map(|l| l.out),
                });
            }
        }
        Ok(DiffReport {
            left: left.to_string(),
            right: right.to_string(),
            schema_changes,
            tables: table_diffs,
            pages_differing: changed.len(),
            pages_read: a.pages_read + b.pages_read,
            sql: opts.sql.then(|| script.finish()),
            unsaved_checkouts: Vec::new(),
            working_files: Vec::new(),
        })
    }
}
