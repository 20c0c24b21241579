//! Merge sequences that once lost or misjudged data, each test named for its sequence.

mod common;

use common::Env;
use scion_merge::{MergeOptions, Outcome, Strategy};

fn forked(sql: &str) -> Env {
    let env = Env::new();
    env.create("shop", sql);
    env.fork("shop@main", "ours");
    env.fork("shop@main", "theirs");
    env
}

fn with(strategy: Strategy) -> MergeOptions {
    MergeOptions {
        strategy,
        allow_protected: true,
        ..Default::default()
    }
}

#[test]
fn a_column_added_before_the_fork_reads_as_its_default_not_null() {
    let env = forked(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT);
         INSERT INTO t VALUES (1, 'b'), (2, 'b');
         ALTER TABLE t ADD COLUMN c INT DEFAULT 0;",
    );
    env.write("shop@ours", "UPDATE t SET c = 1 WHERE id = 1");
    env.write("shop@theirs", "UPDATE t SET a = 't' WHERE id = 1");
    let r = env.merge("shop@theirs", "shop@ours", &with(Strategy::Fail));
    assert_eq!(r.outcome, Outcome::Merged, "{:#?}", r.conflicts);
    assert!(r.conflicts.is_empty(), "{:#?}", r.conflicts);
    assert_eq!(
        env.rows("shop@ours", "SELECT id, a, c FROM t ORDER BY id"),
        ["1|t|1", "2|b|0"]
    );
}

#[test]
fn a_column_added_before_the_fork_keeps_ours_under_strategy_theirs() {
    let env = forked(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT);
         INSERT INTO t VALUES (1, 'b');
         ALTER TABLE t ADD COLUMN c REAL DEFAULT 2;
         ALTER TABLE t ADD COLUMN d TEXT DEFAULT 'x';",
    );
    env.write("shop@ours", "UPDATE t SET c = 1 WHERE id = 1");
    env.write("shop@theirs", "UPDATE t SET a = 't' WHERE id = 1");
    let r = env.merge("shop@theirs", "shop@ours", &with(Strategy::Theirs));
    assert_eq!(r.outcome, Outcome::Merged);
    assert_eq!(env.rows("shop@ours", "SELECT a, c, d FROM t"), ["t|1.0|x"]);
}

#[test]
fn strategy_ours_that_keeps_ours_is_recorded_and_the_same_merge_is_then_up_to_date() {
    let env = forked(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT);
         INSERT INTO t VALUES (1, 'b'), (2, 'b');",
    );
    env.write("shop@ours", "UPDATE t SET a = 'o' WHERE id = 1");
    env.write("shop@theirs", "UPDATE t SET a = 't' WHERE id = 1");
    let before = env.version("shop@ours");
    let r = env.merge("shop@theirs", "shop@ours", &with(Strategy::Ours));
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert_eq!(env.version("shop@ours"), before + 1);
    assert_eq!(env.rows("shop@ours", "SELECT a FROM t WHERE id = 1"), ["o"]);
    // The same merge again: nothing left to bring.
    let again = env.merge("shop@theirs", "shop@ours", &with(Strategy::Fail));
    assert_eq!(again.outcome, Outcome::UpToDate, "{again:#?}");
    // Theirs goes on, editing only row 2: ours' row 1 is not turned into theirs'.
    env.write("shop@theirs", "UPDATE t SET a = 't2' WHERE id = 2");
    let next = env.merge("shop@theirs", "shop@ours", &with(Strategy::Theirs));
    assert_eq!(next.outcome, Outcome::Merged);
    assert_eq!(
        env.rows("shop@ours", "SELECT a FROM t ORDER BY id"),
        ["o", "t2"]
    );
}

#[test]
fn a_convergent_edit_is_recorded_as_a_merge_not_up_to_date() {
    let env = forked(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT);
         INSERT INTO t VALUES (1, 'b');",
    );
    env.write("shop@ours", "UPDATE t SET a = 'same' WHERE id = 1");
    env.write("shop@theirs", "UPDATE t SET a = 'same' WHERE id = 1");
    let r = env.merge("shop@theirs", "shop@ours", &with(Strategy::Fail));
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    let again = env.merge("shop@theirs", "shop@ours", &with(Strategy::Fail));
    assert_eq!(again.outcome, Outcome::UpToDate);
}

#[test]
fn a_criss_cross_refusal_names_its_bases_as_base_takes_them() {
    let env = forked(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT);
         INSERT INTO t VALUES (1, 'b'), (2, 'b');",
    );
    env.write("shop@ours", "UPDATE t SET a = 'o' WHERE id = 1");
    env.write("shop@theirs", "UPDATE t SET a = 't' WHERE id = 2");
    env.fork("shop@ours", "ours-then");
    env.fork("shop@theirs", "theirs-then");
    env.merge("shop@ours-then", "shop@theirs", &with(Strategy::Fail));
    env.merge("shop@theirs-then", "shop@ours", &with(Strategy::Fail));
    let refused = env.try_merge("shop@theirs", "shop@ours", &with(Strategy::Fail));
    let Err(scion_merge::MergeError::SeveralBases { bases, .. }) = refused else {
        panic!("{refused:?}");
    };
    assert_eq!(bases.len(), 2, "{bases:?}");
    eprintln!("criss-cross bases: {bases:?}");
    for b in &bases {
        assert!(b.starts_with("shop@"), "{b} is not a name --base takes");
    }
    // Each one is taken by --base as it is written.
    let base: scion_core::Target = bases[0].parse().unwrap();
    let r = env.merge(
        "shop@theirs",
        "shop@ours",
        &MergeOptions {
            base: Some(base),
            ..with(Strategy::Fail)
        },
    );
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
}

#[test]
fn a_1_mib_blob_conflict_reports_its_length_and_hash_not_the_blob() {
    let env = forked(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB, n INT);
         INSERT INTO t VALUES (1, zeroblob(1048576), 0);",
    );
    env.write(
        "shop@ours",
        "UPDATE t SET b = randomblob(1048576) WHERE id = 1",
    );
    env.write(
        "shop@theirs",
        "UPDATE t SET b = randomblob(1048576) WHERE id = 1",
    );
    let r = env.merge(
        "shop@theirs",
        "shop@ours",
        &MergeOptions {
            dry_run: true,
            ..with(Strategy::Fail)
        },
    );
    assert_eq!(r.conflicts.len(), 1);
    let report = serde_json::to_string(&r).unwrap();
    assert!(report.len() < 16_384, "a report of {} bytes", report.len());
    let cell = &r.conflicts[0].columns[0];
    assert_eq!(cell.ours["bytes"], 1_048_576, "{:?}", cell.ours);
    assert_eq!(cell.ours["kind"], "blob");
    assert_ne!(cell.ours["xxh3"], cell.theirs["xxh3"]);
    // Resolved by side, the whole value is written.
    let done = env.merge(
        "shop@theirs",
        "shop@ours",
        &MergeOptions {
            resolutions: [(r.conflicts[0].id.clone(), scion_merge::Resolution::Theirs)].into(),
            ..with(Strategy::Fail)
        },
    );
    assert_eq!(done.outcome, Outcome::Merged);
    assert_eq!(
        env.rows("shop@ours", "SELECT length(b) FROM t"),
        ["1048576"]
    );
}
