//! `diff`: rows added, removed and changed per table between two versions, plus schema
//! changes, reading only what the two versions do not share: map nodes that differ, the
//! b-trees' interior pages, and the changed pages themselves.

mod btree;
mod delta;
mod descent;
pub(crate) mod pages;
mod rows;
mod sql;
mod working;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::checkout::{CheckoutState, CleanFile};
use crate::format::RootRecord;
pub use btree::Value;
use btree::{decode_record, parse_page, PageKind};
pub use delta::{DeltaRow, RowDelta, SchemaObject, TableDelta, TableLayout, VersionDelta};
use pages::{changed_pages, VersionPages};
pub use rows::{RowChange, RowChanges};

use crate::error::{CoreResult, EngineError, EngineResult};
use crate::names::Target;
use crate::{ResolvedVersion, Scion};

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

/// One object of `sqlite_schema`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SchemaRow {
    pub kind: String,
    pub name: String,
    pub table: String,
    pub root: u32,
    pub sql: Option<String>,
}

/// Columns of a table and how rows are keyed.
#[derive(Debug, Clone)]
pub(crate) struct TableShape {
    pub columns: Vec<String>,
    /// Positions (in record order) of the key columns; empty = rowid.
    pub key: Vec<usize>,
    /// Record position of an INTEGER PRIMARY KEY column (stored as NULL, value = rowid).
    pub rowid_alias: Option<usize>,
    /// By record position: the column has REAL affinity, so a whole number SQLite stored
    /// as an integer (to save space) is the real it reads back as.
    pub real: Vec<bool>,
}

/// A row: its values in record order, and its rowid where the table has one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub rowid: Option<i64>,
    pub values: Vec<Value>,
}

/// Rows of one table in one version, by key.
type Rows = BTreeMap<Vec<u8>, Row>;

fn text(v: &Value) -> String {
    match v {
        Value::Text(t) => String::from_utf8_lossy(t).into_owned(),
        Value::Integer(i) => i.to_string(),
        _ => String::new(),
    }
}

impl Scion {
    pub fn diff(
        &self,
        left: &Target,
        right: &Target,
        opts: &DiffOptions,
    ) -> CoreResult<DiffReport> {
        let (lv, rv) = (self.resolve(left)?, self.resolve(right)?);
        let mut unsaved = Vec::new();
        for (t, v) in [(left, &lv), (right, &rv)] {
            if t.checkpoint.is_none()
                && matches!(
                    self.checkout_state(&t.branch, &v.root)?,
                    CheckoutState::Dirty | CheckoutState::Unknown
                )
                && !unsaved.contains(&t.branch.to_string())
            {
                unsaved.push(t.branch.to_string());
            }
        }
        let mut report = self.diff_committed(left, right, opts, &lv, &rv)?;
        report.unsaved_checkouts = unsaved;
        Ok(report)
    }

