//! `diff --rows`: the rows themselves, as data a caller can use without parsing SQL.

use serde::Serialize;
use serde_json::{Map, Value as Json};

use super::btree::Value;
use super::table::{Row, TableShape};

/// Rows of one table that differ between the two versions, at most `limit` of them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RowChanges {
    /// Rows only the right side has: their key and values.
    pub added: Vec<RowChange>,
    /// Rows only the left side has.
    pub removed: Vec<RowChange>,
    /// Rows both sides have with other values: the key, and both sides' values.
    pub changed: Vec<RowChange>,
    /// More rows differ than were listed (see `--limit`).
    pub truncated: bool,
}

/// One row: its key (`{"rowid": n}` for a table without a primary key) and its values
/// before (left) and after (right), by column name.
#[derive(Debug, Clone, Serialize)]
pub struct RowChange {
    /// The row's key, by column name.
    pub key: Map<String, Json>,
    /// Its values on the left; none when it was added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Map<String, Json>>,
    /// Its values on the right; none when it was removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Map<String, Json>>,
}

/// Collects row changes up to a limit.
pub(crate) struct RowCollector {
    limit: usize,
    listed: usize,
    pub(crate) out: RowChanges,
}

impl RowCollector {
    pub(crate) fn new(limit: usize) -> Self {
        RowCollector {
            limit,
            listed: 0,
            out: RowChanges::default(),
        }
    }

    fn room(&mut self) -> bool {
        if self.listed >= self.limit {
            self.out.truncated = true;
            return false;
        }
        self.listed += 1;
        true
    }

    pub(crate) fn added(&mut self, shape: &TableShape, row: &Row) {
        if self.room() {
            self.out.added.push(RowChange {
                key: key_of(shape, row),
                before: None,
                after: Some(values_of(shape, row)),
            });
        }
    }

    pub(crate) fn removed(&mut self, shape: &TableShape, row: &Row) {
        if self.room() {
            self.out.removed.push(RowChange {
                key: key_of(shape, row),
                before: Some(values_of(shape, row)),
                after: None,
            });
        }
    }

    pub(crate) fn changed(&mut self, shape: &TableShape, old: &Row, new: &Row) {
        if self.room() {
            self.out.changed.push(RowChange {
                key: key_of(shape, new),
                before: Some(values_of(shape, old)),
                after: Some(values_of(shape, new)),
            });
        }
    }
}

/// The value of column `i`: an INTEGER PRIMARY KEY is stored as NULL and is the rowid.
fn column(shape: &TableShape, row: &Row, i: usize) -> Json {
    if shape.rowid_alias == Some(i) {
        if let Some(id) = row.rowid {
            return Json::from(id);
        }
    }
    match row.values.get(i) {
        Some(Value::Integer(n)) if shape.real.get(i) == Some(&true) => {
            json(&Value::Real(*n as f64))
        }
        Some(v) => json(v),
        None => Json::Null,
    }
}

fn key_of(shape: &TableShape, row: &Row) -> Map<String, Json> {
    let mut key = Map::new();
    if let Some(i) = shape.rowid_alias {
        key.insert(shape.columns[i].clone(), column(shape, row, i));
    } else if shape.key.is_empty() {
        key.insert(
            "rowid".into(),
            row.rowid.map(Json::from).unwrap_or(Json::Null),
        );
    } else {
        for &i in &shape.key {
            key.insert(shape.columns[i].clone(), column(shape, row, i));
        }
    }
    key
}

fn values_of(shape: &TableShape, row: &Row) -> Map<String, Json> {
    (0..shape.columns.len())
        .map(|i| (shape.columns[i].clone(), column(shape, row, i)))
        .collect()
}

/// SQLite values as JSON: numbers, strings (text that is not UTF-8 is shown lossily), and
/// blobs as `{"blob": "<hex>"}`; non-finite reals as strings, which JSON cannot hold.
fn json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Integer(i) => Json::from(*i),
        Value::Real(f) => serde_json::Number::from_f64(*f)
            .map(Json::Number)
            .unwrap_or_else(|| Json::String(f.to_string())),
        Value::Text(t) => Json::String(String::from_utf8_lossy(t).into_owned()),
        Value::Blob(b) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            serde_json::json!({ "blob": hex })
        }
    }
}
