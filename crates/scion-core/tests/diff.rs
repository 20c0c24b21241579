//! `diff`: counts per table, schema changes, SQL that turns left into right (checked by
//! applying it), and reading only what differs.

mod common;

use common::*;
use proptest::prelude::*;
use scion_core::diff::DiffOptions;
use scion_core::DbName;

fn setup(rows: usize) -> Env {
    let e = env();
    let src = e.path("shop.db");
    seed(&src, rows);
    exec(&src, "CREATE TABLE tags(name TEXT PRIMARY KEY, weight INTEGER); INSERT INTO tags VALUES ('a', 1), ('b', 2); CREATE TABLE log(msg TEXT); INSERT INTO log VALUES ('x'), ('y');");
    e.scion
        .engine()
        .create(&DbName::new("shop").unwrap(), Some(&src))
        .unwrap();
    e.scion
        .engine()
        .fork(&br("shop"), &"t".parse().unwrap(), Default::default())
        .unwrap();
    e
}

fn change_and_checkpoint(e: &Env, sql: &str) {
    let p = e.scion.checkout(&br("shop@t"), false).unwrap().path;
    exec(&p, sql);
    e.scion
        .checkpoint(
            &br("shop@t"),
            &format!("c{}", unique()).parse().unwrap(),
            Default::default(),
        )
        .unwrap();
}

/// Apply `diff --sql` to an export of the left side: it must then dump like the right.
fn sql_round_trip(e: &Env) {
    let report = e
        .scion
        .diff(
            &"shop".parse().unwrap(),
            &"shop@t".parse().unwrap(),
            &DiffOptions {
                sql: true,
                ..DiffOptions::default()
            },
        )
        .unwrap();
    let left = e.path(&format!("left-{}.db", unique()));
    e.scion
        .export(&"shop".parse().unwrap(), &left, false)
        .unwrap();
    exec(&left, report.sql.as_deref().unwrap());
    assert_eq!(
        dump(&left),
        e.dump_target(&e.scion, "shop@t"),
        "SQL:\n{}",
        report.sql.unwrap()
    );
}

#[test]
fn counts_by_primary_key_and_rowid() {
    let e = setup(3000);
    change_and_checkpoint(
        &e,
        "UPDATE items SET price = -1 WHERE id IN (10, 2000); DELETE FROM items WHERE id = 11;
         INSERT INTO items(name, price) VALUES ('new', 1);
         UPDATE tags SET weight = 5 WHERE name = 'a'; INSERT INTO tags VALUES ('c', 3);
         DELETE FROM log WHERE msg = 'x'; CREATE INDEX items_by_name ON items(name);",
    );
    let r = e
        .scion
        .diff(
            &"shop".parse().unwrap(),
            &"shop@t".parse().unwrap(),
            &DiffOptions::default(),
        )
        .unwrap();
    let t = |name: &str| r.tables.iter().find(|t| t.table == name).unwrap().clone();
    let items = t("items");
    assert_eq!((items.added, items.removed, items.changed), (1, 1, 2));
    assert_eq!(items.matched_by, "primary key (id)");
    let tags = t("tags");
    assert_eq!((tags.added, tags.removed, tags.changed), (1, 0, 1));
    assert_eq!(tags.matched_by, "primary key (name)");
    let log = t("log");
    assert_eq!((log.added, log.removed, log.changed), (0, 1, 0));
    assert!(log.matched_by.starts_with("rowid"));
    assert_eq!(r.schema_changes.len(), 1);
    assert_eq!(r.schema_changes[0].name, "items_by_name");
    sql_round_trip(&e);
    let only = e
        .scion
        .diff(
            &"shop".parse().unwrap(),
            &"shop@t".parse().unwrap(),
            &DiffOptions {
                table: Some("tags".into()),
                ..DiffOptions::default()
            },
        )
        .unwrap();
    assert_eq!(only.tables.len(), 1);
}

