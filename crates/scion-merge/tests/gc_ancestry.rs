//! gc reclaims pages, never the version graph: after a gc with no history retention,
//! every merge decides what it decided before, or (its base's pages reclaimed) refuses
//! saying so. Never "segment is missing".

mod common;

use std::time::Duration;

use common::Env;
use proptest::prelude::*;
use scion_merge::{MergeError, MergeOptions, Outcome, Strategy as MergeStrategy};

fn gc_with_no_retention(env: &Env) {
    env.scion
        .engine()
        .set_history_retention(Duration::ZERO)
        .unwrap();
    env.scion.gc(Duration::ZERO, true).unwrap();
    let report = env.scion.engine().verify().unwrap();
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
}

fn theirs() -> MergeOptions {
    MergeOptions {
        strategy: MergeStrategy::Theirs,
        allow_protected: true,
        ..Default::default()
    }
}

fn dry_run() -> MergeOptions {
    MergeOptions {
        dry_run: true,
        ..theirs()
    }
}

#[test]
fn fork_f_two_commits_retention_0_gc_then_merge_f_into_main() {
    let env = Env::new();
    env.create(
        "shop",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a');",
    );
    env.fork("shop@main", "f");
    env.write("shop@f", "UPDATE t SET v = 'b' WHERE id = 1");
    env.write("shop@f", "UPDATE t SET v = 'c' WHERE id = 1");
    gc_with_no_retention(&env);
    let r = env.merge("shop@f", "shop@main", &theirs());
    assert_eq!(r.outcome, Outcome::FastForward, "{r:#?}");
    assert_eq!(env.rows("shop@main", "SELECT v FROM t"), ["c"]);
}

/// One step of a random history over branches `b0..b{n}`.
#[derive(Debug, Clone)]
enum Step {
    Fork { from: usize },
    Write { on: usize, id: i64 },
    Merge { from: usize, into: usize },
}

fn steps() -> impl proptest::strategy::Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        1 => (0usize..4).prop_map(|from| Step::Fork { from }),
        3 => ((0usize..4), (1i64..6)).prop_map(|(on, id)| Step::Write { on, id }),
        2 => ((0usize..4), (0usize..4)).prop_map(|(from, into)| Step::Merge { from, into }),
    ];
    proptest::collection::vec(step, 6..30)
}

/// How a merge ended, as far as gc may not change it.
fn decided(r: &scion_merge::MergeResult<scion_merge::MergeReport>) -> String {
    match r {
        Ok(r) => format!("{:?} {:?}", r.outcome, r.conflicts.len()),
        Err(MergeError::SeveralBases { .. }) => "several bases".into(),
        Err(MergeError::NoBase { .. }) => "no base".into(),
        Err(e) => format!("error: {e}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn merges_after_gc_with_retention_0_decide_as_before_or_say_the_base_was_reclaimed(
        history in steps()
    ) {
        let env = Env::new();
        env.create(
            "h",
            "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
             INSERT INTO t VALUES (1, 'x'), (2, 'x'), (3, 'x'), (4, 'x'), (5, 'x');",
        );
        let mut branches = vec!["main".to_string()];
        for name in ["x", "y"] {
            env.fork("h@main", name);
            branches.push(name.to_string());
        }
        for (i, step) in history.iter().enumerate() {
            match step {
                Step::Fork { from } => {
                    let name = format!("b{i}");
                    env.fork(&format!("h@{}", branches[from % branches.len()]), &name);
                    branches.push(name);
                }
                Step::Write { on, id } => {
                    let b = &branches[on % branches.len()];
                    env.write(&format!("h@{b}"), &format!("UPDATE t SET v = '{b}-{i}' WHERE id = {id}"));
                }
                Step::Merge { from, into } => {
                    let (from, into) = (&branches[from % branches.len()], &branches[into % branches.len()]);
                    if from != into {
                        // Any outcome will do: what matters is what gc does to the next ones.
                        let _ = env.try_merge(&format!("h@{from}"), &format!("h@{into}"), &theirs());
                    }
                }
            }
        }
        let pairs: Vec<(String, String)> = branches
            .iter()
            .flat_map(|a| branches.iter().map(move |b| (a.clone(), b.clone())))
            .filter(|(a, b)| a != b)
            .collect();
        let before: Vec<String> = pairs
            .iter()
            .map(|(a, b)| decided(&env.try_merge(&format!("h@{a}"), &format!("h@{b}"), &dry_run())))
            .collect();
        gc_with_no_retention(&env);
        let mut reclaimed = 0;
        for ((a, b), was) in pairs.iter().zip(&before) {
            let now = env.try_merge(&format!("h@{a}"), &format!("h@{b}"), &dry_run());
            if let Err(MergeError::BaseReclaimed { .. }) = now {
                reclaimed += 1;
                continue;
            }
            prop_assert_eq!(&decided(&now), was, "merge h@{} into h@{} after gc", a, b);
        }
        eprintln!("{} branch pairs: {} decided as before gc, {reclaimed} refused: base reclaimed", pairs.len(), pairs.len() - reclaimed);
    }
}
