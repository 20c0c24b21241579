//! The merge against an oracle: random schemas, random rows, and random edits on two forks
//! (inserts, updates of random columns, deletes, many on the same rows), made both on
//! plain SQLite files and on scion branches. The oracle reads the three plain files whole
//! and merges them row by row with the three-way rules; scion must publish the same rows,
//! or stop on the same set of conflicts. With `--strategy theirs` the results must match
//! too.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::Env;
use proptest::prelude::*;
use rusqlite::types::Value;
use rusqlite::Connection;
use scion_merge::{MergeOptions, Outcome, Strategy as Side};

/// One table's definition: its key columns and its value columns.
#[derive(Debug, Clone)]
struct Shape {
    name: &'static str,
    create: &'static str,
    key: &'static [&'static str],
}

const SHAPES: [Shape; 3] = [
    Shape {
        name: "ipk",
        create: "CREATE TABLE ipk(id INTEGER PRIMARY KEY, a TEXT, b INT, c REAL, d BLOB)",
        key: &["id"],
    },
    Shape {
        name: "comp",
        create:
            "CREATE TABLE comp(k INT, s TEXT, a TEXT, b INT, c REAL, d BLOB, PRIMARY KEY (k, s))",
        key: &["k", "s"],
    },
    Shape {
        name: "wr",
        create: "CREATE TABLE wr(s TEXT PRIMARY KEY, a TEXT, b INT, c REAL, d BLOB) WITHOUT ROWID",
        key: &["s"],
    },
];

const COLUMNS: [&str; 4] = ["a", "b", "c", "d"];

/// A value for column `col` from a small domain, so that sides often agree.
fn literal(col: usize, pick: u8) -> &'static str {
    const A: [&str; 3] = ["NULL", "'x'", "'y'"];
    const B: [&str; 4] = ["NULL", "0", "1", "2"];
    const C: [&str; 3] = ["NULL", "0.5", "2.0"];
    const D: [&str; 3] = ["NULL", "x'00'", "x'ff'"];
    let domain: &[&str] = [&A[..], &B[..], &C[..], &D[..]][col];
    domain[pick as usize % domain.len()]
}

