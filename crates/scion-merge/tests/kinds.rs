//! Each schema rule, table shape and violation a merge meets.

mod common;

use common::Env;
use scion_merge::{MergeOptions, Outcome, SchemaPolicy, ViolationKind};

/// Database `shop` from `sql`, with branch `feature` forked from an unprotected main.
fn env_with(sql: &str) -> Env {
    let env = Env::new();
    env.create("shop", sql);
    env.scion
        .engine()
        .set_protected(&"shop@main".parse().unwrap(), false)
        .unwrap();
    env.fork("shop@main", "feature");
    env
}

fn merge(env: &Env, opts: &MergeOptions) -> scion_merge::MergeReport {
    env.merge("shop@feature", "shop@main", opts)
}

const T: &str = "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b INT);
                 INSERT INTO t VALUES (1,'a1',10),(2,'a2',20);";

#[test]
fn new_tables_indexes_views_and_triggers_of_one_side_are_carried() {
    let env = env_with(T);
    env.write("shop@main", "UPDATE t SET b = 11 WHERE id = 1");
    env.write(
        "shop@feature",
        "CREATE TABLE n(k TEXT PRIMARY KEY, v BLOB); INSERT INTO n VALUES ('x', x'00ff');
         CREATE INDEX t_a ON t(a); CREATE VIEW va AS SELECT a FROM t;
         CREATE TRIGGER tr AFTER INSERT ON t BEGIN INSERT INTO n VALUES (new.a, NULL); END",
    );
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    let names = env.rows(
        "shop@main",
        "SELECT type || ':' || name FROM sqlite_schema WHERE name NOT LIKE 'sqlite%' ORDER BY name",
    );
    assert_eq!(
        names,
        ["table:n", "table:t", "index:t_a", "trigger:tr", "view:va"]
    );
    assert_eq!(env.rows("shop@main", "SELECT k, hex(v) FROM n"), ["x|00FF"]);
    assert_eq!(
        env.rows("shop@main", "SELECT b FROM t WHERE id = 1"),
        ["11"]
    );
}

#[test]
fn add_column_is_carried_where_the_policy_allows() {
    let sql = "ALTER TABLE t ADD COLUMN c TEXT DEFAULT 'd'; UPDATE t SET c = 'c2' WHERE id = 2";
    // Ours did not touch t: carried under either policy.
    let env = env_with(T);
    env.write("shop@main", "CREATE TABLE other(x)");
    env.write("shop@feature", sql);
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert_eq!(
        env.rows("shop@main", "SELECT id, c FROM t"),
        ["1|d", "2|c2"]
    );

    // Ours changed rows of t: a schema conflict under refuse, merged by name under one-sided.
    let env = env_with(T);
    env.write("shop@main", "UPDATE t SET a = 'ours1' WHERE id = 1");
    env.write("shop@feature", sql);
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Conflicts);
    assert_eq!(r.schema_conflicts.len(), 1, "{r:#?}");
    assert!(r.schema_conflicts[0]
        .theirs_sql
        .as_deref()
        .unwrap()
        .contains("c TEXT"));
    let opts = MergeOptions {
        schema_policy: SchemaPolicy::OneSided,
        ..Default::default()
    };
    let r = merge(&env, &opts);
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert_eq!(
        env.rows("shop@main", "SELECT id, a, c FROM t"),
        ["1|ours1|d", "2|a2|c2"]
    );
}

#[test]
fn two_sided_or_destructive_schema_changes_are_conflicts_and_nothing_is_applied() {
    let env = env_with(T);
    env.write("shop@main", "ALTER TABLE t ADD COLUMN x INT");
    env.write(
        "shop@feature",
        "ALTER TABLE t ADD COLUMN y INT; CREATE TABLE z(q)",
    );
    let before = env.version("shop@main");
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Conflicts);
    let c = &r.schema_conflicts[0];
    assert_eq!((c.kind.as_str(), c.name.as_str()), ("table", "t"));
    assert!(c.base_sql.is_some() && c.ours_sql.is_some() && c.theirs_sql.is_some());
    assert_eq!(env.version("shop@main"), before);
    assert_eq!(
        env.rows(
            "shop@main",
            "SELECT count(*) FROM sqlite_schema WHERE name = 'z'"
        ),
        ["0"]
    );

    let env = env_with(T);
    env.write("shop@main", "UPDATE t SET b = 0");
    env.write("shop@feature", "DROP TABLE t");
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Conflicts);
    assert_eq!(r.schema_conflicts[0].theirs_sql, None);
}

