//! Schema three-way: each object of `sqlite_schema` by kind and name, base against ours
//! against theirs. One-sided changes are carried (new objects, drops of what the other side
//! left alone, `ADD COLUMN`); two-sided or destructive ones are schema conflicts.

use std::collections::{BTreeMap, BTreeSet};

use scion_engine::diff::{SchemaObject, VersionDelta};

use crate::report::{SchemaConflict, SchemaPolicy, SchemaStep};

/// What the data merge does with one table after the schema is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TablePlan {
    /// Merge the rows three-way (matched by column name).
    Merge,
    /// Theirs rebuilt or created it and ours left it alone: take all of theirs' rows.
    TakeTheirs,
    /// Nothing of theirs to bring: dropped on either side, or a schema conflict.
    Skip,
}

#[derive(Debug, Default)]
pub(crate) struct SchemaPlan {
    pub steps: Vec<SchemaStep>,
    pub conflicts: Vec<SchemaConflict>,
    /// Run before the rows: drops, new tables, added columns.
    pub before_rows: Vec<String>,
    /// Run after the rows: new indexes, views and triggers.
    pub after_rows: Vec<String>,
    pub tables: BTreeMap<String, TablePlan>,
}

type Objects<'a> = BTreeMap<(&'a str, &'a str), &'a SchemaObject>;

fn objects(list: &[SchemaObject]) -> Objects<'_> {
    list.iter()
        .filter(|o| !o.name.starts_with("sqlite_") && o.sql.is_some())
        .map(|o| ((o.kind.as_str(), o.name.as_str()), o))
        .collect()
}

/// Names of tables with a row that differs in `d`.
pub(crate) fn touched(d: &VersionDelta) -> BTreeSet<String> {
    d.tables
        .iter()
        .filter(|t| t.rows.iter().any(|r| r.before != r.after))
        .map(|t| t.table.clone())
        .collect()
}

pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

pub(crate) fn plan(ours: &VersionDelta, theirs: &VersionDelta, policy: SchemaPolicy) -> SchemaPlan {
    let base = objects(&theirs.schema_before);
    let o = objects(&ours.schema_after);
    let t = objects(&theirs.schema_after);
    let (ours_rows, theirs_rows) = (touched(ours), touched(theirs));
    let mut out = SchemaPlan::default();
    let keys: BTreeSet<_> = base
        .keys()
        .chain(o.keys())
        .chain(t.keys())
        .copied()
        .collect();
    let sql = |m: &Objects, k| m.get(&k).and_then(|x: &&SchemaObject| x.sql.clone());
    // Tables first: rebuilding one drops its indexes and triggers, which are made again.
    let mut keys: Vec<_> = keys.into_iter().collect();
    keys.sort_by_key(|(kind, name)| (*kind != "table", *kind, *name));
    let mut rebuilt = BTreeSet::new();
    for k @ (kind, name) in keys {
        let (b, os, ts) = (sql(&base, k), sql(&o, k), sql(&t, k));
        let conflict = |out: &mut SchemaPlan, reason: &str| {
            out.conflicts.push(SchemaConflict {
                kind: kind.into(),
                name: name.into(),
                reason: reason.into(),
                base_sql: b.clone(),
                ours_sql: os.clone(),
                theirs_sql: ts.clone(),
            });
            if kind == "table" {
                out.tables.insert(name.into(), TablePlan::Skip);
            }
        };
        let step = |out: &mut SchemaPlan, action, sql: Option<String>| {
            out.steps.push(SchemaStep {
                kind: kind.into(),
                name: name.into(),
                action,
                sql,
            })
        };
        if os == ts {
            // Unchanged, or changed the same way on both sides.
            if kind == "table" && os.is_none() {
                out.tables.insert(name.into(), TablePlan::Skip);
            }
            continue;
        }
        if kind != "table" {
            let table = t.get(&k).or(o.get(&k)).map(|x| x.table.as_str());
            if os == b {
                if b.is_some() {
                    out.before_rows.push(format!(
                        "DROP {} IF EXISTS {}",
                        kind.to_uppercase(),
                        quote(name)
                    ));
                }
                match &ts {
                    Some(s) => {
                        out.after_rows.push(s.clone());
                        step(
                            &mut out,
                            if b.is_some() { "rebuild" } else { "create" },
                            ts.clone(),
                        );
                    }
                    None => step(&mut out, "drop", None),
                }
            } else if ts == b {
                // Ours changed it; ours is kept. Theirs rebuilding its table brings it back.
                if table.is_some_and(|t| rebuilt.contains(t)) {
                    if let Some(s) = &os {
                        out.after_rows.push(s.clone());
                    }
                }
            } else {
                conflict(&mut out, "both sides changed it, differently");
            }
            continue;
        }
        let (ours_changed_rows, theirs_changed_rows) =
            (ours_rows.contains(name), theirs_rows.contains(name));
        if os == b {
            // Only theirs changed the table's definition.
            match (&b, &ts) {
                (None, Some(s)) => {
                    out.before_rows.push(s.clone());
                    out.tables.insert(name.into(), TablePlan::TakeTheirs);
                    step(&mut out, "create", ts.clone());
                }
                (Some(_), None) if ours_changed_rows => {
                    conflict(&mut out, "theirs dropped it; ours changed its rows")
                }
                (Some(_), None) => {
                    out.before_rows
                        .push(format!("DROP TABLE IF EXISTS {}", quote(name)));
                    out.tables.insert(name.into(), TablePlan::Skip);
                    step(&mut out, "drop", None);
                }
                (Some(bs), Some(s)) => match added_columns(bs, s) {
                    Some(_) if ours_changed_rows && policy == SchemaPolicy::Refuse => conflict(
                        &mut out,
                        "theirs added columns; ours changed its rows (--schema-policy one-sided carries the columns)",
                    ),
                    Some(defs) => {
                        for d in defs {
                            out.before_rows
                                .push(format!("ALTER TABLE {} ADD COLUMN {d}", quote(name)));
                        }
                        out.tables.insert(name.into(), TablePlan::Merge);
                        step(&mut out, "add-column", ts.clone());
                    }
                    None if ours_changed_rows => conflict(
                        &mut out,
                        "theirs redefined it (not by ADD COLUMN); ours changed its rows",
                    ),
                    None => {
                        out.before_rows
                            .push(format!("DROP TABLE IF EXISTS {}", quote(name)));
                        out.before_rows.push(s.clone());
                        out.tables.insert(name.into(), TablePlan::TakeTheirs);
                        rebuilt.insert(name.to_string());
                        step(&mut out, "rebuild", ts.clone());
                    }
                },
                (None, None) => {}
            }
        } else if ts == b {
            // Only ours changed it: ours stands, if theirs' rows still fit.
            match (&b, &os) {
                (Some(_), None) if theirs_changed_rows => {
                    conflict(&mut out, "ours dropped it; theirs changed its rows")
                }
                (Some(_), None) => {
                    out.tables.insert(name.into(), TablePlan::Skip);
                }
                (Some(bs), Some(s)) if theirs_changed_rows => match added_columns(bs, s) {
                    Some(_) if policy == SchemaPolicy::OneSided => {}
                    Some(_) => conflict(
                        &mut out,
                        "ours added columns; theirs changed its rows (--schema-policy one-sided merges them by column name)",
                    ),
                    None => conflict(
                        &mut out,
                        "ours redefined it (not by ADD COLUMN); theirs changed its rows",
                    ),
                },
                _ => {}
            }
        } else {
            conflict(&mut out, "both sides changed its definition, differently");
        }
    }
    // A rebuilt table lost its indexes and triggers: make theirs' again.
    for (&(kind, _), obj) in &t {
        if kind != "table" && rebuilt.contains(&obj.table) {
            if let Some(s) = &obj.sql {
                if !out.after_rows.contains(s) {
                    out.after_rows.push(s.clone());
                }
            }
        }
    }
    out
}

