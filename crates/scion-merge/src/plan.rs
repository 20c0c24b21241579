//! The rows three-way: theirs' changed rows against ours', by key, cell by cell. What the
//! source changed and the destination did not is taken; what both changed the same way is
//! agreed; what both changed differently is a conflict, settled by a resolution or the
//! strategy. Tables without a primary key merge as multisets of whole rows.

use std::collections::{BTreeMap, BTreeSet};

use scion_engine::diff::{RowDelta, SchemaObject, TableDelta, TableLayout, Value, VersionDelta};
use serde_json::Value as Json;

use crate::error::{MergeError, MergeResult};
use crate::report::{
    CellValues, Conflict, ConflictKind, Granularity, MergeOptions, Resolution, Strategy,
    TableReport,
};
use crate::schema::{SchemaPlan, TablePlan};
use crate::values::{
    from_json, key_id, key_json, key_of, named, row_json, same, same_row, shown, Named,
};
use crate::virtual_tables::is_virtual;

/// One change to make to ours.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    Insert {
        table: String,
        row: Named,
    },
    Update {
        table: String,
        key: Vec<(String, Value)>,
        set: Vec<(String, Value)>,
    },
    Delete {
        table: String,
        key: Vec<(String, Value)>,
    },
    /// Copies of a whole row of a table without a primary key: added, or removed.
    Copies {
        table: String,
        row: Named,
        delta: i64,
    },
}

#[derive(Debug, Default)]
pub(crate) struct DataPlan {
    pub changes: Vec<Change>,
    pub conflicts: Vec<Conflict>,
    pub tables: Vec<TableReport>,
    pub unresolved: usize,
    pub used_resolutions: BTreeSet<String>,
    /// Theirs' `sqlite_sequence`: table name and the last id it handed out.
    pub sequences: Vec<(Value, Value)>,
}

enum Decision {
    Ours,
    Theirs,
    Value(Json),
}

struct Planner<'a> {
    opts: &'a MergeOptions,
    out: DataPlan,
}

impl Planner<'_> {
    /// How conflict `id` is settled, and the word the report uses for it.
    fn decide(&mut self, id: &str) -> (Decision, &'static str) {
        if let Some(r) = self.opts.resolutions.get(id) {
            self.out.used_resolutions.insert(id.to_string());
            return match r {
                Resolution::Ours => (Decision::Ours, "ours"),
                Resolution::Theirs => (Decision::Theirs, "theirs"),
                Resolution::Value(v) => (Decision::Value(v.clone()), "value"),
            };
        }
        match self.opts.strategy {
            Strategy::Ours => (Decision::Ours, "ours"),
            Strategy::Theirs => (Decision::Theirs, "theirs"),
            Strategy::Fail => {
                self.out.unresolved += 1;
                (Decision::Ours, "unresolved")
            }
        }
    }
}

/// What the source's side of a table holds: its inserted, updated and deleted rows.
fn theirs_counts(td: &TableDelta, layout: &TableLayout, schema: &[SchemaObject]) -> TableReport {
    let virtual_table = schema
        .iter()
        .any(|o| o.name == td.table && is_virtual(o.sql.as_deref()));
    let mut report = TableReport {
        table: td.table.clone(),
        matched_by: matched_by(layout),
        keyed_by_id: layout.rowid_alias.is_some() && !virtual_table,
        ..Default::default()
    };
    for r in td.rows.iter().filter(|r| r.before != r.after) {
        match (&r.before, &r.after) {
            (None, _) => report.theirs_inserted += 1,
            (_, None) => report.theirs_deleted += 1,
            _ => report.theirs_updated += 1,
        }
    }
    report
}

/// The rows a fast-forward brings, per user table (the destination had not moved, so every
/// change is the source's and none conflicts).
pub(crate) fn fast_forward_tables(theirs: &VersionDelta) -> Vec<TableReport> {
    theirs
        .tables
        .iter()
        .filter(|td| !td.table.starts_with("sqlite_"))
        .filter_map(|td| {
            td.after
                .as_ref()
                .map(|layout| theirs_counts(td, layout, &theirs.schema_after))
        })
        .filter(|t| t.theirs_inserted + t.theirs_updated + t.theirs_deleted > 0)
        .collect()
}

