//! SQL statements that turn the left side of a diff into the right side.

use super::btree::Value;
use super::report::SchemaChange;
use super::table::{Row, TableShape};

#[derive(Default)]
pub(crate) struct Script {
    drops: Vec<String>,
    creates: Vec<String>,
    deletes: Vec<String>,
    updates: Vec<String>,
    inserts: Vec<String>,
}

fn ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

fn literal(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(f) if f.is_finite() => {
            let s = format!("{f:?}");
            if s.contains('.') || s.contains('e') {
                s
            } else {
                format!("{s}.0")
            }
        }
        Value::Real(f) if f.is_nan() => "NULL".into(),
        Value::Real(f) => {
            if *f > 0.0 {
                "9e999".into()
            } else {
                "-9e999".into()
            }
        }
        Value::Text(t) => format!("'{}'", String::from_utf8_lossy(t).replace('\'', "''")),
        Value::Blob(b) => format!(
            "X'{}'",
            b.iter().map(|x| format!("{x:02X}")).collect::<String>()
        ),
    }
}

impl Script {
    pub fn schema(&mut self, c: &SchemaChange) {
        let kind = c.kind.to_ascii_uppercase();
        if c.change != "added" {
            self.drops
                .push(format!("DROP {kind} IF EXISTS {};", ident(&c.name)));
        }
        if c.change != "removed" {
            if let Some(sql) = &c.new_sql {
                self.creates.push(format!("{sql};"));
            }
        }
    }

    fn key_clause(shape: &TableShape, row: &Row) -> String {
        let cols: Vec<usize> = match (&shape.key[..], shape.rowid_alias) {
            ([], Some(i)) => vec![i],
            ([], None) => return format!("rowid = {}", row.rowid.unwrap_or_default()),
            (k, _) => k.to_vec(),
        };
        cols.iter()
            .map(|i| match row.values.get(*i) {
                Some(Value::Null) | None => format!("{} IS NULL", ident(&shape.columns[*i])),
                Some(v) => format!("{} = {}", ident(&shape.columns[*i]), literal(v)),
            })
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    pub fn delete(&mut self, table: &str, shape: &TableShape, row: &Row) {
        self.deletes.push(format!(
            "DELETE FROM {} WHERE {};",
            ident(table),
            Self::key_clause(shape, row)
        ));
    }

    pub fn update(&mut self, table: &str, shape: &TableShape, old: &Row, new: &Row) {
        let sets: Vec<String> = (0..shape.columns.len().min(new.values.len()))
            .filter(|i| old.values.get(*i) != new.values.get(*i))
            .map(|i| format!("{} = {}", ident(&shape.columns[i]), literal(&new.values[i])))
            .collect();
        if sets.is_empty() {
            return;
        }
        self.updates.push(format!(
            "UPDATE {} SET {} WHERE {};",
            ident(table),
            sets.join(", "),
            Self::key_clause(shape, old)
        ));
    }

    pub fn insert(&mut self, table: &str, shape: &TableShape, row: &Row) {
        let n = shape.columns.len().min(row.values.len());
        let mut cols: Vec<String> = shape.columns[..n].iter().map(|c| ident(c)).collect();
        let mut vals: Vec<String> = row.values[..n].iter().map(literal).collect();
        if let (Some(rowid), true, None) = (row.rowid, shape.key.is_empty(), shape.rowid_alias) {
            cols.insert(0, "rowid".into());
            vals.insert(0, rowid.to_string());
        }
        self.inserts.push(format!(
            "INSERT INTO {}({}) VALUES ({});",
            ident(table),
            cols.join(", "),
            vals.join(", ")
        ));
    }

    pub fn finish(self) -> String {
        let mut out = vec!["BEGIN;".to_string()];
        out.extend(self.drops);
        out.extend(self.creates);
        out.extend(self.deletes);
        out.extend(self.updates);
        out.extend(self.inserts);
        out.push("COMMIT;".into());
        out.join("\n") + "\n"
    }
}
