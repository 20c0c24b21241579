//! Applying a plan to ours, through SQLite: on a scratch fork of the destination opened by
//! the scion VFS (no file is materialized; only the pages the changes touch are read, and
//! only the pages SQLite rewrites are committed). Triggers are off (theirs' trigger effects
//! are rows of the plan already) and so is foreign-key enforcement (theirs' cascades are
//! too); UNIQUE, NOT NULL and CHECK failures are caught statement by statement, and
//! foreign keys are checked afterwards, so every violation is reported row by row.

use std::collections::BTreeSet;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ErrorCode, ToSql};
use scion_engine::diff::Value;
use serde_json::Value as Json;

use crate::error::{MergeError, MergeResult};
use crate::plan::{Change, DataPlan};
use crate::report::{Conflict, ConflictKind, Violation, ViolationKind};
use crate::schema::{quote, SchemaPlan};
use crate::values::{key_json, row_json};

struct Bind<'a>(&'a Value);

impl ToSql for Bind<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0 {
            Value::Null => ValueRef::Null,
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(t) => ValueRef::Text(t),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

/// What applying found.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    pub violations: Vec<Violation>,
    /// Rows of a keyless table one side removed that ours no longer had enough copies of.
    pub clamped: Vec<Conflict>,
}

/// A foreign-key violation as `PRAGMA foreign_key_check` lists it.
type FkRow = (String, Option<i64>, String, i64);

/// Apply `schema` and `data` in the open transaction of `conn`.
pub(crate) fn apply(
    conn: &Connection,
    schema: &SchemaPlan,
    data: &DataPlan,
) -> MergeResult<Applied> {
    let mut out = Applied::default();
    for sql in &schema.before_rows {
        conn.execute_batch(sql)
            .map_err(MergeError::apply(sql.clone()))?;
    }
    let touched: BTreeSet<String> = data
        .changes
        .iter()
        .map(|c| table_of(c).to_string())
        .collect();
    let children = fk_children(conn, &touched)?;
    let fk_before = fk_check(conn, &children)?;
    for change in &data.changes {
        if let Err(e) = run(conn, change, &mut out) {
            match violation_kind(&e) {
                Some(kind) => out.violations.push(Violation {
                    kind,
                    table: table_of(change).to_string(),
                    key: shown_key(change),
                    parent: None,
                    message: Some(e.to_string()),
                }),
                None => {
                    return Err(MergeError::apply(format!("writing {}", table_of(change)))(
                        e,
                    ))
                }
            }
        }
    }
    for sql in &schema.after_rows {
        if let Err(e) = conn.execute_batch(sql) {
            match violation_kind(&e) {
                Some(kind) => out.violations.push(Violation {
                    kind,
                    table: String::new(),
                    key: Json::Null,
                    parent: None,
                    message: Some(format!("{sql}: {e}")),
                }),
                None => return Err(MergeError::apply(sql.clone())(e)),
            }
        }
    }
    sequences(conn, &data.sequences)?;
    for (table, rowid, parent, _) in fk_check(conn, &children)? {
        if fk_before
            .iter()
            .any(|b| b.0 == table && b.1 == rowid && b.2 == parent)
        {
            continue;
        }
        out.violations.push(Violation {
            kind: ViolationKind::ForeignKey,
            table,
            key: serde_json::json!({ "rowid": rowid }),
            parent: Some(parent),
            message: None,
        });
    }
    Ok(out)
}

fn table_of(c: &Change) -> &str {
    match c {
        Change::Insert { table, .. }
        | Change::Update { table, .. }
        | Change::Delete { table, .. }
        | Change::Copies { table, .. } => table,
    }
}

fn shown_key(c: &Change) -> Json {
    match c {
        Change::Insert { row, .. } | Change::Copies { row, .. } => row_json(row),
        Change::Update { key, .. } | Change::Delete { key, .. } => key_json(key),
    }
}

fn violation_kind(e: &rusqlite::Error) -> Option<ViolationKind> {
    let rusqlite::Error::SqliteFailure(f, _) = e else {
        return None;
    };
    if f.code != ErrorCode::ConstraintViolation {
        return None;
    }
    use rusqlite::ffi;
    Some(match f.extended_code {
        ffi::SQLITE_CONSTRAINT_UNIQUE => ViolationKind::Unique,
        ffi::SQLITE_CONSTRAINT_PRIMARYKEY => ViolationKind::PrimaryKey,
        ffi::SQLITE_CONSTRAINT_NOTNULL => ViolationKind::NotNull,
        ffi::SQLITE_CONSTRAINT_CHECK => ViolationKind::Check,
        ffi::SQLITE_CONSTRAINT_FOREIGNKEY => ViolationKind::ForeignKey,
        _ => ViolationKind::Constraint,
    })
}

fn where_clause(cols: &[(String, Value)]) -> String {
    cols.iter()
        .map(|(c, _)| format!("{} IS ?", quote(c)))
        .collect::<Vec<_>>()
        .join(" AND ")
}

