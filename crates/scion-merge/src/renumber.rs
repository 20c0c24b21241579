//! `renumber`: two branches that each add rows to a table keyed by an INTEGER PRIMARY KEY
//! both take the next ids, so their new rows share ids while being different rows. Keyed
//! merging calls that an insert/insert conflict; asked to renumber, the merge gives the
//! source's new rows of such a table, from the first shared id on, ids after every id the
//! destination uses (in their order), and makes the source's references to them through
//! declared foreign keys follow.
//!
//! It rewrites the source's side of the delta before the rows are planned, so the planner
//! sees the source as if it had taken those ids: the renumbered rows are plain inserts,
//! and a child row that only clashed through its parent's id (a composite key holding
//! it) clashes no more. The destination's rows keep their ids.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::Connection;
use scion_engine::diff::{DeltaRow, TableDelta, TableLayout, Value, VersionDelta};

use crate::error::{MergeError, MergeResult};
use crate::report::{FollowedReferences, Renumbered};
use crate::schema::quote;
use crate::values::{named, same_row};

/// What renumbering did, for the report.
#[derive(Debug, Default)]
pub(crate) struct Renumbering {
    pub renumbered: Vec<Renumbered>,
    pub followed: Vec<FollowedReferences>,
}

/// One table's renumbering: its layout, the position of its id column, old id → new id.
struct TableMoves {
    layout: TableLayout,
    alias: usize,
    map: BTreeMap<i64, i64>,
}

/// A single-column foreign key, as the source's schema declares it.
#[derive(Debug)]
struct ForeignKey {
    child: String,
    column: String,
    parent: String,
    /// The parent's column; none for its primary key.
    to: Option<String>,
}

/// Renumber the source's clashing new rows in `theirs` (the source's delta from the base).
/// `ours` is the destination's delta from the base; `ours_db` and `theirs_db` read the two
/// versions.
pub(crate) fn renumber(
    ours: &VersionDelta,
    theirs: &mut VersionDelta,
    ours_db: &Connection,
    theirs_db: &Connection,
) -> MergeResult<Renumbering> {
    let mut out = Renumbering::default();
    let ordinary: BTreeSet<&str> = theirs
        .schema_after
        .iter()
        .filter(|o| o.kind == "table" && !o.name.starts_with("sqlite_"))
        .filter(|o| !crate::virtual_tables::is_virtual(o.sql.as_deref()))
        .map(|o| o.name.as_str())
        .collect();
    let fks = foreign_keys(theirs_db)?;
    let ours_tables: BTreeMap<&str, &TableDelta> =
        ours.tables.iter().map(|t| (t.table.as_str(), t)).collect();

    // Parents before children: whether a child's new row is the destination's row (the
    // same values under the same id) is judged after its references to moved parents
    // follow them. Each table is judged once; a cycle of references is entered anywhere.
    let names: Vec<String> = theirs
        .tables
        .iter()
        .map(|t| t.table.clone())
        .filter(|t| ordinary.contains(t.as_str()) && ours_tables.contains_key(t.as_str()))
        .collect();
    let mut judged: BTreeSet<String> = BTreeSet::new();
    let mut sorted: BTreeSet<String> = BTreeSet::new();
    while judged.len() < names.len() {
        let waiting = |t: &String| {
            fks.iter().any(|f| {
                &f.child == t
                    && !f.parent.eq_ignore_ascii_case(t)
                    && names
                        .iter()
                        .any(|p| p.eq_ignore_ascii_case(&f.parent) && !judged.contains(p))
            })
        };
        let pending: Vec<&String> = names.iter().filter(|t| !judged.contains(*t)).collect();
        let next = pending
            .iter()
            .find(|t| !waiting(t))
            .unwrap_or(&pending[0])
            .to_string();
        judged.insert(next.clone());
        let Some(td) = theirs.tables.iter_mut().find(|t| t.table == next) else {
            continue;
        };
        let Some(moves) = new_ids(td, ours_tables[next.as_str()], &fks, ours_db)? else {
            continue;
        };
        let TableMoves { layout, alias, map } = moves;
        for r in td.rows.iter_mut().filter(|r| r.before.is_none()) {
            let Some(a) = r.after.as_mut() else { continue };
            let Some(new) = a.rowid.and_then(|id| map.get(&id)) else {
                continue;
            };
            a.rowid = Some(*new);
            if let Some(v) = a.values.get_mut(alias) {
                *v = Value::Integer(*new);
            }
            r.key = layout.match_key(a);
        }
        let id_column = layout.columns[alias].clone();
        out.renumbered
            .extend(map.iter().map(|(from, to)| Renumbered {
                table: next.clone(),
                column: id_column.clone(),
                from: *from,
                to: *to,
            }));
        sorted.insert(next.clone());
        // SQLite matches a REFERENCES clause's table name without regard to case.
        for fk in fks.iter().filter(|f| f.parent.eq_ignore_ascii_case(&next)) {
            if fk
                .to
                .as_ref()
                .is_some_and(|to| !to.eq_ignore_ascii_case(&id_column))
            {
                continue;
            }
            let Some(child) = theirs.tables.iter_mut().find(|t| t.table == fk.child) else {
                continue;
            };
            let rows = follow(child, &fk.column, &map);
            if rows > 0 {
                sorted.insert(fk.child.clone());
                out.followed.push(FollowedReferences {
                    table: fk.child.clone(),
                    column: fk.column.clone(),
                    parent: next.clone(),
                    rows,
                });
            }
        }
    }
    out.renumbered
        .sort_by(|a, b| (&a.table, a.from).cmp(&(&b.table, b.from)));
    out.followed
        .sort_by(|a, b| (&a.table, &a.column).cmp(&(&b.table, &b.column)));
    for name in &sorted {
        if let Some(td) = theirs.tables.iter_mut().find(|t| &t.table == name) {
            td.rows.sort_by(|a, b| a.key.cmp(&b.key));
        }
    }
    Ok(out)
}