#[test]
fn keyless_tables_merge_as_multisets_of_whole_rows() {
    let env = env_with(
        "CREATE TABLE log(msg TEXT, n INT); INSERT INTO log VALUES ('a',1),('b',2),('b',2);",
    );
    env.write(
        "shop@main",
        "INSERT INTO log VALUES ('ours',1); INSERT INTO log VALUES ('same',0)",
    );
    env.write(
        "shop@feature",
        "INSERT INTO log VALUES ('theirs',1); INSERT INTO log VALUES ('same',0); DELETE FROM log WHERE rowid = 3",
    );
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert_eq!(
        env.rows("shop@main", "SELECT msg, n FROM log ORDER BY msg"),
        ["a|1", "b|2", "ours|1", "same|0", "theirs|1"]
    );
}

#[test]
fn autoincrement_ids_are_never_handed_out_again() {
    let env = env_with(
        "CREATE TABLE a(id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT); INSERT INTO a(v) VALUES ('x');",
    );
    env.write("shop@main", "INSERT INTO a(v) VALUES ('o')");
    env.write(
        "shop@feature",
        "INSERT INTO a(id, v) VALUES (7, 't'); DELETE FROM a WHERE id = 7",
    );
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert_eq!(
        env.rows(
            "shop@main",
            "SELECT seq FROM sqlite_sequence WHERE name = 'a'"
        ),
        ["7"]
    );
    env.write("shop@main", "INSERT INTO a(v) VALUES ('next')");
    assert_eq!(
        env.rows("shop@main", "SELECT id FROM a WHERE v = 'next'"),
        ["8"]
    );
}

#[test]
fn without_rowid_composite_keys_and_blobs_merge_by_key() {
    let env = env_with(
        "CREATE TABLE w(x TEXT, y INT, v BLOB, n REAL, PRIMARY KEY (x, y)) WITHOUT ROWID;
         INSERT INTO w VALUES ('a',1,x'01',1.5),('a',2,x'02',2.0),('b',1,NULL,0);",
    );
    env.write("shop@main", "UPDATE w SET n = 9 WHERE x = 'a' AND y = 2");
    env.write(
        "shop@feature",
        "UPDATE w SET v = x'ffee' WHERE x = 'a' AND y = 2; UPDATE w SET v = x'03' WHERE x = 'a' AND y = 1; INSERT INTO w VALUES ('c',3,zeroblob(3),0.25)",
    );
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert_eq!(
        env.rows("shop@main", "SELECT x, y, hex(v), n FROM w ORDER BY x, y"),
        ["a|1|03|1.5", "a|2|FFEE|9.0", "b|1||0.0", "c|3|000000|0.25"]
    );
}

#[test]
fn unique_and_foreign_key_violations_are_listed_row_by_row_and_refuse_the_merge() {
    let env = env_with(
        "CREATE TABLE p(id INTEGER PRIMARY KEY); CREATE TABLE c(id INTEGER PRIMARY KEY, p INT REFERENCES p(id));
         CREATE TABLE u(id INTEGER PRIMARY KEY, email TEXT UNIQUE);
         INSERT INTO p VALUES (1),(2); INSERT INTO c VALUES (1,1);",
    );
    env.write(
        "shop@main",
        "DELETE FROM p WHERE id = 2; INSERT INTO u VALUES (1,'x@y')",
    );
    env.write(
        "shop@feature",
        "INSERT INTO c VALUES (2,2); INSERT INTO u VALUES (2,'x@y')",
    );
    let before = env.version("shop@main");
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Conflicts, "{r:#?}");
    let kinds: Vec<(ViolationKind, &str)> = r
        .violations
        .iter()
        .map(|v| (v.kind, v.table.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (ViolationKind::Unique, "u"),
            (ViolationKind::ForeignKey, "c")
        ]
    );
    assert_eq!(r.violations[1].parent.as_deref(), Some("p"));
    assert_eq!(env.version("shop@main"), before);

    // Allowed: the foreign-key violation is committed, the duplicate cannot be and is left out.
    let opts = MergeOptions {
        allow_violations: true,
        ..Default::default()
    };
    let r = merge(&env, &opts);
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert_eq!(
        env.rows("shop@main", "SELECT id, p FROM c ORDER BY id"),
        ["1|1", "2|2"]
    );
    assert_eq!(env.rows("shop@main", "SELECT id FROM u"), ["1"]);
}

#[test]
fn triggers_do_not_fire_again_for_rows_theirs_triggers_made() {
    let env = env_with(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT); CREATE TABLE audit(id INTEGER PRIMARY KEY, what TEXT);
         CREATE TRIGGER t_ins AFTER INSERT ON t BEGIN INSERT INTO audit(what) VALUES ('ins ' || new.a); END;",
    );
    env.write("shop@main", "CREATE TABLE unrelated(x)");
    env.write("shop@feature", "INSERT INTO t VALUES (1, 'one')");
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert_eq!(env.rows("shop@main", "SELECT what FROM audit"), ["ins one"]);
}

