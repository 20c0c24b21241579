//! Merges of every kind of change, conflict and violation, through the VFS, checked by
//! reading the destination back.

mod common;

use common::Env;
use scion_merge::{ConflictKind, MergeOptions, Outcome, Resolution, Strategy};

fn shop() -> Env {
    let env = Env::new();
    env.create(
        "shop",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b INT);
         INSERT INTO t VALUES (1,'a1',10),(2,'a2',20),(3,'a3',30),(4,'a4',40);",
    );
    env.fork("shop@main", "feature");
    // Protection is its own test below; these merge into main freely.
    env.scion
        .engine()
        .set_protected(&"shop@main".parse().unwrap(), false)
        .unwrap();
    env
}

#[test]
fn a_protected_destination_needs_allow_protected() {
    let env = shop();
    env.scion
        .engine()
        .set_protected(&"shop@main".parse().unwrap(), true)
        .unwrap();
    env.write("shop@feature", "INSERT INTO t VALUES (9,'a9',90)");
    let err = env
        .try_merge("shop@feature", "shop@main", &MergeOptions::default())
        .unwrap_err();
    assert!(
        matches!(
            err.engine_error(),
            Some(scion_core::EngineError::Protected { .. })
        ),
        "{err}"
    );
    let opts = MergeOptions {
        allow_protected: true,
        ..Default::default()
    };
    assert_eq!(
        env.merge("shop@feature", "shop@main", &opts).outcome,
        Outcome::FastForward
    );
}

#[test]
fn edits_to_different_columns_of_one_row_merge() {
    let env = shop();
    env.write("shop@main", "UPDATE t SET b = 21 WHERE id = 2");
    env.write(
        "shop@feature",
        "UPDATE t SET a = 'theirs2' WHERE id = 2; INSERT INTO t VALUES (5,'a5',50)",
    );
    let r = env.merge("shop@feature", "shop@main", &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert!(r.conflicts.is_empty());
    // The base is named by what main's history says of it.
    assert!(
        r.base.how.starts_with("shop@main v1: the newest version"),
        "{}",
        r.base.how
    );
    assert_eq!(
        env.rows("shop@main", "SELECT * FROM t ORDER BY id"),
        ["1|a1|10", "2|theirs2|21", "3|a3|30", "4|a4|40", "5|a5|50"]
    );
    // Merging the same source again is a no-op: the base moved to what was merged.
    let v = env.version("shop@main");
    let again = env.merge("shop@feature", "shop@main", &MergeOptions::default());
    assert_eq!(again.outcome, Outcome::UpToDate, "{again:#?}");
    assert_eq!(env.version("shop@main"), v);
}

#[test]
fn a_base_at_a_fork_point_is_named_by_it() {
    let env = shop();
    env.fork("shop@main", "other");
    env.write("shop@main", "UPDATE t SET b = 0 WHERE id = 4");
    env.write("shop@feature", "UPDATE t SET b = 11 WHERE id = 1");
    env.write("shop@other", "UPDATE t SET b = 22 WHERE id = 2");
    let r = env.merge("shop@other", "shop@feature", &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert_eq!(
        r.base.how,
        "shop@main v1, the fork point of shop@feature: the newest version both come from \
         (generation 1 of the version graph)"
    );
}

#[test]
fn conflicts_stop_a_fail_merge_and_are_all_reported() {
    let env = shop();
    env.write("shop@main", "UPDATE t SET a = 'ours1' WHERE id = 1; DELETE FROM t WHERE id = 3; UPDATE t SET b = 41 WHERE id = 4; INSERT INTO t VALUES (10,'ours10',0)");
    env.write("shop@feature", "UPDATE t SET a = 'theirs1' WHERE id = 1; UPDATE t SET b = 31 WHERE id = 3; DELETE FROM t WHERE id = 4; INSERT INTO t VALUES (10,'theirs10',0)");
    let before = env.version("shop@main");
    let r = env.merge("shop@feature", "shop@main", &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Conflicts);
    let kinds: Vec<(String, ConflictKind)> =
        r.conflicts.iter().map(|c| (c.id.clone(), c.kind)).collect();
    assert_eq!(
        kinds,
        [
            ("t:1:a".to_string(), ConflictKind::UpdateUpdate),
            ("t:3".to_string(), ConflictKind::DeleteUpdate),
            ("t:4".to_string(), ConflictKind::UpdateDelete),
            ("t:10".to_string(), ConflictKind::InsertInsert),
        ]
    );
    assert_eq!(r.unresolved, 4);
    assert_eq!(env.version("shop@main"), before, "nothing published");

    // Resolved one by one, with a value for one cell.
    let mut opts = MergeOptions::default();
    for (id, res) in [
        ("t:1:a", Resolution::Value(serde_json::json!("both1"))),
        ("t:3", Resolution::Theirs),
        ("t:4", Resolution::Ours),
        ("t:10", Resolution::Theirs),
    ] {
        opts.resolutions.insert(id.to_string(), res);
    }
    let r = env.merge("shop@feature", "shop@main", &opts);
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert_eq!(
        env.rows("shop@main", "SELECT * FROM t ORDER BY id"),
        [
            "1|both1|10",
            "2|a2|20",
            "3|a3|31",
            "4|a4|41",
            "10|theirs10|0"
        ]
    );
}

#[test]
fn strategies_settle_every_conflict_one_way() {
    for (strategy, want) in [(Strategy::Ours, "ours1"), (Strategy::Theirs, "theirs1")] {
        let env = shop();
        env.write("shop@main", "UPDATE t SET a = 'ours1' WHERE id = 1");
        env.write(
            "shop@feature",
            "UPDATE t SET a = 'theirs1', b = 11 WHERE id = 1",
        );
        let opts = MergeOptions {
            strategy,
            ..Default::default()
        };
        let r = env.merge("shop@feature", "shop@main", &opts);
        assert_eq!(r.outcome, Outcome::Merged);
        assert_eq!(
            env.rows("shop@main", "SELECT a, b FROM t WHERE id = 1"),
            [format!("{want}|11")]
        );
    }
}

#[test]
fn a_dry_run_reports_what_a_real_run_does_and_publishes_nothing() {
    let env = shop();
    env.write("shop@main", "UPDATE t SET b = 21 WHERE id = 2");
    env.write("shop@feature", "UPDATE t SET a = 'x' WHERE id = 2");
    let before = env.version("shop@main");
    let dry = env.merge(
        "shop@feature",
        "shop@main",
        &MergeOptions {
            dry_run: true,
            ..Default::default()
        },
    );
    assert_eq!(env.version("shop@main"), before);
    assert!(dry.published.is_none());
    let real = env.merge("shop@feature", "shop@main", &MergeOptions::default());
    assert_eq!(dry.outcome, real.outcome);
    assert_eq!(dry.tables, real.tables);
    assert_eq!(dry.conflicts, real.conflicts);
    assert_eq!(dry.violations, real.violations);
}

#[test]
fn a_source_forked_from_an_unmoved_destination_fast_forwards() {
    let env = shop();
    env.write("shop@feature", "INSERT INTO t VALUES (9,'a9',90)");
    let r = env.merge("shop@feature", "shop@main", &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::FastForward);
    assert_eq!(env.rows("shop@main", "SELECT count(*) FROM t"), ["5"]);
    let history = env
        .scion
        .engine()
        .head_history(&"shop@main".parse().unwrap(), Some(1))
        .unwrap();
    let entry = &history.entries[0];
    assert_eq!(entry.op, scion_core::history::HeadOp::Merge);
    assert_eq!(entry.merged.as_ref().unwrap().branch, "feature");
}