/// A key literal list for key number `k` of `shape`.
fn key_literals(shape: &Shape, k: u8) -> Vec<String> {
    let k = k % 8;
    shape
        .key
        .iter()
        .map(|c| match *c {
            "id" | "k" => format!("{}", k / 2),
            _ => format!(
                "'s{}'",
                k % 2 + if shape.key.len() == 1 { k / 2 * 2 } else { 0 }
            ),
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Edit {
    Insert {
        table: u8,
        key: u8,
        values: [u8; 4],
    },
    Update {
        table: u8,
        key: u8,
        col: u8,
        value: u8,
    },
    Delete {
        table: u8,
        key: u8,
    },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<u8>(), any::<u8>(), any::<[u8; 4]>())
            .prop_map(|(table, key, values)| Edit::Insert { table, key, values }),
        (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()).prop_map(
            |(table, key, col, value)| Edit::Update {
                table,
                key,
                col,
                value
            }
        ),
        (any::<u8>(), any::<u8>()).prop_map(|(table, key)| Edit::Delete { table, key }),
    ]
}

fn where_key(shape: &Shape, key: u8) -> String {
    shape
        .key
        .iter()
        .zip(key_literals(shape, key))
        .map(|(c, v)| format!("{c} = {v}"))
        .collect::<Vec<_>>()
        .join(" AND ")
}

fn sql_of(tables: &[Shape], e: &Edit) -> String {
    let shape = |t: &u8| &tables[*t as usize % tables.len()];
    match e {
        Edit::Insert { table, key, values } => {
            let s = shape(table);
            let mut cols: Vec<String> = s.key.iter().map(|c| c.to_string()).collect();
            cols.extend(COLUMNS.iter().map(|c| c.to_string()));
            let mut vals = key_literals(s, *key);
            vals.extend((0..4).map(|i| literal(i, values[i]).to_string()));
            format!(
                "INSERT OR IGNORE INTO {} ({}) VALUES ({})",
                s.name,
                cols.join(", "),
                vals.join(", ")
            )
        }
        Edit::Update {
            table,
            key,
            col,
            value,
        } => {
            let s = shape(table);
            let c = *col as usize % 4;
            format!(
                "UPDATE {} SET {} = {} WHERE {}",
                s.name,
                COLUMNS[c],
                literal(c, *value),
                where_key(s, *key)
            )
        }
        Edit::Delete { table, key } => {
            let s = shape(table);
            format!("DELETE FROM {} WHERE {}", s.name, where_key(s, *key))
        }
    }
}

type Row = BTreeMap<String, Value>;
/// A table's rows by key (the key columns' values).
type Table = BTreeMap<Vec<KeyPart>, Row>;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum KeyPart {
    Int(i64),
    Text(String),
}

fn read_table(c: &Connection, shape: &Shape) -> Table {
    let mut stmt = c.prepare(&format!("SELECT * FROM {}", shape.name)).unwrap();
    let names: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
    let rows = stmt
        .query_map([], |r| {
            let mut row = Row::new();
            for (i, n) in names.iter().enumerate() {
                row.insert(n.clone(), r.get::<_, Value>(i)?);
            }
            Ok(row)
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    rows.into_iter()
        .map(|row| {
            let key = shape
                .key
                .iter()
                .map(|k| match &row[*k] {
                    Value::Integer(i) => KeyPart::Int(*i),
                    Value::Text(t) => KeyPart::Text(t.clone()),
                    v => panic!("key value {v:?}"),
                })
                .collect();
            (key, row)
        })
        .collect()
}

fn key_id(key: &[KeyPart]) -> String {
    let one = |k: &KeyPart| match k {
        KeyPart::Int(i) => i.to_string(),
        KeyPart::Text(t) => serde_json::Value::String(t.clone()).to_string(),
    };
    match key {
        [k] => one(k),
        many => format!("[{}]", many.iter().map(one).collect::<Vec<_>>().join(",")),
    }
}

/// The oracle: each table's merged rows (conflicts taken as `theirs` when `theirs_wins`,
/// else left as ours) and the ids of the conflicts.
fn oracle(
    b: &Table,
    o: &Table,
    t: &Table,
    name: &str,
    theirs_wins: bool,
) -> (Table, BTreeSet<String>) {
    let mut out = o.clone();
    let mut conflicts = BTreeSet::new();
    let keys: BTreeSet<&Vec<KeyPart>> = b.keys().chain(o.keys()).chain(t.keys()).collect();
    for k in keys {
        let (bk, ok, tk) = (b.get(k), o.get(k), t.get(k));
        if tk == bk || ok == tk {
            continue; // theirs changed nothing, or both made the same change
        }
        if ok == bk {
            match tk {
                Some(row) => out.insert(k.clone(), row.clone()),
                None => out.remove(k),
            };
            continue;
        }
        let id = format!("{name}:{}", key_id(k));
        match (bk, ok, tk) {
            (Some(bk), Some(ok), Some(tk)) => {
                let mut merged = ok.clone();
                for (col, tv) in tk {
                    let (bv, ov) = (&bk[col], &ok[col]);
                    if tv == bv || ov == tv {
                        continue;
                    }
                    if ov == bv || theirs_wins {
                        merged.insert(col.clone(), tv.clone());
                    }
                    if ov != bv {
                        conflicts.insert(format!("{id}:{col}"));
                    }
                }
                out.insert(k.clone(), merged);
            }
            _ => {
                conflicts.insert(id);
                if theirs_wins {
                    match tk {
                        Some(row) => out.insert(k.clone(), row.clone()),
                        None => out.remove(k),
                    };
                }
            }
        }
    }
    (out, conflicts)
}

fn apply_plain(path: &std::path::Path, sql: &[String]) {
    let c = Connection::open(path).unwrap();
    for s in sql {
        c.execute_batch(s).unwrap();
    }
}

#[derive(Debug, Clone)]
struct Case {
    tables: Vec<usize>,
    base: Vec<Edit>,
    ours: Vec<Edit>,
    theirs: Vec<Edit>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::sample::subsequence(vec![0usize, 1, 2], 1..=3),
        proptest::collection::vec(edit(), 0..24),
        proptest::collection::vec(edit(), 0..10),
        proptest::collection::vec(edit(), 0..10),
    )
        .prop_map(|(tables, base, ours, theirs)| Case {
            tables,
            base,
            ours,
            theirs,
        })
}

fn run(case: &Case, strategy: Side) -> Result<(), TestCaseError> {
    let shapes: Vec<Shape> = case.tables.iter().map(|i| SHAPES[*i].clone()).collect();
    let env = Env::new();
    let dir = env.dir.path();
    let schema: Vec<String> = shapes.iter().map(|s| s.create.to_string()).collect();
    let base_sql: Vec<String> = case.base.iter().map(|e| sql_of(&shapes, e)).collect();
    let ours_sql: Vec<String> = case.ours.iter().map(|e| sql_of(&shapes, e)).collect();
    let theirs_sql: Vec<String> = case.theirs.iter().map(|e| sql_of(&shapes, e)).collect();

    let plain = env.create("m", &[schema.join(";"), base_sql.join(";")].join(";"));
    let (ours_file, theirs_file) = (dir.join("ours.db"), dir.join("theirs.db"));
    std::fs::copy(&plain, &ours_file).unwrap();
    std::fs::copy(&plain, &theirs_file).unwrap();
    apply_plain(&ours_file, &ours_sql);
    apply_plain(&theirs_file, &theirs_sql);

    env.scion
        .set_protected(&"m@main".parse().unwrap(), false)
        .unwrap();
    env.fork("m@main", "feature");
    for s in &ours_sql {
        env.write("m@main", s);
    }
    for s in &theirs_sql {
        env.write("m@feature", s);
    }

    let (cb, co, ct) = (
        Connection::open(&plain).unwrap(),
        Connection::open(&ours_file).unwrap(),
        Connection::open(&theirs_file).unwrap(),
    );
    let mut want_conflicts = BTreeSet::new();
    let mut want_rows = BTreeMap::new();
    for s in &shapes {
        let (rows, conflicts) = oracle(
            &read_table(&cb, s),
            &read_table(&co, s),
            &read_table(&ct, s),
            s.name,
            strategy == Side::Theirs,
        );
        want_conflicts.extend(conflicts);
        want_rows.insert(s.name, rows);
    }
    let before = env.version("m@main");
    let opts = MergeOptions {
        strategy,
        ..Default::default()
    };
    let report = env.merge("m@feature", "m@main", &opts);
    let got: BTreeSet<String> = report.conflicts.iter().map(|c| c.id.clone()).collect();
    prop_assert_eq!(&got, &want_conflicts, "conflict ids; report {:#?}", report);
    let main = env.open("m@main");
    if strategy == Side::Fail && !want_conflicts.is_empty() {
        prop_assert_eq!(report.outcome, Outcome::Conflicts);
        prop_assert_eq!(env.version("m@main"), before, "nothing published");
        for s in &shapes {
            prop_assert_eq!(read_table(&main, s), read_table(&co, s));
        }
        return Ok(());
    }
    prop_assert!(report.violations.is_empty(), "{:#?}", report.violations);
    prop_assert_ne!(report.outcome, Outcome::Conflicts);
    for s in &shapes {
        prop_assert_eq!(
            &read_table(&main, s),
            &want_rows[s.name],
            "table {}",
            s.name
        );
    }
    let ok: String = main
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    prop_assert_eq!(ok, "ok");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn merges_match_a_row_by_row_oracle_over_plain_sqlite_files(case in case()) {
        run(&case, Side::Fail)?;
    }

    #[test]
    fn theirs_wins_matches_the_oracle_too(case in case()) {
        run(&case, Side::Theirs)?;
    }
}