#[test]
fn a_merge_racing_a_commit_on_the_destination_publishes_nothing_and_a_retry_merges() {
    let env = env_with(T);
    env.write("shop@main", "UPDATE t SET b = 11 WHERE id = 1");
    env.write("shop@feature", "UPDATE t SET a = 'f' WHERE id = 2");
    // A commit lands on main after a merge read it: a result computed from the old head
    // loses the compare-and-swap, and main keeps the commit.
    let (d, _) = env
        .scion
        .engine()
        .read_ref(&"shop@main".parse().unwrap())
        .unwrap();
    env.write("shop@main", "UPDATE t SET b = 12 WHERE id = 1");
    let expect = scion_core::ResolvedVersion {
        root: d.root,
        version: d.version,
    };
    let err = env
        .scion
        .publish_merge(
            &"shop@main".parse().unwrap(),
            &expect,
            d.root,
            scion_core::history::MergedFrom {
                branch: "feature".into(),
                root: d.root,
                version: 1,
                base: d.root,
                renumbered: Vec::new(),
            },
            false,
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            scion_core::CoreError::Engine(scion_core::EngineError::Conflict { .. })
        ),
        "{err}"
    );
    assert_eq!(
        env.rows("shop@main", "SELECT b FROM t WHERE id = 1"),
        ["12"]
    );
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged);
    assert_eq!(
        env.rows("shop@main", "SELECT a, b FROM t ORDER BY id"),
        ["a1|12", "f|20"]
    );
}

#[test]
fn a_conflict_free_merge_is_symmetric_as_data() {
    let setup = || {
        let env = env_with(T);
        env.write(
            "shop@main",
            "UPDATE t SET b = 11 WHERE id = 1; INSERT INTO t VALUES (3,'o',3)",
        );
        env.write(
            "shop@feature",
            "UPDATE t SET a = 'f' WHERE id = 1; DELETE FROM t WHERE id = 2",
        );
        env
    };
    let one = setup();
    merge(&one, &MergeOptions::default());
    let other = setup();
    other.merge("shop@main", "shop@feature", &MergeOptions::default());
    let q = "SELECT * FROM t ORDER BY id";
    assert_eq!(one.rows("shop@main", q), other.rows("shop@feature", q));
    assert_eq!(one.rows("shop@main", q), ["1|f|11", "3|o|3"]);
}

#[test]
fn a_destination_with_changes_in_its_checkout_is_refused_and_a_clean_one_follows() {
    let env = env_with(T);
    let main: scion_core::BranchRef = "shop@main".parse().unwrap();
    let path = env.scion.checkout(&main, false).unwrap().path;
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("UPDATE t SET b = 99 WHERE id = 1")
        .unwrap();
    env.write("shop@feature", "UPDATE t SET a = 'f' WHERE id = 2");
    let err = env
        .try_merge("shop@feature", "shop@main", &MergeOptions::default())
        .unwrap_err();
    assert!(
        matches!(
            err.files_error::<scion_core::CoreError>(),
            Some(scion_core::CoreError::DirtyCheckout { .. })
        ),
        "{err}"
    );
    let hint = err.describe().hint.unwrap();
    assert!(hint.contains("scion checkpoint shop@main"), "{hint}");
    // Checkpointed, the merge goes through and the clean checkout follows the new head.
    env.scion
        .checkpoint(&main, &"mine".parse().unwrap(), Default::default())
        .unwrap();
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert_eq!(
        common::rows(
            &rusqlite::Connection::open(&path).unwrap(),
            "SELECT a, b FROM t ORDER BY id"
        ),
        ["a1|99", "f|20"]
    );
}

#[test]
fn not_null_and_check_violations_a_resolution_would_make_are_reported() {
    let env = env_with(
        "CREATE TABLE p(id INTEGER PRIMARY KEY, name TEXT NOT NULL, price INT CHECK (price >= 0));
         INSERT INTO p VALUES (1, 'a', 1), (2, 'b', 2);",
    );
    env.write(
        "shop@main",
        "UPDATE p SET name = 'ours', price = 10 WHERE id IN (1, 2)",
    );
    env.write(
        "shop@feature",
        "UPDATE p SET name = 'theirs', price = 20 WHERE id IN (1, 2)",
    );
    let mut opts = MergeOptions::default();
    for (id, v) in [
        ("p:1:name", serde_json::Value::Null),
        ("p:1:price", serde_json::json!(15)),
        ("p:2:name", serde_json::json!("both")),
        ("p:2:price", serde_json::json!(-5)),
    ] {
        opts.resolutions
            .insert(id.into(), scion_merge::Resolution::Value(v));
    }
    let before = env.version("shop@main");
    let r = merge(&env, &opts);
    assert_eq!(r.outcome, Outcome::Conflicts, "{r:#?}");
    let kinds: Vec<ViolationKind> = r.violations.iter().map(|v| v.kind).collect();
    assert_eq!(kinds, [ViolationKind::NotNull, ViolationKind::Check]);
    assert_eq!(r.violations[0].key, serde_json::json!({"id": 1}));
    assert_eq!(r.violations[1].key, serde_json::json!({"id": 2}));
    assert_eq!(env.version("shop@main"), before);
}