/// SQLite stores a whole-number REAL as an integer in its records; the diff shows it as the
/// real SQLite reads back (1.0, not 1), and leaves integer columns alone.
#[test]
fn whole_reals_show_as_reals() {
    let e = setup(20);
    change_and_checkpoint(
        &e,
        "UPDATE items SET price = 2.0 WHERE id = 3; UPDATE tags SET weight = 7 WHERE name = 'a';",
    );
    let r = e
        .scion
        .diff(
            &"shop".parse().unwrap(),
            &"shop@t".parse().unwrap(),
            &DiffOptions {
                rows: Some(10),
                ..DiffOptions::default()
            },
        )
        .unwrap();
    let rows = |table: &str| {
        r.tables
            .iter()
            .find(|t| t.table == table)
            .unwrap()
            .rows
            .clone()
            .unwrap()
    };
    let price = &rows("items").changed[0];
    assert_eq!(price.before.as_ref().unwrap()["price"].to_string(), "3.0");
    assert_eq!(price.after.as_ref().unwrap()["price"].to_string(), "2.0");
    let weight = &rows("tags").changed[0];
    assert_eq!(weight.after.as_ref().unwrap()["weight"].to_string(), "7");
}

#[test]
fn a_column_added_before_the_fork_diffs_as_its_default_in_rows_not_rewritten() {
    let e = env();
    let src = e.path("shop.db");
    exec(
        &src,
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT); INSERT INTO t VALUES (1, 'b'), (2, 'b');
         ALTER TABLE t ADD COLUMN c INT DEFAULT 0;",
    );
    e.scion
        .engine()
        .create(&DbName::new("shop").unwrap(), Some(&src))
        .unwrap();
    e.scion
        .engine()
        .fork(&br("shop"), &"t".parse().unwrap(), Default::default())
        .unwrap();
    change_and_checkpoint(&e, "UPDATE t SET a = 'x' WHERE id = 1;");
    let r = e
        .scion
        .diff(
            &"shop".parse().unwrap(),
            &"shop@t".parse().unwrap(),
            &DiffOptions {
                rows: Some(10),
                ..DiffOptions::default()
            },
        )
        .unwrap();
    let rows = r.tables[0].rows.clone().unwrap();
    assert_eq!(rows.changed.len(), 1);
    let row = &rows.changed[0];
    // Before, the row was a short record: SQLite reads c as its default, and so does diff.
    assert_eq!(row.before.as_ref().unwrap()["c"].to_string(), "0");
    assert_eq!(row.after.as_ref().unwrap()["c"].to_string(), "0");
    assert_eq!(row.before.as_ref().unwrap()["a"].to_string(), "\"b\"");
    sql_round_trip(&e);
}

#[test]
fn a_diff_of_a_few_changed_pages_reads_a_few_pages() {
    let e = setup(60_000);
    change_and_checkpoint(
        &e,
        "UPDATE items SET price = -1 WHERE id IN (7, 20000, 45000);",
    );
    let r = e
        .scion
        .diff(
            &"shop".parse().unwrap(),
            &"shop@t".parse().unwrap(),
            &DiffOptions::default(),
        )
        .unwrap();
    let pages = e.scion.engine().read_ref(&br("shop")).unwrap().0.page_count as u64;
    assert_eq!(r.tables[0].changed, 3);
    assert!(r.pages_differing <= 4, "{} pages differ", r.pages_differing);
    // The schema, the b-tree interior pages, and the changed leaves on each side.
    assert!(
        r.pages_read * 20 < pages,
        "read {} of {pages} pages",
        r.pages_read
    );
}

#[test]
fn identical_versions_differ_in_nothing_and_read_only_the_schema() {
    let e = setup(5000);
    let r = e
        .scion
        .diff(
            &"shop".parse().unwrap(),
            &"shop@t".parse().unwrap(),
            &DiffOptions::default(),
        )
        .unwrap();
    assert_eq!(r.pages_differing, 0);
    assert!(r.tables.is_empty() && r.schema_changes.is_empty());
    assert!(r.pages_read <= 2, "{}", r.pages_read);
}

#[derive(Debug, Clone)]
enum Change {
    Update(u16, i64),
    Delete(u16),
    Insert(String),
    Tag(String, i64),
    Untag(u8),
    Blob(u16, usize),
    AddTable,
    DropLog,
    Vacuum,
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (0u16..3000, any::<i64>()).prop_map(|(i, v)| Change::Update(i, v)),
        (0u16..3000).prop_map(Change::Delete),
        "[a-z' ]{0,40}".prop_map(Change::Insert),
        ("[a-z]{1,3}", any::<i64>()).prop_map(|(n, w)| Change::Tag(n, w)),
        (0u8..3).prop_map(Change::Untag),
        (0u16..3000, 0usize..20_000).prop_map(|(i, n)| Change::Blob(i, n)),
        Just(Change::AddTable),
        Just(Change::DropLog),
        Just(Change::Vacuum),
    ]
}

