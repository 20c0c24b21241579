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
        .engine()
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

/// An edit of the big table: ids over a range wider than its rows, so some insert.
#[derive(Debug, Clone)]
enum BigEdit {
    Update { id: u16, value: u8 },
    Delete { id: u16 },
    Insert { id: u16, value: u8 },
}

fn big_edit() -> impl Strategy<Value = BigEdit> {
    prop_oneof![
        (0u16..3500, any::<u8>()).prop_map(|(id, value)| BigEdit::Update { id, value }),
        (0u16..3500).prop_map(|id| BigEdit::Delete { id }),
        (0u16..3500, any::<u8>()).prop_map(|(id, value)| BigEdit::Insert { id, value }),
    ]
}

fn big_sql(e: &BigEdit) -> String {
    match e {
        BigEdit::Update { id, value } => {
            format!("UPDATE big SET v = {} WHERE id = {id}", value % 4)
        }
        BigEdit::Delete { id } => format!("DELETE FROM big WHERE id = {id}"),
        BigEdit::Insert { id, value } => format!(
            "INSERT OR IGNORE INTO big VALUES ({id}, {}, printf('%.200c', 'n'))",
            value % 4
        ),
    }
}

const BIG: Shape = Shape {
    name: "big",
    create: "CREATE TABLE big(id INTEGER PRIMARY KEY, v INT, pad TEXT)",
    key: &["id"],
};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    /// A table of several b-tree levels (3000 rows of 200 bytes): changed leaves are found
    /// by lookup from the root, not by walking the interior; the oracle reads it whole.
    #[test]
    fn merges_of_a_multi_level_table_match_the_oracle(
        ours in proptest::collection::vec(big_edit(), 1..12),
        theirs in proptest::collection::vec(big_edit(), 1..12),
    ) {
        let env = Env::new();
        let seed = "CREATE TABLE big(id INTEGER PRIMARY KEY, v INT, pad TEXT);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
            INSERT INTO big SELECT i, i % 4, printf('%.200c', 'x') FROM n;";
        let plain = env.create("m", seed);
        let dir = env.dir.path();
        let (ours_sql, theirs_sql): (Vec<String>, Vec<String>) =
            (ours.iter().map(big_sql).collect(), theirs.iter().map(big_sql).collect());
        let (of, tf) = (dir.join("ours.db"), dir.join("theirs.db"));
        std::fs::copy(&plain, &of).unwrap();
        std::fs::copy(&plain, &tf).unwrap();
        apply_plain(&of, &ours_sql);
        apply_plain(&tf, &theirs_sql);
        env.scion.engine().set_protected(&"m@main".parse().unwrap(), false).unwrap();
        env.fork("m@main", "feature");
        env.write("m@main", &ours_sql.join(";"));
        env.write("m@feature", &theirs_sql.join(";"));
        let (b, o, t) = (
            read_table(&Connection::open(&plain).unwrap(), &BIG),
            read_table(&Connection::open(&of).unwrap(), &BIG),
            read_table(&Connection::open(&tf).unwrap(), &BIG),
        );
        let (want, conflicts) = oracle(&b, &o, &t, "big", true);
        let opts = MergeOptions { strategy: Side::Theirs, ..Default::default() };
        let report = env.merge("m@feature", "m@main", &opts);
        let got: BTreeSet<String> = report.conflicts.iter().map(|c| c.id.clone()).collect();
        prop_assert_eq!(got, conflicts);
        prop_assert_eq!(read_table(&env.open("m@main"), &BIG), want);
    }
}