#[test]
fn a_destination_leased_by_someone_else_is_refused_and_nothing_is_published() {
    let env = env_with(T);
    env.write("shop@main", "UPDATE t SET b = 11 WHERE id = 1");
    env.write("shop@feature", "UPDATE t SET a = 'f' WHERE id = 2");
    let main: scion_core::BranchRef = "shop@main".parse().unwrap();
    env.scion
        .engine()
        .lease(
            &main,
            "another-agent",
            scion_core::ops::lease::LeaseChange::Acquire {
                ttl: std::time::Duration::from_secs(60),
            },
        )
        .unwrap();
    let before = env.version("shop@main");
    let err = env
        .try_merge("shop@feature", "shop@main", &MergeOptions::default())
        .unwrap_err();
    assert!(
        matches!(
            err.engine_error(),
            Some(scion_core::EngineError::LeaseHeld { .. })
        ),
        "{err}"
    );
    assert_eq!(env.version("shop@main"), before);
    // Its scratch fork was removed with the refusal.
    let names: Vec<String> = env
        .scion
        .engine()
        .list_branches(&"shop".parse().unwrap())
        .unwrap()
        .into_iter()
        .map(|(n, _)| n.to_string())
        .collect();
    assert_eq!(names, ["feature", "main"]);
}

#[test]
fn row_granularity_makes_any_row_both_sides_changed_one_conflict() {
    let env = env_with(T);
    env.write("shop@main", "UPDATE t SET b = 11 WHERE id = 1");
    env.write(
        "shop@feature",
        "UPDATE t SET a = 'f' WHERE id = 1; UPDATE t SET a = 'g' WHERE id = 2",
    );
    // By cell, edits to different columns of row 1 merge.
    let cell = merge(
        &env,
        &MergeOptions {
            dry_run: true,
            ..Default::default()
        },
    );
    assert!(cell.conflicts.is_empty(), "{cell:#?}");
    // By row, row 1 is one conflict (both sides changed it); row 2 (theirs only) merges.
    let opts = MergeOptions {
        granularity: scion_merge::Granularity::Row,
        ..Default::default()
    };
    let r = merge(&env, &opts);
    assert_eq!(r.outcome, Outcome::Conflicts);
    let ids: Vec<&str> = r.conflicts.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["t:1"]);
    let cols: Vec<&str> = r.conflicts[0]
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(cols, ["a", "b"]);
    let theirs = MergeOptions {
        strategy: scion_merge::Strategy::Theirs,
        ..opts
    };
    assert_eq!(merge(&env, &theirs).outcome, Outcome::Merged);
    assert_eq!(
        env.rows("shop@main", "SELECT a, b FROM t ORDER BY id"),
        ["f|10", "g|20"]
    );
}

#[test]
fn a_table_one_side_redefined_is_taken_whole_where_the_other_left_it_alone() {
    let env = env_with(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b INT);
         CREATE INDEX t_b ON t(b);
         CREATE TABLE other(x);
         INSERT INTO t VALUES (1,'a1',10),(2,'a2',20);",
    );
    env.write("shop@main", "INSERT INTO other VALUES ('ours')");
    // Theirs rebuilds t with a CHECK and without column b (not an ADD COLUMN).
    env.write(
        "shop@feature",
        "CREATE TABLE t2(id INTEGER PRIMARY KEY, a TEXT CHECK (a <> ''));
         INSERT INTO t2 SELECT id, a FROM t; DROP TABLE t; ALTER TABLE t2 RENAME TO t;
         CREATE INDEX t_a ON t(a); UPDATE t SET a = 'x' WHERE id = 2",
    );
    let r = merge(&env, &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    let actions: Vec<(&str, &str)> = r
        .schema
        .iter()
        .map(|s| (s.name.as_str(), s.action))
        .collect();
    assert!(actions.contains(&("t", "rebuild")), "{actions:?}");
    assert_eq!(
        env.rows("shop@main", "SELECT * FROM t ORDER BY id"),
        ["1|a1", "2|x"]
    );
    assert_eq!(env.rows("shop@main", "SELECT x FROM other"), ["ours"]);
    assert_eq!(
        env.rows(
            "shop@main",
            "SELECT name FROM sqlite_schema WHERE type = 'index' ORDER BY name"
        ),
        ["t_a"]
    );
    assert_eq!(env.rows("shop@main", "PRAGMA integrity_check"), ["ok"]);
}
