//! Rows by column name, and SQLite values as the report's JSON (the same shapes `scion diff
//! --rows` prints: numbers, strings, null, blobs as `{"blob": "<hex>"}`).

use std::collections::BTreeMap;

use scion_engine::diff::{DeltaRow, TableLayout, Value};
use serde_json::{Map, Value as Json};

/// A row's values by column name. A record written before an `ADD COLUMN` is shorter
/// than the table: its missing columns are left out (they read as the column default).
pub(crate) type Named = BTreeMap<String, Value>;

pub(crate) fn named(layout: &TableLayout, row: &DeltaRow) -> Named {
    let mut out: Named = layout
        .columns
        .iter()
        .zip(&row.values)
        .map(|(c, v)| (c.clone(), v.clone()))
        .collect();
    if let (Some(i), Some(id)) = (layout.rowid_alias, row.rowid) {
        out.insert(layout.columns[i].clone(), Value::Integer(id));
    }
    out
}

/// The columns (and values) that pick out `row`: its INTEGER PRIMARY KEY or its primary
/// key columns. None for a table without a primary key.
pub(crate) fn key_of(layout: &TableLayout, row: &Named) -> Option<Vec<(String, Value)>> {
    let cols: Vec<&String> = match layout.rowid_alias {
        Some(i) => vec![&layout.columns[i]],
        None if layout.key.is_empty() => return None,
        None => layout.key.iter().map(|i| &layout.columns[*i]).collect(),
    };
    Some(
        cols.into_iter()
            .map(|c| (c.clone(), row.get(c).cloned().unwrap_or(Value::Null)))
            .collect(),
    )
}

pub(crate) fn json(v: &Value) -> Json {
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

/// A JSON value as the SQLite value it stands for; `None` for a shape no column holds.
pub(crate) fn from_json(v: &Json) -> Option<Value> {
    Some(match v {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Integer(*b as i64),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Real(n.as_f64()?),
        },
        Json::String(s) => Value::Text(s.clone().into_bytes()),
        Json::Object(o) if o.len() == 1 => {
            let hex = o.get("blob")?.as_str()?;
            if hex.len() % 2 != 0 {
                return None;
            }
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
                .collect::<Option<Vec<u8>>>()?;
            Value::Blob(bytes)
        }
        _ => return None,
    })
}

/// The longest text or blob a report shows whole, in bytes.
pub(crate) const SHOWN_WHOLE: usize = 4096;

/// A value as a report shows it: whole up to [`SHOWN_WHOLE`] bytes, beyond that its length
/// and hash (`{"bytes": n, "xxh3": "…"}`): a conflict on a 1 MiB blob made a 12.6 MB
/// report. Resolutions still write whole values ("ours", "theirs", or one given).
pub(crate) fn shown(v: &Value) -> Json {
    match v {
        Value::Text(b) | Value::Blob(b) if b.len() > SHOWN_WHOLE => serde_json::json!({
            "bytes": b.len(),
            "xxh3": format!("{:016x}", xxhash_rust::xxh3::xxh3_64(b)),
            "kind": if matches!(v, Value::Text(_)) { "text" } else { "blob" },
        }),
        _ => json(v),
    }
}

pub(crate) fn row_json(row: &Named) -> Json {
    Json::Object(row.iter().map(|(k, v)| (k.clone(), shown(v))).collect())
}

pub(crate) fn key_json(key: &[(String, Value)]) -> Json {
    Json::Object(
        key.iter()
            .map(|(k, v)| (k.clone(), json(v)))
            .collect::<Map<_, _>>(),
    )
}

/// The key's part of a conflict id: one value as its JSON text, several as an array.
pub(crate) fn key_id(key: &[(String, Value)]) -> String {
    match key {
        [(_, v)] => json(v).to_string(),
        many => Json::Array(many.iter().map(|(_, v)| json(v)).collect()).to_string(),
    }
}

/// Whether two values are the same cell content. Reals compare by bits, so NaN equals
/// itself and a row is never "changed" into itself.
pub(crate) fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(Value::Real(x)), Some(Value::Real(y))) => x.to_bits() == y.to_bits(),
        (a, b) => a == b,
    }
}

pub(crate) fn same_row(a: &Named, b: &Named) -> bool {
    a.len() == b.len() && a.iter().all(|(k, v)| same(Some(v), b.get(k)))
}
