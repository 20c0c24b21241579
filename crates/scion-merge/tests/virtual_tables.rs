//! Full-text and spatial indexes merged through their own rows: edits on both sides, then
//! FTS5's `integrity-check`, `MATCH` queries and `rtreecheck` must agree with the same
//! edits applied by hand to one plain SQLite file.

mod common;

use common::{rows, Env};
use rusqlite::Connection;
use scion_merge::{MergeError, MergeOptions, Outcome, Strategy};

/// Database `shop` from `schema`, with forks `ours` and `theirs` of an unprotected main.
fn env_with(schema: &str) -> Env {
    let env = Env::new();
    env.create("shop", schema);
    env.scion
        .engine()
        .set_protected(&"shop@main".parse().unwrap(), false)
        .unwrap();
    env.fork("shop@main", "ours");
    env.fork("shop@main", "theirs");
    env
}

/// A plain file with `schema`, then `edits` applied in order: what the merge must equal.
fn by_hand(env: &Env, schema: &str, edits: &[&str]) -> Connection {
    let path = env.dir.path().join("by-hand.db");
    let _ = std::fs::remove_file(&path);
    let c = Connection::open(&path).unwrap();
    c.execute_batch(schema).unwrap();
    for e in edits {
        c.execute_batch(e).unwrap();
    }
    c
}

fn fts5_ok(c: &Connection, table: &str) {
    c.execute_batch(&format!(
        "INSERT INTO {table}({table}) VALUES('integrity-check')"
    ))
    .unwrap_or_else(|e| panic!("FTS5 integrity-check of {table}: {e}"));
}

fn integrity(c: &Connection) {
    assert_eq!(rows(c, "PRAGMA integrity_check"), ["ok"]);
}

const DOCS: &str = "CREATE VIRTUAL TABLE f USING fts5(title, body);
    INSERT INTO f(rowid, title, body) VALUES
      (1, 'apples', 'red fruit from trees'),
      (2, 'bananas', 'yellow fruit, long'),
      (3, 'carrots', 'orange roots');";

const OURS_FTS: &str = "INSERT INTO f(rowid, title, body) VALUES (4, 'dates', 'sweet brown fruit');
    UPDATE f SET body = 'crisp red fruit from orchards' WHERE rowid = 1;";
const THEIRS_FTS: &str =
    "INSERT INTO f(rowid, title, body) VALUES (5, 'elderberry', 'dark purple berries');
    DELETE FROM f WHERE rowid = 3;
    UPDATE f SET title = 'plantains' WHERE rowid = 2;";

#[test]
fn an_fts5_index_edited_on_both_sides_merges_as_its_rows() {
    for strategy in [Strategy::Fail, Strategy::Theirs, Strategy::Ours] {
        let env = env_with(DOCS);
        env.write("shop@ours", OURS_FTS);
        env.write("shop@theirs", THEIRS_FTS);
        let opts = MergeOptions {
            strategy,
            ..Default::default()
        };
        let r = env.merge("shop@theirs", "shop@ours", &opts);
        assert_eq!(r.outcome, Outcome::Merged, "{strategy:?}: {r:#?}");
        assert!(
            r.tables.iter().all(|t| !t.table.starts_with("f_")),
            "shadow tables are never merged row by row: {:?}",
            r.tables
        );
        let merged = env.open("shop@ours");
        fts5_ok(&merged, "f");
        integrity(&merged);
        let plain = by_hand(&env, DOCS, &[OURS_FTS, THEIRS_FTS]);
        fts5_ok(&plain, "f");
        for q in [
            "SELECT rowid, title, body FROM f ORDER BY rowid",
            "SELECT rowid FROM f WHERE f MATCH 'fruit' ORDER BY rowid",
            "SELECT rowid FROM f WHERE f MATCH 'purple' ORDER BY rowid",
            "SELECT rowid FROM f WHERE f MATCH 'orchards' ORDER BY rowid",
            "SELECT rowid FROM f WHERE f MATCH 'title:plantains' ORDER BY rowid",
            "SELECT count(*) FROM f WHERE f MATCH 'roots'",
        ] {
            assert_eq!(rows(&merged, q), rows(&plain, q), "{strategy:?}: {q}");
        }
    }
}

#[test]
fn the_same_fts5_row_changed_differently_is_a_conflict_not_a_corrupt_index() {
    let env = env_with(DOCS);
    env.write("shop@ours", "UPDATE f SET body = 'ours' WHERE rowid = 2");
    env.write(
        "shop@theirs",
        "UPDATE f SET body = 'theirs' WHERE rowid = 2",
    );
    let r = env.merge("shop@theirs", "shop@ours", &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Conflicts, "{r:#?}");
    assert_eq!(r.conflicts.len(), 1, "{:?}", r.conflicts);
    assert_eq!(r.conflicts[0].table, "f");
    let r = env.merge(
        "shop@theirs",
        "shop@ours",
        &MergeOptions {
            strategy: Strategy::Theirs,
            ..Default::default()
        },
    );
    assert_eq!(r.outcome, Outcome::Merged);
    let merged = env.open("shop@ours");
    fts5_ok(&merged, "f");
    assert_eq!(
        rows(&merged, "SELECT rowid FROM f WHERE f MATCH 'theirs'"),
        ["2"]
    );
    assert!(rows(&merged, "SELECT rowid FROM f WHERE f MATCH 'ours'").is_empty());
}