pub(crate) fn plan(
    ours: &VersionDelta,
    theirs: &VersionDelta,
    schema: &SchemaPlan,
    opts: &MergeOptions,
) -> MergeResult<DataPlan> {
    let mut p = Planner {
        opts,
        out: DataPlan::default(),
    };
    let ours_tables: BTreeMap<&str, &TableDelta> =
        ours.tables.iter().map(|t| (t.table.as_str(), t)).collect();
    for td in &theirs.tables {
        if td.table == "sqlite_sequence" {
            p.out.sequences = sequences(td);
            continue;
        }
        if td.table.starts_with("sqlite_") {
            continue;
        }
        let Some(layout) = &td.after else { continue };
        let how = schema
            .tables
            .get(&td.table)
            .copied()
            .unwrap_or(TablePlan::Merge);
        let mut report = theirs_counts(td, layout, &theirs.schema_after);
        let changed: Vec<&RowDelta> = td.rows.iter().filter(|r| r.before != r.after).collect();
        match how {
            TablePlan::Skip => {}
            TablePlan::TakeTheirs => {
                for r in &td.rows {
                    if let Some(after) = &r.after {
                        p.out.changes.push(Change::Insert {
                            table: td.table.clone(),
                            row: named(layout, after),
                        });
                    }
                }
            }
            TablePlan::Merge if layout.keyless() => {
                let ours_td = ours_tables.get(td.table.as_str()).copied();
                p.keyless(td, ours_td, &mut report);
            }
            TablePlan::Merge => {
                let ours_td = ours_tables.get(td.table.as_str()).copied();
                p.keyed(td, &changed, ours_td, &mut report)?;
            }
        }
        if changed.is_empty() && how != TablePlan::TakeTheirs {
            continue;
        }
        p.out.tables.push(report);
    }
    Ok(p.out)
}

fn matched_by(layout: &TableLayout) -> String {
    if let Some(i) = layout.rowid_alias {
        format!("primary key ({})", layout.columns[i])
    } else if layout.key.is_empty() {
        "whole rows (the table has no primary key)".into()
    } else {
        let cols: Vec<&str> = layout
            .key
            .iter()
            .map(|i| layout.columns[*i].as_str())
            .collect();
        format!("primary key ({})", cols.join(", "))
    }
}

fn sequences(td: &TableDelta) -> Vec<(Value, Value)> {
    let Some(layout) = &td.after else {
        return Vec::new();
    };
    td.rows
        .iter()
        .filter_map(|r| r.after.as_ref())
        .map(|row| {
            let n = named(layout, row);
            let get = |c: &str| n.get(c).cloned().unwrap_or(Value::Null);
            (get("name"), get("seq"))
        })
        .collect()
}

/// The values of `v` (a JSON object of columns) written over `row`.
fn overlay(id: &str, row: &Named, v: &Json) -> MergeResult<Named> {
    let Some(obj) = v.as_object() else {
        return Err(MergeError::InvalidResolution {
            id: id.into(),
            reason: "a row conflict takes \"ours\", \"theirs\" or an object of column values"
                .into(),
        });
    };
    let mut out = row.clone();
    for (k, x) in obj {
        let value = from_json(x).ok_or_else(|| MergeError::InvalidResolution {
            id: id.into(),
            reason: format!("column {k}: {x} is not a value a column holds"),
        })?;
        out.insert(k.clone(), value);
    }
    Ok(out)
}