/// The column definitions `new` adds to `base` by `ALTER TABLE ... ADD COLUMN` (SQLite
/// appends them to the stored `CREATE TABLE` text), or none if `new` differs otherwise.
pub(crate) fn added_columns(base: &str, new: &str) -> Option<Vec<String>> {
    let close = base.rfind(')')?;
    let (head, tail) = base.split_at(close);
    if !new.starts_with(head) || !new.ends_with(tail) || new.len() <= base.len() {
        return None;
    }
    let middle = new[head.len()..new.len() - tail.len()].trim_start();
    let middle = middle.strip_prefix(',')?;
    let defs = split_top_level(middle);
    let constraint = ["CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN"];
    for d in &defs {
        let first: String = d
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect::<String>()
            .to_ascii_uppercase();
        if constraint.contains(&first.as_str()) {
            return None;
        }
    }
    (!defs.is_empty()).then_some(defs)
}

/// `a INT, b TEXT DEFAULT 'x,y'` split at the commas outside parentheses and quotes.
fn split_top_level(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth, mut quote) = (Vec::new(), String::new(), 0i32, None);
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`' | '[') => quote = Some(if c == '[' { ']' } else { c }),
            (None, '(') => depth += 1,
            (None, ')') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_columns_are_read_from_the_stored_create() {
        assert_eq!(
            added_columns(
                "CREATE TABLE t(a, b)",
                "CREATE TABLE t(a, b, c INT DEFAULT 5)"
            ),
            Some(vec!["c INT DEFAULT 5".to_string()])
        );
        assert_eq!(
            added_columns(
                "CREATE TABLE t(a, b) STRICT",
                "CREATE TABLE t(a, b, c TEXT DEFAULT 'x,y', d REAL) STRICT"
            ),
            Some(vec![
                "c TEXT DEFAULT 'x,y'".to_string(),
                "d REAL".to_string()
            ])
        );
        assert_eq!(
            added_columns("CREATE TABLE t(a, b)", "CREATE TABLE t(a, c)"),
            None
        );
        assert_eq!(
            added_columns("CREATE TABLE t(a, b)", "CREATE TABLE t(a, b, UNIQUE(a))"),
            None
        );
    }
}