    fn diff_committed(
        &self,
        left: &Target,
        right: &Target,
        opts: &DiffOptions,
        lv: &ResolvedVersion,
        rv: &ResolvedVersion,
    ) -> EngineResult<DiffReport> {
        let (lr, rr) = (self.reader.root(&lv.root)?, self.reader.root(&rv.root)?);
        let changed = changed_pages(&self.reader, &lr, &rr)?;
        // A clean checkout of either side is read locally instead of from the store; it is
        // checked again afterwards, and a diff that raced a write is redone from the store.
        let (local_a, local_b) = (self.clean_file(left, lv), self.clean_file(right, rv));
        if local_a.is_some() || local_b.is_some() {
            let open = |c: &Option<CleanFile>| c.as_ref().and_then(|c| c.open());
            let report = self.diff_pages(
                left,
                right,
                opts,
                &changed,
                (lr, open(&local_a)),
                (rr, open(&local_b)),
            )?;
            let still = |c: &Option<CleanFile>| c.as_ref().is_none_or(|c| c.still_clean());
            if still(&local_a) && still(&local_b) {
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

/// Every object of `sqlite_schema` (the b-tree rooted at page 1), read in full.
fn read_schema(v: &mut VersionPages<'_>) -> EngineResult<Vec<SchemaRow>> {
    let empty = BTreeSet::new();
    let shape = TableShape {
        columns: vec![],
        key: vec![],
        rowid_alias: None,
        real: vec![],
    };
    let rows = collect_rows(v, 1, &empty, true, &shape)?;
    Ok(rows
        .into_values()
        .map(|r| r.values)
        .filter(|r| r.len() >= 5)
        .map(|r| SchemaRow {
            kind: text(&r[0]),
            name: text(&r[1]),
            table: text(&r[2]),
            root: match r[3] {
                Value::Integer(i) => i as u32,
                _ => 0,
            },
            sql: match &r[4] {
                Value::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
                _ => None,
            },
        })
        .collect())
}

/// Columns and key of a table, from its CREATE statement run in an in-memory database.
fn table_shape(s: &SchemaRow) -> EngineResult<Option<TableShape>> {
    let Some(create) = &s.sql else {
        return Ok(None);
    };
    if s.name == "sqlite_sequence" {
        // SQLite refuses to create a table by that name, so its shape is given here.
        return Ok(Some(TableShape {
            columns: vec!["name".into(), "seq".into()],
            key: vec![],
            rowid_alias: None,
            real: vec![false, false],
        }));
    }
    let conn =
        rusqlite::Connection::open_in_memory().map_err(|e| EngineError::sqlite(":memory:", e))?;
    if conn.execute_batch(create).is_err() {
        // A virtual table or an extension's syntax: not diffed row by row.
        return Ok(None);
    }
    let mut stmt = conn
        .prepare("SELECT name, type, pk FROM pragma_table_info(?1) ORDER BY cid")
        .map_err(|e| EngineError::sqlite(":memory:", e))?;
    let cols: Vec<(String, String, i64)> = stmt
        .query_map([&s.name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map_err(|e| EngineError::sqlite(":memory:", e))?
        .collect::<Result<_, _>>()
        .map_err(|e| EngineError::sqlite(":memory:", e))?;
    let without_rowid = create
        .to_ascii_uppercase()
        .replace(char::is_whitespace, "")
        .contains("WITHOUTROWID");
    let mut pk: Vec<(i64, usize)> = cols
        .iter()
        .enumerate()
        .filter(|(_, c)| c.2 > 0)
        .map(|(i, c)| (c.2, i))
        .collect();
    pk.sort();
    let mut columns: Vec<String> = cols.iter().map(|c| c.0.clone()).collect();
    let mut real: Vec<bool> = cols.iter().map(|c| real_affinity(&c.1)).collect();
    let mut key: Vec<usize> = pk.iter().map(|(_, i)| *i).collect();
    let mut rowid_alias = None;
    if without_rowid {
        // Records store the primary key columns first, then the rest in declared order.
        let mut order: Vec<usize> = key.clone();
        order.extend((0..cols.len()).filter(|i| !key.contains(i)));
        columns = order.iter().map(|i| cols[*i].0.clone()).collect();
        real = order.iter().map(|i| real_affinity(&cols[*i].1)).collect();
        key = (0..pk.len()).collect();
    } else if pk.len() == 1 && cols[pk[0].1].1.eq_ignore_ascii_case("INTEGER") {
        rowid_alias = Some(pk[0].1);
        key.clear();
    }
    Ok(Some(TableShape {
        columns,
        key,
        rowid_alias,
        real,
    }))
}

/// SQLite's rule for a declared type's affinity, as far as REAL goes: the first rule that
/// matches wins (INT, then CHAR/CLOB/TEXT, then BLOB, then REAL/FLOA/DOUB).
fn real_affinity(declared: &str) -> bool {
    let t = declared.to_ascii_uppercase();
    if t.contains("INT") || t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
        return false;
    }
    if t.contains("BLOB") || t.is_empty() {
        return false;
    }
    t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB")
}

/// Rows of the b-tree at `root`: from every page when `full`, otherwise only from pages
/// in `changed` (an unchanged page holds the same rows in both versions). Interior pages
/// are always read, to find the changed leaves below them.
fn collect_rows(
    v: &mut VersionPages<'_>,
    root: u32,
    changed: &BTreeSet<u32>,
    full: bool,
    shape: &TableShape,
) -> EngineResult<Rows> {
    let usable = v.usable_size()?;
    if !full {
        let page = v.page(root)?;
        if matches!(parse_page(&page, root, usable)?, Some(p) if p.kind == PageKind::TableInterior)
        {
            return descent::collect_rows(v, root, changed, shape);
        }
    }
    let mut rows = Rows::new();
    // A b-tree's leaves are all at one depth: find it along the leftmost path first, so
    // that unchanged leaves can be skipped without being read.
    let mut leaf_depth: Option<usize> = None;
    if !full {
        let (mut pgno, mut depth) = (root, 0);
        for _ in 0..64 {
            let page = v.page(pgno)?;
            match parse_page(&page, pgno, usable)? {
                Some(p) if matches!(p.kind, PageKind::TableLeaf | PageKind::IndexLeaf) => {
                    leaf_depth = Some(depth);
                    break;
                }
                Some(p) => match p.cells.first().and_then(|c| c.left_child).or(p.right_child) {
                    Some(c) => {
                        pgno = c;
                        depth += 1;
                    }
                    None => break,
                },
                None => break,
            }
        }
    }
    let mut stack = vec![(root, 0usize)];
    let mut visited = BTreeSet::new();
    while let Some((pgno, depth)) = stack.pop() {
        if pgno == 0 || !visited.insert(pgno) {
            continue;
        }
        let page = v.page(pgno)?;
        let Some(p) = parse_page(&page, pgno, usable)? else {
            continue;
        };
        let take = full || changed.contains(&pgno);
        let is_leaf = matches!(p.kind, PageKind::TableLeaf | PageKind::IndexLeaf);
        if is_leaf {
            leaf_depth.get_or_insert(depth);
        }
        let has_payload = matches!(
            p.kind,
            PageKind::TableLeaf | PageKind::IndexLeaf | PageKind::IndexInterior
        );
        if take && has_payload {
            for cell in &p.cells {
                let payload = full_payload(v, cell, usable)?;
                let mut values = decode_record(&payload)?;
                let k = match (cell.rowid, shape.key.is_empty()) {
                    (Some(rowid), true) => {
                        if let Some(i) = shape.rowid_alias {
                            if let Some(x) = values.get_mut(i) {
                                *x = Value::Integer(rowid);
                            }
                        }
                        rowid.to_be_bytes().to_vec()
                    }
                    _ => key_bytes(&values, &shape.key),
                };
                rows.insert(
                    k,
                    Row {
                        rowid: cell.rowid,
                        values,
                    },
                );
            }
        }
        let children: Vec<u32> = p
            .cells
            .iter()
            .filter_map(|c| c.left_child)
            .chain(p.right_child)
            .filter(|c| full || leaf_depth != Some(depth + 1) || changed.contains(c))
            .collect();
        // The children of one page usually sit together in the store: fetch them at once.
        v.prefetch(&children)?;
        for c in children {
            // Below the last interior level, unchanged leaves are skipped unread.
            if !full && leaf_depth == Some(depth + 1) && !changed.contains(&c) {
                continue;
            }
            stack.push((c, depth + 1));
        }
    }
    Ok(rows)
}

fn key_bytes(values: &[Value], key: &[usize]) -> Vec<u8> {
    let picked: Vec<&Value> = if key.is_empty() {
        values.iter().collect()
    } else {
        key.iter().filter_map(|i| values.get(*i)).collect()
    };
    format!("{picked:?}").into_bytes()
}

fn full_payload(
    v: &mut VersionPages<'_>,
    cell: &btree::Cell,
    usable: usize,
) -> EngineResult<Vec<u8>> {
    let short = || EngineError::corrupt("sqlite page", "overflow chain shorter than its payload");
    // A payload larger than the database cannot be real: never follow a (possibly
    // cyclic) chain further than the payload size allows.
    let room = v.root.page_count as u64 * (usable as u64).saturating_sub(4);
    if cell.payload_size > room.saturating_add(cell.local.len() as u64) || usable <= 4 {
        return Err(EngineError::corrupt(
            "sqlite page",
            format!(
                "cell payload of {} bytes is larger than the database",
                cell.payload_size
            ),
        ));
    }
    let max_hops = (cell.payload_size - cell.local.len().min(cell.payload_size as usize) as u64)
        .div_ceil(usable as u64 - 4);
    let mut out = cell.local.clone();
    let mut next = cell.overflow;
    let mut hops = 0u64;
    while let Some(pg) = next.filter(|p| *p != 0) {
        if out.len() as u64 >= cell.payload_size {
            break;
        }
        if hops >= max_hops {
            return Err(short());
        }
        let page = v.page(pg)?;
        next = Some(u32::from_be_bytes(page[0..4].try_into().unwrap()));
        let want = (cell.payload_size as usize - out.len()).min(usable - 4);
        out.extend_from_slice(&page[4..4 + want]);
        hops += 1;
    }
    if out.len() as u64 != cell.payload_size {
        return Err(short());
    }
    Ok(out)
}