fn sql_of(c: &Change) -> String {
    match c {
        Change::Update(i, v) => format!("UPDATE items SET price = {v} WHERE id = {i};"),
        Change::Delete(i) => format!("DELETE FROM items WHERE id = {i};"),
        Change::Insert(s) => format!(
            "INSERT INTO items(name, price) VALUES ('{}', 0.5);",
            s.replace('\'', "''")
        ),
        Change::Tag(n, w) => format!("INSERT OR REPLACE INTO tags VALUES ('{n}', {w});"),
        Change::Untag(i) => format!(
            "DELETE FROM tags WHERE name = '{}';",
            ["a", "b", "c"][*i as usize]
        ),
        Change::Blob(i, n) => format!("UPDATE items SET name = zeroblob({n}) WHERE id = {i};"),
        Change::AddTable => {
            "CREATE TABLE IF NOT EXISTS more(x, y); INSERT INTO more VALUES (1, 'one');".into()
        }
        Change::DropLog => "DROP TABLE IF EXISTS log;".into(),
        Change::Vacuum => "VACUUM;".into(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn diff_sql_turns_left_into_right(changes in proptest::collection::vec(change(), 1..8)) {
        let e = setup(3000);
        let sql: String = changes.iter().map(sql_of).collect::<Vec<_>>().join("\n");
        change_and_checkpoint(&e, &sql);
        sql_round_trip(&e);
    }
}

/// SQLite's variable-length integer: 7 bits a byte, high bit set on all but the last.
fn sqlite_varint(mut v: u64) -> Vec<u8> {
    assert!(v < 1 << 56, "the 9-byte form is not needed here");
    let mut groups = vec![(v & 0x7f) as u8];
    v >>= 7;
    while v > 0 {
        groups.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    groups.reverse();
    groups
}

#[test]
fn diff_never_follows_an_overflow_chain_past_its_payload_size() {
    // One row whose payload spills into overflow pages 3.., then a crafted copy: the cell
    // claims a payload of about 4.5 PB and its chain loops on page 3 forever. Following
    // the chain until the claimed size is reached would read ~1e12 pages.
    let e = env();
    let good = e.path("good.db");
    exec(
        &good,
        "PRAGMA page_size=4096; CREATE TABLE t(x BLOB); INSERT INTO t VALUES (zeroblob(20000));",
    );
    let mut bytes = std::fs::read(&good).unwrap();
    let page = |n: usize| (n - 1) * 4096;
    let cell = u16::from_be_bytes([bytes[page(2) + 8], bytes[page(2) + 9]]) as usize;
    let (min_local, usable) = (489u64, 4096u64);
    let claimed = min_local + (usable - 4) * (1 << 40); // keeps the local part at 489 bytes
    let mut crafted = sqlite_varint(claimed);
    crafted.push(1); // rowid 1
    crafted.extend(std::iter::repeat_n(0u8, min_local as usize));
    crafted.extend(3u32.to_be_bytes()); // overflow chain starts at page 3
    let at = page(2) + cell;
    bytes[at..at + crafted.len()].copy_from_slice(&crafted);
    bytes[page(3)..page(3) + 4].copy_from_slice(&3u32.to_be_bytes()); // page 3 -> page 3
    let bad = e.path("bad.db");
    std::fs::write(&bad, &bytes).unwrap();
    e.scion
        .engine()
        .create(&DbName::new("good").unwrap(), Some(&good))
        .unwrap();
    e.scion
        .engine()
        .create(&DbName::new("bad").unwrap(), Some(&bad))
        .unwrap();
    let err = e
        .scion
        .diff(
            &"good".parse().unwrap(),
            &"bad".parse().unwrap(),
            &DiffOptions::default(),
        )
        .unwrap_err();
    // Refused up front, from the claimed size alone (following the loop until a hop limit
    // would allocate gigabytes first).
    assert!(
        matches!(
            err,
            scion_core::CoreError::Engine(scion_core::EngineError::Corrupt { .. })
        ) && err.to_string().contains("larger than the database"),
        "{err:?}"
    );
}

#[test]
fn diff_rows_lists_keys_and_values_before_and_after() {
    let e = setup(300);
    change_and_checkpoint(
        &e,
        "UPDATE items SET price = -1 WHERE id = 10; DELETE FROM items WHERE id = 11;
         INSERT INTO items(name, price) VALUES ('new', 1);
         UPDATE tags SET weight = 5 WHERE name = 'a'; DELETE FROM log WHERE msg = 'x';
         UPDATE items SET name = 'bulk' WHERE id BETWEEN 100 AND 149;",
    );
    let diff = |limit| {
        e.scion
            .diff(
                &"shop".parse().unwrap(),
                &"shop@t".parse().unwrap(),
                &DiffOptions {
                    rows: Some(limit),
                    ..DiffOptions::default()
                },
            )
            .unwrap()
    };
    let r = diff(1000);
    let t = |name: &str| r.tables.iter().find(|t| t.table == name).unwrap().clone();
    let items = t("items").rows.unwrap();
    assert!(!items.truncated);
    assert_eq!(items.changed.len(), 51);
    let ten = items
        .changed
        .iter()
        .find(|c| c.key["id"] == serde_json::json!(10))
        .unwrap();
    assert_eq!(
        ten.before.as_ref().unwrap()["price"],
        serde_json::json!(13.5)
    );
    // A REAL column reads back as a real, whole or not (as SQLite returns it).
    assert_eq!(
        ten.after.as_ref().unwrap()["price"],
        serde_json::json!(-1.0)
    );
    assert_eq!(
        ten.after.as_ref().unwrap()["id"],
        serde_json::json!(10),
        "rowid alias"
    );
    assert_eq!(items.removed[0].key["id"], serde_json::json!(11));
    assert!(items.removed[0].after.is_none());
    assert_eq!(
        items.added[0].after.as_ref().unwrap()["name"],
        serde_json::json!("new")
    );
    let tags = t("tags").rows.unwrap();
    assert_eq!(tags.changed[0].key["name"], serde_json::json!("a"));
    assert_eq!(
        tags.changed[0].after.as_ref().unwrap()["weight"],
        serde_json::json!(5)
    );
    let log = t("log").rows.unwrap();
    assert_eq!(log.removed[0].key["rowid"], serde_json::json!(1));
    assert_eq!(
        log.removed[0].before.as_ref().unwrap()["msg"],
        serde_json::json!("x")
    );
    // Bounded: counts stay exact, the listing stops at the limit and says so.
    let r = diff(5);
    let items = r.tables.iter().find(|t| t.table == "items").unwrap();
    assert_eq!(items.changed, 51);
    let listed = items.rows.as_ref().unwrap();
    assert_eq!(
        listed.added.len() + listed.removed.len() + listed.changed.len(),
        5
    );
    assert!(listed.truncated);
}

#[test]
fn a_diff_reads_clean_checkouts_instead_of_the_store() {
    let e = setup(3000);
    change_and_checkpoint(
        &e,
        "UPDATE items SET price = -1 WHERE id IN (10, 1500, 2900);",
    );
    e.scion.checkout(&br("shop"), false).unwrap();
    let counter = std::sync::Arc::new(scion_store::CountingBackend::new(std::sync::Arc::new(
        scion_store::LocalBackend::open(e.store_dir()).unwrap(),
    )));
    // A fresh handle per run: nothing cached from the other run's reads.
    let run = || {
        let s = e.reopen_with(counter.clone());
        let before = counter.counts().requests();
        let r = s
            .diff(
                &"shop".parse().unwrap(),
                &"shop@t".parse().unwrap(),
                &DiffOptions::default(),
            )
            .unwrap();
        (r, counter.counts().requests() - before)
    };
    let (local, local_requests) = run();
    // Without their records the files prove nothing, and every page comes from the store.
    for b in ["main", "t"] {
        let rec = e.store_dir().join(format!("checkouts/shop/{b}.db.scion"));
        std::fs::remove_file(rec).unwrap();
    }
    let (stored, store_requests) = run();
    assert_eq!(local.tables.len(), stored.tables.len());
    assert_eq!(local.tables[0].changed, 3);
    assert_eq!(stored.tables[0].changed, 3);
    assert!(
        local_requests < store_requests,
        "{local_requests} store requests with clean checkouts, {store_requests} without"
    );
}