/// The new ids of the source's new rows of `td` (the source's side of one table), with
/// its layout and the position of its id column; none where nothing clashes with the
/// destination's new rows `ours_td` or the table is not keyed by an id of its own.
fn new_ids(
    td: &TableDelta,
    ours_td: &TableDelta,
    fks: &[ForeignKey],
    ours_db: &Connection,
) -> MergeResult<Option<TableMoves>> {
    let Some(layout) = td.after.clone() else {
        return Ok(None);
    };
    let Some(alias) = layout.rowid_alias else {
        return Ok(None);
    };
    let column = layout.columns[alias].clone();
    // A table whose id is itself a reference (one row per parent row) takes its
    // parent's new ids rather than ids of its own.
    if fks
        .iter()
        .any(|f| f.child == td.table && f.column.eq_ignore_ascii_case(&column))
    {
        return Ok(None);
    }
    let Some(ours_layout) = ours_td.after.as_ref() else {
        return Ok(None);
    };
    let ours_new: BTreeMap<i64, _> = ours_td
        .rows
        .iter()
        .filter(|r| r.before.is_none())
        .filter_map(|r| r.after.as_ref())
        .filter_map(|a| Some((a.rowid?, named(ours_layout, a))))
        .collect();
    let agrees = |row: &DeltaRow| {
        row.rowid
            .and_then(|id| ours_new.get(&id))
            .is_some_and(|o| same_row(o, &named(&layout, row)))
    };
    // The ids of the rows the source inserted that the destination does not hold as
    // they are.
    let inserted: Vec<i64> = td
        .rows
        .iter()
        .filter(|r| r.before.is_none())
        .filter_map(|r| r.after.as_ref())
        .filter(|a| !agrees(a))
        .filter_map(|a| a.rowid)
        .collect();
    let Some(first_clash) = inserted
        .iter()
        .copied()
        .filter(|id| ours_new.contains_key(id))
        .min()
    else {
        return Ok(None);
    };
    let to_move: Vec<i64> = inserted
        .into_iter()
        .filter(|id| *id >= first_clash)
        .collect();
    let to_move_set: BTreeSet<i64> = to_move.iter().copied().collect();
    // Every id the result can hold besides the new ones: the destination's rows, the
    // ids its AUTOINCREMENT counter handed out, and the source's rows the plan may
    // still write at their own ids.
    let kept_max = td
        .rows
        .iter()
        .flat_map(|r| [r.before.as_ref(), r.after.as_ref()])
        .flatten()
        .filter_map(|row| row.rowid)
        .filter(|id| !to_move_set.contains(id))
        .max()
        .unwrap_or(0);
    let after = highest_id(ours_db, &td.table)?.max(kept_max);
    let Some(ids) = fresh_ids(after, to_move.len()) else {
        // No ids are left above the destination's: the rows stay conflicts.
        return Ok(None);
    };
    let map = to_move.into_iter().zip(ids).collect();
    Ok(Some(TableMoves { layout, alias, map }))
}

