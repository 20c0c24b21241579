//! Tables as the diff sees them: the schema read from `sqlite_schema`, each table's columns
//! and key, and its rows decoded from the b-tree pages.

use std::collections::BTreeMap;

use super::btree::{Cell, Value};
use super::pages::VersionPages;
use crate::error::{EngineError, EngineResult};

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
    /// By record position: what SQLite reads for the column in a record written before it
    /// was added (`ALTER TABLE ... ADD COLUMN c DEFAULT 0`): its default, else NULL.
    pub defaults: Vec<Value>,
}

impl TableShape {
    /// Complete a record shorter than the table, as SQLite reads it: the missing columns
    /// take their defaults.
    pub(crate) fn complete(&self, values: &mut Vec<Value>) {
        while values.len() < self.defaults.len() {
            values.push(self.defaults[values.len()].clone());
        }
    }
}

/// A row: its values in record order, and its rowid where the table has one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub rowid: Option<i64>,
    pub values: Vec<Value>,
}

/// Rows of one table in one version, by key.
pub(super) type Rows = BTreeMap<Vec<u8>, Row>;

/// Columns and key of a table, from its CREATE statement run in an in-memory database.
pub(super) fn table_shape(s: &SchemaRow) -> EngineResult<Option<TableShape>> {
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
            defaults: vec![Value::Null, Value::Null],
        }));
    }
    let conn =
        rusqlite::Connection::open_in_memory().map_err(|e| EngineError::sqlite(":memory:", e))?;
    if conn.execute_batch(create).is_err() {
        // A virtual table or an extension's syntax: not diffed row by row.
        return Ok(None);
    }
    let mut stmt = conn
        .prepare("SELECT name, type, pk, dflt_value FROM pragma_table_info(?1) ORDER BY cid")
        .map_err(|e| EngineError::sqlite(":memory:", e))?;
    let cols: Vec<(String, String, i64, Option<String>)> = stmt
        .query_map([&s.name], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .map_err(|e| EngineError::sqlite(":memory:", e))?
        .collect::<Result<_, _>>()
        .map_err(|e| EngineError::sqlite(":memory:", e))?;
    let default_of = |c: &(String, String, i64, Option<String>)| {
        column_default(&conn, c.3.as_deref(), real_affinity(&c.1))
    };
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
    let mut defaults: Vec<Value> = cols.iter().map(default_of).collect();
    let mut key: Vec<usize> = pk.iter().map(|(_, i)| *i).collect();
    let mut rowid_alias = None;
    if without_rowid {
        // Records store the primary key columns first, then the rest in declared order.
        let mut order: Vec<usize> = key.clone();
        order.extend((0..cols.len()).filter(|i| !key.contains(i)));
        columns = order.iter().map(|i| cols[*i].0.clone()).collect();
        real = order.iter().map(|i| real_affinity(&cols[*i].1)).collect();
        defaults = order.iter().map(|i| default_of(&cols[*i])).collect();
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
        defaults,
    }))
}

/// A column's default as SQLite reads it in a record written before the column existed:
/// the expression's value (a column added later can only have a constant default), with
/// REAL affinity applied; NULL without one.
fn column_default(conn: &rusqlite::Connection, expr: Option<&str>, real: bool) -> Value {
    use rusqlite::types::ValueRef;
    let Some(expr) = expr else {
        return Value::Null;
    };
    let value = conn.query_row(&format!("SELECT {expr}"), [], |r| {
        Ok(match r.get_ref(0)? {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(n) if real => Value::Real(n as f64),
            ValueRef::Integer(n) => Value::Integer(n),
            ValueRef::Real(x) => Value::Real(x),
            ValueRef::Text(t) => Value::Text(t.to_vec()),
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        })
    });
    // An expression that is not a constant (CURRENT_TIME, ...) cannot be a later column's
    // default, so no short record of it exists.
    value.unwrap_or(Value::Null)
}

/// SQLite's rule for a declared type's affinity, as far as REAL goes: the first rule that
/// matches wins (INT, then CHAR/CLOB/TEXT, then BLOB, then REAL/FLOA/DOUB).
pub(super) fn real_affinity(declared: &str) -> bool {
    let t = declared.to_ascii_uppercase();
    if t.contains("INT") || t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
        return false;
    }
    if t.contains("BLOB") || t.is_empty() {
        return false;
    }
    t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB")
}

/// The key a row is matched by across versions: its rowid where the table declares no key
/// columns (an INTEGER PRIMARY KEY, or none), else the key columns' values.
pub(super) fn row_key(rowid: Option<i64>, values: &[Value], key: &[usize]) -> Vec<u8> {
    match (rowid, key.is_empty()) {
        (Some(rowid), true) => rowid.to_be_bytes().to_vec(),
        _ => key_bytes(values, key),
    }
}

fn key_bytes(values: &[Value], key: &[usize]) -> Vec<u8> {
    let picked: Vec<&Value> = if key.is_empty() {
        values.iter().collect()
    } else {
        key.iter().filter_map(|i| values.get(*i)).collect()
    };
    format!("{picked:?}").into_bytes()
}

pub(super) fn full_payload(
    v: &mut VersionPages<'_>,
    cell: &Cell,
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