const EXTERNAL: &str = "CREATE TABLE docs(id INTEGER PRIMARY KEY, title TEXT, body TEXT);
    CREATE VIRTUAL TABLE fx USING fts5(title, body, content='docs', content_rowid='id');
    CREATE TRIGGER docs_ai AFTER INSERT ON docs BEGIN
      INSERT INTO fx(rowid, title, body) VALUES (new.id, new.title, new.body); END;
    CREATE TRIGGER docs_ad AFTER DELETE ON docs BEGIN
      INSERT INTO fx(fx, rowid, title, body) VALUES ('delete', old.id, old.title, old.body); END;
    CREATE TRIGGER docs_au AFTER UPDATE ON docs BEGIN
      INSERT INTO fx(fx, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
      INSERT INTO fx(rowid, title, body) VALUES (new.id, new.title, new.body); END;
    INSERT INTO docs VALUES (1, 'apples', 'red fruit'), (2, 'bananas', 'yellow fruit'),
      (3, 'carrots', 'orange roots');";

#[test]
fn an_external_content_fts5_index_is_rebuilt_from_its_merged_content() {
    let ours = "INSERT INTO docs VALUES (4, 'dates', 'brown fruit'); UPDATE docs SET body = 'green fruit' WHERE id = 1";
    let theirs =
        "DELETE FROM docs WHERE id = 3; INSERT INTO docs VALUES (5, 'figs', 'purple fruit')";
    let env = env_with(EXTERNAL);
    env.write("shop@ours", ours);
    env.write("shop@theirs", theirs);
    let r = env.merge("shop@theirs", "shop@ours", &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    let merged = env.open("shop@ours");
    fts5_ok(&merged, "fx");
    integrity(&merged);
    let plain = by_hand(&env, EXTERNAL, &[ours, theirs]);
    for q in [
        "SELECT id, title, body FROM docs ORDER BY id",
        "SELECT rowid FROM fx WHERE fx MATCH 'fruit' ORDER BY rowid",
        "SELECT rowid FROM fx WHERE fx MATCH 'green' ORDER BY rowid",
        "SELECT rowid FROM fx WHERE fx MATCH 'purple' ORDER BY rowid",
        "SELECT count(*) FROM fx WHERE fx MATCH 'roots'",
    ] {
        assert_eq!(rows(&merged, q), rows(&plain, q), "{q}");
    }
}

const SPATIAL: &str = "CREATE VIRTUAL TABLE rt USING rtree(id, x0, x1, y0, y1);
    INSERT INTO rt VALUES (1, 0, 1, 0, 1), (2, 2, 3, 2, 3), (3, 5, 6, 5, 6);";

#[test]
fn an_rtree_edited_on_both_sides_merges_as_its_rows() {
    let mut ours = String::from("UPDATE rt SET x1 = 1.5 WHERE id = 1;");
    let mut theirs = String::from("DELETE FROM rt WHERE id = 3;");
    // Enough rows on each side to split nodes: the tree's shape differs from either side's.
    for i in 0..60 {
        ours += &format!("INSERT INTO rt VALUES ({}, {i}, {}, 0, 1);", 100 + i, i + 1);
        theirs += &format!("INSERT INTO rt VALUES ({}, 0, 1, {i}, {});", 200 + i, i + 2);
    }
    let env = env_with(SPATIAL);
    env.write("shop@ours", &ours);
    env.write("shop@theirs", &theirs);
    let r = env.merge("shop@theirs", "shop@ours", &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    let merged = env.open("shop@ours");
    assert_eq!(rows(&merged, "SELECT rtreecheck('rt')"), ["ok"]);
    integrity(&merged);
    let plain = by_hand(&env, SPATIAL, &[&ours, &theirs]);
    for q in [
        "SELECT * FROM rt ORDER BY id",
        "SELECT count(*) FROM rt",
        "SELECT id FROM rt WHERE x0 >= 10 AND x1 <= 20 ORDER BY id",
        "SELECT id FROM rt WHERE y0 >= 30 AND y1 <= 40 ORDER BY id",
    ] {
        assert_eq!(rows(&merged, q), rows(&plain, q), "{q}");
    }
}

#[test]
fn a_virtual_table_of_an_unknown_module_is_refused_naming_it() {
    let env =
        env_with("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a');");
    // A module this SQLite has (dbstat is eponymous, so made through the schema by hand):
    // a table scion has no rules for.
    env.write(
        "shop@main",
        "PRAGMA writable_schema = ON;
         INSERT INTO sqlite_schema VALUES ('table', 'stats', 'stats', 0, 'CREATE VIRTUAL TABLE stats USING dbstat(main)');
         PRAGMA writable_schema = OFF",
    );
    env.fork("shop@main", "x");
    env.fork("shop@main", "y");
    env.write("shop@x", "UPDATE t SET v = 'x'");
    env.write("shop@y", "INSERT INTO t VALUES (2, 'y')");
    let before = env.version("shop@x");
    let e = env
        .try_merge("shop@y", "shop@x", &MergeOptions::default())
        .unwrap_err();
    assert!(
        matches!(&e, MergeError::UnknownVirtualTable { table, module } if table == "stats" && module == "dbstat"),
        "{e}"
    );
    assert!(e.to_string().contains("stats"), "{e}");
    assert_eq!(env.version("shop@x"), before, "nothing was written");
}