fn run(conn: &Connection, change: &Change, out: &mut Applied) -> rusqlite::Result<()> {
    match change {
        Change::Insert { table, row } => {
            let cols: Vec<String> = row.keys().map(|c| quote(c)).collect();
            let marks = vec!["?"; cols.len()].join(", ");
            let sql = format!(
                "INSERT INTO {} ({}) VALUES ({marks})",
                quote(table),
                cols.join(", ")
            );
            let params: Vec<Bind> = row.values().map(Bind).collect();
            conn.prepare_cached(&sql)?
                .execute(rusqlite::params_from_iter(params))?;
        }
        Change::Update { table, key, set } => {
            if set.is_empty() {
                return Ok(());
            }
            let sets: Vec<String> = set
                .iter()
                .map(|(c, _)| format!("{} = ?", quote(c)))
                .collect();
            let sql = format!(
                "UPDATE {} SET {} WHERE {}",
                quote(table),
                sets.join(", "),
                where_clause(key)
            );
            let params: Vec<Bind> = set.iter().chain(key).map(|(_, v)| Bind(v)).collect();
            conn.prepare_cached(&sql)?
                .execute(rusqlite::params_from_iter(params))?;
        }
        Change::Delete { table, key } => {
            let sql = format!("DELETE FROM {} WHERE {}", quote(table), where_clause(key));
            let params: Vec<Bind> = key.iter().map(|(_, v)| Bind(v)).collect();
            conn.prepare_cached(&sql)?
                .execute(rusqlite::params_from_iter(params))?;
        }
        Change::Copies { table, row, delta } if *delta > 0 => {
            let insert = Change::Insert {
                table: table.clone(),
                row: row.clone(),
            };
            for _ in 0..*delta {
                run(conn, &insert, out)?;
            }
        }
        Change::Copies { table, row, delta } => {
            let cols: Vec<(String, Value)> =
                row.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            let sql = format!(
                "DELETE FROM {t} WHERE rowid IN (SELECT rowid FROM {t} WHERE {} LIMIT ?)",
                where_clause(&cols),
                t = quote(table)
            );
            let want = -delta;
            let mut params: Vec<Bind> = cols.iter().map(|(_, v)| Bind(v)).collect();
            let limit = Value::Integer(want);
            params.push(Bind(&limit));
            let removed = conn
                .prepare_cached(&sql)?
                .execute(rusqlite::params_from_iter(params))?;
            if (removed as i64) < want {
                out.clamped.push(Conflict {
                    id: format!("{table}:{}", row_json(row)),
                    table: table.clone(),
                    kind: ConflictKind::DeleteDelete,
                    key: row_json(row),
                    columns: Vec::new(),
                    base: None,
                    ours: Some(serde_json::json!({ "copies_left": 0 })),
                    theirs: Some(serde_json::json!({ "copies_removed": want })),
                    resolution: "ours",
                });
            }
        }
    }
    Ok(())
}

/// Tables whose foreign keys a change to `touched` can break: the touched tables that
/// have foreign keys, and every table whose foreign keys point into a touched one.
fn fk_children(conn: &Connection, touched: &BTreeSet<String>) -> MergeResult<Vec<String>> {
    let mut stmt = conn
        .prepare(
            "SELECT DISTINCT s.name, f.\"table\" FROM sqlite_schema s, pragma_foreign_key_list(s.name) f WHERE s.type = 'table'",
        )
        .map_err(MergeError::apply("listing foreign keys"))?;
    let pairs: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .and_then(|rows| rows.collect())
        .map_err(MergeError::apply("listing foreign keys"))?;
    let mut out: Vec<String> = pairs
        .into_iter()
        .filter(|(child, parent)| touched.contains(child) || touched.contains(parent))
        .map(|(child, _)| child)
        .collect();
    out.dedup();
    Ok(out)
}

fn fk_check(conn: &Connection, tables: &[String]) -> MergeResult<Vec<FkRow>> {
    let mut out = Vec::new();
    for t in tables {
        let sql = format!("PRAGMA foreign_key_check({})", quote(t));
        let mut stmt = conn.prepare(&sql).map_err(MergeError::apply(sql.clone()))?;
        let rows: Vec<FkRow> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .and_then(|rows| rows.collect())
            .map_err(MergeError::apply(sql.clone()))?;
        out.extend(rows);
    }
    Ok(out)
}

/// AUTOINCREMENT: each table's counter is the larger of ours and theirs, so no id either
/// side handed out is handed out again.
fn sequences(conn: &Connection, theirs: &[(Value, Value)]) -> MergeResult<()> {
    if theirs.is_empty() {
        return Ok(());
    }
    let exists: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_sequence'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(MergeError::apply("reading sqlite_sequence"))?
        > 0;
    if !exists {
        return Ok(());
    }
    let ctx = || MergeError::apply("updating sqlite_sequence");
    for (name, seq) in theirs {
        let n = conn
            .execute(
                "UPDATE sqlite_sequence SET seq = max(seq, ?2) WHERE name = ?1",
                [Bind(name), Bind(seq)],
            )
            .map_err(ctx())?;
        if n == 0 {
            conn.execute(
                "INSERT INTO sqlite_sequence (name, seq) SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1)",
                [Bind(name), Bind(seq)],
            )
            .map_err(ctx())?;
        }
    }
    Ok(())
}