/// Make the source's inserted and changed rows of `td` that reference a moved id through
/// `column` name its new id; a cell the source did not change is left as the base had it.
/// Returns how many rows changed.
fn follow(td: &mut TableDelta, column: &str, map: &BTreeMap<i64, i64>) -> usize {
    let Some(layout) = td.after.clone() else {
        return 0;
    };
    let Some(i) = layout
        .columns
        .iter()
        .position(|c| c.eq_ignore_ascii_case(column))
    else {
        return 0;
    };
    let before_layout = td.before.clone();
    let is_alias = layout.rowid_alias == Some(i);
    let cell = |row: &DeltaRow| -> Option<i64> {
        match row.values.get(i) {
            Some(Value::Integer(v)) => Some(*v),
            _ if is_alias => row.rowid,
            _ => None,
        }
    };
    let mut changed = 0;
    for r in td.rows.iter_mut().filter(|r| r.before != r.after) {
        let was = match (&r.before, &before_layout) {
            (Some(b), Some(bl)) if bl.columns.get(i).is_some_and(|c| c == &layout.columns[i]) => {
                cell(b)
            }
            _ => None,
        };
        let Some(a) = r.after.as_mut() else { continue };
        let Some(old) = cell(a) else { continue };
        if r.before.is_some() && was == Some(old) {
            continue;
        }
        let Some(new) = map.get(&old) else { continue };
        if let Some(v) = a.values.get_mut(i) {
            *v = Value::Integer(*new);
        }
        if is_alias {
            a.rowid = Some(*new);
        }
        r.key = layout.match_key(a);
        changed += 1;
    }
    changed
}

/// `n` ids after `after`, or none if they would pass the largest rowid.
fn fresh_ids(after: i64, n: usize) -> Option<Vec<i64>> {
    let last = after.checked_add(i64::try_from(n).ok()?)?;
    Some((after + 1..=last).collect())
}

/// The highest id table `name` holds or its AUTOINCREMENT counter handed out, in `db`.
fn highest_id(db: &Connection, name: &str) -> MergeResult<i64> {
    let read = || MergeError::apply(format!("reading the highest id of {name}"));
    let max: Option<i64> = db
        .query_row(
            &format!("SELECT max(rowid) FROM {}", quote(name)),
            [],
            |r| r.get(0),
        )
        .map_err(read())?;
    let has_sequence: bool = db
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_sequence'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(read())?
        > 0;
    let seq: Option<i64> = if has_sequence {
        db.query_row(
            "SELECT max(seq) FROM sqlite_sequence WHERE name = ?1",
            [name],
            |r| r.get(0),
        )
        .map_err(read())?
    } else {
        None
    };
    Ok(max.unwrap_or(0).max(seq.unwrap_or(0)).max(0))
}

/// The single-column foreign keys of every table (a key of several columns is matched
/// as a whole, which renumbering does not rewrite).
fn foreign_keys(db: &Connection) -> MergeResult<Vec<ForeignKey>> {
    let list = || MergeError::apply("listing the source's foreign keys");
    let mut stmt = db
        .prepare(
            "SELECT s.name, f.id, f.\"from\", f.\"table\", f.\"to\" \
             FROM sqlite_schema s, pragma_foreign_key_list(s.name) f WHERE s.type = 'table' \
             ORDER BY s.name, f.id, f.seq",
        )
        .map_err(list())?;
    let rows: Vec<(String, i64, String, String, Option<String>)> = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .and_then(|rows| rows.collect())
        .map_err(list())?;
    let mut width: BTreeMap<(&str, i64), usize> = BTreeMap::new();
    for (child, id, ..) in &rows {
        *width.entry((child.as_str(), *id)).or_default() += 1;
    }
    Ok(rows
        .iter()
        .filter(|(child, id, ..)| width[&(child.as_str(), *id)] == 1)
        .map(|(child, _, column, parent, to)| ForeignKey {
            child: child.clone(),
            column: column.clone(),
            parent: parent.clone(),
            to: to.clone(),
        })
        .collect())
}

/// The tables of the source's delta `theirs` that a later merge must refuse because an
/// earlier merge renumbered rows of `tables`: a renumbered table whose existing rows the
/// source updated or deleted, and a table whose changed rows refer to one through a
/// declared foreign key. Rows the source only added to a renumbered table are not
/// refused: they are new rows, which a merge keys (and renumbers) as any other.
pub(crate) fn touched(
    theirs: &VersionDelta,
    tables: &[String],
    theirs_db: &Connection,
) -> MergeResult<Vec<String>> {
    let renumbered = |name: &str| tables.iter().any(|t| t.eq_ignore_ascii_case(name));
    let fks = foreign_keys(theirs_db)?;
    let mut out: Vec<String> = theirs
        .tables
        .iter()
        .filter(|td| {
            let changed = || td.rows.iter().filter(|r| r.before != r.after);
            let edits_old_rows = renumbered(&td.table) && changed().any(|r| r.before.is_some());
            let refers = fks
                .iter()
                .any(|f| f.child == td.table && renumbered(&f.parent))
                && changed().any(|r| r.after.is_some());
            edits_old_rows || refers
        })
        .map(|td| td.table.clone())
        .collect();
    out.sort();
    Ok(out)
}
