//! `renumber` against a model: both sides append parents and children, and point base
//! children at parents (their own new ones included), in random orders. Every row carries
//! a label no other row has, so the merged result is checked by identity: every row of
//! both sides is there once, each child names the parent its side gave it, the
//! destination's rows keep their ids, the source's new rows come after them in the order
//! the source made them, and SQLite finds the result whole and its foreign keys kept.

mod common;

use std::collections::BTreeMap;

use common::Env;
use proptest::prelude::*;
use scion_merge::{MergeOptions, Outcome};

#[derive(Debug, Clone)]
enum Op {
    /// A parent, under the next id.
    AddParent,
    /// A child of the `pick`-th parent this side sees.
    AddChild(u8),
    /// Point base child `child` (one of this side's half) at the `pick`-th parent.
    Repoint { child: u8, pick: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::AddParent),
        3 => any::<u8>().prop_map(Op::AddChild),
        2 => (any::<u8>(), any::<u8>()).prop_map(|(child, pick)| Op::Repoint { child, pick }),
    ]
}

const BASE_PARENTS: usize = 3;
const BASE_CHILDREN: usize = 4;

/// One side's view while its edits are made: parents' labels in id order, and each child's
/// parent label.
#[derive(Debug, Clone)]
struct Side {
    parents: Vec<String>,
    children: BTreeMap<String, String>,
}

fn base() -> Side {
    Side {
        parents: (0..BASE_PARENTS).map(|i| format!("p-base-{i}")).collect(),
        children: (0..BASE_CHILDREN)
            .map(|i| {
                (
                    format!("c-base-{i}"),
                    format!("p-base-{}", i % BASE_PARENTS),
                )
            })
            .collect(),
    }
}

/// The SQL of `ops` on side `who` (whose half of the base children is `half`), and the
/// side's view afterwards.
fn edits(who: &str, half: usize, ops: &[Op]) -> (String, Side) {
    let mut side = base();
    let mut sql = String::new();
    for (n, op) in ops.iter().enumerate() {
        match op {
            Op::AddParent => {
                let label = format!("p-{who}-{n}");
                sql += &format!("INSERT INTO p(label) VALUES ('{label}');\n");
                side.parents.push(label);
            }
            Op::AddChild(pick) => {
                let parent = side.parents[*pick as usize % side.parents.len()].clone();
                let label = format!("c-{who}-{n}");
                sql += &format!(
                    "INSERT INTO c(parent, label) SELECT id, '{label}' FROM p WHERE label = '{parent}';\n"
                );
                side.children.insert(label, parent);
            }
            Op::Repoint { child, pick } => {
                let child = format!(
                    "c-base-{}",
                    (*child as usize % (BASE_CHILDREN / 2)) * 2 + half
                );
                let parent = side.parents[*pick as usize % side.parents.len()].clone();
                sql += &format!(
                    "UPDATE c SET parent = (SELECT id FROM p WHERE label = '{parent}') WHERE label = '{child}';\n"
                );
                side.children.insert(child, parent);
            }
        }
    }
    (sql, side)
}

fn ids(env: &Env, branch: &str, table: &str) -> BTreeMap<String, i64> {
    env.rows(branch, &format!("SELECT label, id FROM {table}"))
        .into_iter()
        .map(|r| {
            let (label, id) = r.split_once('|').unwrap();
            (label.to_string(), id.parse().unwrap())
        })
        .collect()
}