/// The columns of `to` that differ from `from`.
fn differing(from: &Named, to: &Named) -> Vec<(String, Value)> {
    to.iter()
        .filter(|(k, v)| !same(from.get(*k), Some(v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl Planner<'_> {
    fn keyed(
        &mut self,
        td: &TableDelta,
        changed: &[&RowDelta],
        ours_td: Option<&TableDelta>,
        report: &mut TableReport,
    ) -> MergeResult<()> {
        let layout = td.after.as_ref().expect("checked by the caller");
        let base_layout = td.before.as_ref().unwrap_or(layout);
        let ours_rows: BTreeMap<&[u8], &RowDelta> = ours_td
            .map(|o| {
                o.rows
                    .iter()
                    .filter(|r| r.before != r.after)
                    .map(|r| (r.key.as_slice(), r))
                    .collect()
            })
            .unwrap_or_default();
        let ours_layout = ours_td
            .and_then(|o| o.after.as_ref())
            .unwrap_or(base_layout);
        let table = td.table.clone();
        for r in changed {
            let b = r.before.as_ref().map(|x| named(base_layout, x));
            let t = r.after.as_ref().map(|x| named(layout, x));
            let Some(key) = t
                .as_ref()
                .or(b.as_ref())
                .and_then(|row| key_of(layout, row))
            else {
                continue;
            };
            let Some(o_delta) = ours_rows.get(r.key.as_slice()) else {
                // Only theirs changed the row.
                self.out.changes.push(match (&b, &t) {
                    (_, Some(t)) if b.is_none() => Change::Insert {
                        table: table.clone(),
                        row: t.clone(),
                    },
                    (Some(_), None) => Change::Delete {
                        table: table.clone(),
                        key,
                    },
                    (Some(b), Some(t)) => Change::Update {
                        table: table.clone(),
                        key,
                        set: differing(b, t),
                    },
                    (None, None) => continue,
                    _ => unreachable!("covered by the arms above"),
                });
                continue;
            };
            let o = o_delta.after.as_ref().map(|x| named(ours_layout, x));
            let agreed = match (&o, &t) {
                (Some(o), Some(t)) => same_row(o, t),
                (None, None) => true,
                _ => false,
            };
            if agreed {
                report.merged_cells += t.as_ref().map_or(1, |t| t.len());
                continue;
            }
            let id = format!("{table}:{}", key_id(&key));
            match (&b, &o, &t) {
                (Some(b), Some(o), Some(t)) => {
                    self.both_updated(&table, report, &id, &key, (b, o, t))?
                }
                _ => {
                    let kind = match (&b, &o, &t) {
                        (None, _, _) => ConflictKind::InsertInsert,
                        (_, None, _) => ConflictKind::DeleteUpdate,
                        _ => ConflictKind::UpdateDelete,
                    };
                    let (decision, word) = self.decide(&id);
                    let change = match (decision, &o, &t) {
                        (Decision::Ours, _, _) => None,
                        (Decision::Theirs, Some(o), Some(t)) => Some(Change::Update {
                            table: table.clone(),
                            key: key.clone(),
                            set: differing(o, t),
                        }),
                        (Decision::Theirs, None, Some(t)) => Some(Change::Insert {
                            table: table.clone(),
                            row: t.clone(),
                        }),
                        (Decision::Theirs, _, None) => Some(Change::Delete {
                            table: table.clone(),
                            key: key.clone(),
                        }),
                        (Decision::Value(v), Some(o), _) => {
                            let want = overlay(&id, o, &v)?;
                            Some(Change::Update {
                                table: table.clone(),
                                key: key.clone(),
                                set: differing(o, &want),
                            })
                        }
                        (Decision::Value(v), None, _) => {
                            let from = t.as_ref().or(b.as_ref()).expect("a side has the row");
                            Some(Change::Insert {
                                table: table.clone(),
                                row: overlay(&id, from, &v)?,
                            })
                        }
                    };
                    self.out.changes.extend(change);
                    report.conflicts += 1;
                    self.out.conflicts.push(Conflict {
                        id,
                        table: table.clone(),
                        kind,
                        key: key_json(&key),
                        columns: Vec::new(),
                        base: b.as_ref().map(row_json),
                        ours: o.as_ref().map(row_json),
                        theirs: t.as_ref().map(row_json),
                        resolution: word,
                    });
                }
            }
        }
        Ok(())
    }

    /// Both sides updated one row: column by column, or as a whole with `--conflict-
    /// granularity row`.
    fn both_updated(
        &mut self,
        table: &str,
        report: &mut TableReport,
        id: &str,
        key: &[(String, Value)],
        (b, o, t): (&Named, &Named, &Named),
    ) -> MergeResult<()> {
        let columns: BTreeSet<&String> = b.keys().chain(o.keys()).chain(t.keys()).collect();
        let mut set = Vec::new();
        let mut conflicting = Vec::new();
        for c in columns {
            let (bc, oc, tc) = (b.get(c), o.get(c), t.get(c));
            if same(tc, bc) || tc.is_none() {
                continue;
            }
            if same(oc, bc) {
                set.push((c.clone(), tc.cloned().unwrap_or(Value::Null)));
                report.merged_cells += 1;
            } else if same(oc, tc) {
                report.merged_cells += 1;
            } else {
                conflicting.push(c.clone());
            }
        }
        let cell = |c: &String| CellValues {
            name: c.clone(),
            base: b.get(c).map_or(Json::Null, shown),
            ours: o.get(c).map_or(Json::Null, shown),
            theirs: t.get(c).map_or(Json::Null, shown),
        };
        let row_level = self.opts.granularity == Granularity::Row
            && (!conflicting.is_empty() || (!set.is_empty() && !same_row(o, b)));
        let conflict = |id: String, columns: Vec<CellValues>, word| Conflict {
            id,
            table: table.to_string(),
            kind: ConflictKind::UpdateUpdate,
            key: key_json(key),
            columns,
            base: Some(row_json(b)),
            ours: Some(row_json(o)),
            theirs: Some(row_json(t)),
            resolution: word,
        };
        if row_level {
            let (decision, word) = self.decide(id);
            let set = match decision {
                Decision::Ours => Vec::new(),
                Decision::Theirs => differing(o, t),
                Decision::Value(v) => differing(o, &overlay(id, o, &v)?),
            };
            if !set.is_empty() {
                self.out.changes.push(Change::Update {
                    table: table.to_string(),
                    key: key.to_vec(),
                    set,
                });
            }
            let differ: Vec<CellValues> = o
                .keys()
                .chain(t.keys())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .filter(|c| !same(o.get(*c), t.get(*c)))
                .map(cell)
                .collect();
            report.conflicts += 1;
            self.out
                .conflicts
                .push(conflict(id.to_string(), differ, word));
            return Ok(());
        }
        for c in conflicting {
            let cid = format!("{id}:{c}");
            let (decision, word) = self.decide(&cid);
            match decision {
                Decision::Ours => {}
                Decision::Theirs => {
                    set.push((c.clone(), t.get(&c).cloned().unwrap_or(Value::Null)))
                }
                Decision::Value(v) => {
                    let value = from_json(&v).ok_or_else(|| MergeError::InvalidResolution {
                        id: cid.clone(),
                        reason: format!("{v} is not a value a column holds"),
                    })?;
                    set.push((c.clone(), value));
                }
            }
            report.conflicts += 1;
            self.out.conflicts.push(conflict(cid, vec![cell(&c)], word));
        }
        if !set.is_empty() {
            self.out.changes.push(Change::Update {
                table: table.to_string(),
                key: key.to_vec(),
                set,
            });
        }
        Ok(())
    }

    /// A table without a primary key: a multiset of whole rows. Theirs' change in the
    /// number of copies of a row is applied, unless ours made the very same change.
    fn keyless(&mut self, td: &TableDelta, ours_td: Option<&TableDelta>, report: &mut TableReport) {
        let counts = |d: &TableDelta| {
            let mut m: BTreeMap<String, (Named, i64)> = BTreeMap::new();
            let before = d.before.as_ref().or(d.after.as_ref());
            let after = d.after.as_ref().or(d.before.as_ref());
            for r in d.rows.iter().filter(|r| r.before != r.after) {
                for (row, layout, n) in [(&r.before, before, -1), (&r.after, after, 1)] {
                    if let (Some(row), Some(layout)) = (row, layout) {
                        let named = named(layout, row);
                        let e = m.entry(format!("{named:?}")).or_insert((named, 0));
                        e.1 += n;
                    }
                }
            }
            m
        };
        let theirs = counts(td);
        let ours = ours_td.map(counts).unwrap_or_default();
        for (k, (row, delta)) in theirs {
            let ours_delta = ours.get(&k).map_or(0, |x| x.1);
            if delta == 0 {
                continue;
            }
            if delta == ours_delta {
                report.merged_cells += row.len();
                continue;
            }
            self.out.changes.push(Change::Copies {
                table: td.table.clone(),
                row,
                delta,
            });
        }
    }
}
