//! The BranchBench seeds: the same scale and data seed build the same bytes, with the
//! cardinalities the BranchBench reference gives.

use std::collections::BTreeMap;

use scion_bench::branchbench::seed::{build, Scale};

fn rows(info: &scion_bench::branchbench::seed::SeedInfo) -> BTreeMap<&str, u64> {
    info.rows.iter().map(|(t, n)| (t.as_str(), *n)).collect()
}

#[test]
fn tiny_seed_is_deterministic_and_matches_the_harness_seed() {
    let dir = tempfile::tempdir().unwrap();
    let a = build(&dir.path().join("a.db"), Scale::Tiny, 1).unwrap();
    let b = build(&dir.path().join("b.db"), Scale::Tiny, 1).unwrap();
    assert_eq!(a.sha256, b.sha256, "two builds hash the same");
    assert_eq!(
        std::fs::read(dir.path().join("a.db")).unwrap(),
        std::fs::read(dir.path().join("b.db")).unwrap()
    );
    let other = build(&dir.path().join("c.db"), Scale::Tiny, 2).unwrap();
    assert_ne!(a.sha256, other.sha256, "the data seed matters");
    let r = rows(&a);
    let expected = [
        ("region", 5),
        ("nation", 5),
        ("supplier", 1),
        ("warehouse", 10),
        ("district", 100),
        ("customer", 10_000),
        ("item", 1_000),
        ("stock", 10_000),
        ("orders", 0),
        ("new_order", 0),
        ("order_line", 0),
        ("history", 0),
    ];
    for (table, n) in expected {
        assert_eq!(r[table], n, "{table}");
    }
    // The value rules the workflows' SQL depends on.
    let c = rusqlite::Connection::open(dir.path().join("a.db")).unwrap();
    let (nulls, negative, gc): (i64, i64, i64) = c
        .query_row(
            "SELECT sum(c_balance IS NULL), sum(c_balance < 0), sum(c_credit = 'GC') FROM customer",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((nulls, negative, gc), (0, 0, 10_000));
    let ytd: f64 = c
        .query_row(
            "SELECT c_ytd_payment FROM customer WHERE c_w_id = 1 AND c_d_id = 1 AND c_id = 7",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(ytd, 7000.0);
    let fk: i64 = c
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(fk, 0, "every foreign key holds");
}

#[test]
fn small_seed_adds_an_order_history() {
    let dir = tempfile::tempdir().unwrap();
    let a = build(&dir.path().join("a.db"), Scale::Small, 1).unwrap();
    let r = rows(&a);
    assert_eq!(r["orders"], 10_000);
    assert_eq!(r["new_order"], 3_000, "the last 30% of orders");
    assert_eq!(r["history"], 10_000, "one per customer");
    assert!(
        (90_000..=110_000).contains(&r["order_line"]),
        "{}",
        r["order_line"]
    );
    let c = rusqlite::Connection::open(dir.path().join("a.db")).unwrap();
    let fk: i64 = c
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(fk, 0, "every foreign key holds");
}