fn run(ours_ops: &[Op], theirs_ops: &[Op], autoincrement: bool) -> Result<(), TestCaseError> {
    let env = Env::new();
    let mut create = format!(
        "CREATE TABLE p(id INTEGER PRIMARY KEY{}, label TEXT UNIQUE);
         CREATE TABLE c(id INTEGER PRIMARY KEY, parent INT REFERENCES p(id), label TEXT UNIQUE);",
        if autoincrement { " AUTOINCREMENT" } else { "" }
    );
    let b = base();
    for p in &b.parents {
        create += &format!("INSERT INTO p(label) VALUES ('{p}');");
    }
    for (c, p) in &b.children {
        create +=
            &format!("INSERT INTO c(parent, label) SELECT id, '{c}' FROM p WHERE label = '{p}';");
    }
    env.create("db", &create);
    env.fork("db@main", "theirs");
    env.scion
        .engine()
        .set_protected(&"db@main".parse().unwrap(), false)
        .unwrap();
    let (ours_sql, ours) = edits("ours", 0, ours_ops);
    let (theirs_sql, theirs) = edits("theirs", 1, theirs_ops);
    if !ours_sql.is_empty() {
        env.write("db@main", &ours_sql);
    }
    if !theirs_sql.is_empty() {
        env.write("db@theirs", &theirs_sql);
    }
    let before: BTreeMap<&str, BTreeMap<String, i64>> = [
        ("p", ids(&env, "db@main", "p")),
        ("c", ids(&env, "db@main", "c")),
    ]
    .into();
    let theirs_ids: BTreeMap<&str, BTreeMap<String, i64>> = [
        ("p", ids(&env, "db@theirs", "p")),
        ("c", ids(&env, "db@theirs", "c")),
    ]
    .into();
    let opts = MergeOptions {
        renumber: true,
        ..Default::default()
    };
    let r = env.merge("db@theirs", "db@main", &opts);
    prop_assert!(
        matches!(
            r.outcome,
            Outcome::Merged | Outcome::FastForward | Outcome::UpToDate
        ),
        "{r:#?}"
    );
    prop_assert!(r.conflicts.is_empty() && r.violations.is_empty(), "{r:#?}");

    // Every row once, each child under the parent its side gave it.
    let mut want: BTreeMap<String, String> = ours.children.clone();
    for (c, p) in &theirs.children {
        if !c.starts_with("c-base") || b.children[c] != *p {
            want.insert(c.clone(), p.clone());
        }
    }
    let got: BTreeMap<String, String> = env
        .rows(
            "db@main",
            "SELECT c.label, p.label FROM c JOIN p ON p.id = c.parent",
        )
        .into_iter()
        .map(|r| {
            let (c, p) = r.split_once('|').unwrap();
            (c.to_string(), p.to_string())
        })
        .collect();
    prop_assert_eq!(&got, &want);
    let mut parents: Vec<String> = ours.parents.clone();
    parents.extend(
        theirs
            .parents
            .iter()
            .filter(|p| p.starts_with("p-theirs"))
            .cloned(),
    );
    parents.sort();
    let mut got_parents: Vec<String> = env.rows("db@main", "SELECT label FROM p");
    got_parents.sort();
    prop_assert_eq!(got_parents, parents);

    // The destination's ids stay; the source's new rows follow them, in the source's order.
    for table in ["p", "c"] {
        let after = ids(&env, "db@main", table);
        for (label, id) in &before[table] {
            prop_assert_eq!(after.get(label), Some(id), "{} {}", table, label);
        }
        let mut new: Vec<(i64, i64)> = theirs_ids[table]
            .iter()
            .filter(|(label, _)| label.contains("-theirs-"))
            .map(|(label, id)| (*id, after[label]))
            .collect();
        new.sort();
        let moved: Vec<i64> = new.iter().map(|(_, to)| *to).collect();
        let mut sorted = moved.clone();
        sorted.sort();
        prop_assert_eq!(&moved, &sorted, "{} keeps the source's order", table);
    }
    let c = env.open("db@main");
    prop_assert_eq!(common::rows(&c, "PRAGMA integrity_check"), ["ok"]);
    prop_assert!(common::rows(&c, "PRAGMA foreign_key_check").is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn appends_on_both_sides_merge_by_identity_with_renumber(
        ours in prop::collection::vec(op(), 0..8),
        theirs in prop::collection::vec(op(), 0..8),
        autoincrement in any::<bool>(),
    ) {
        run(&ours, &theirs, autoincrement)?;
    }
}
