//! Model-based property test: random sequences of fork, SQL writes (inserts, updates,
//! deletes, schema changes, VACUUM, growth and shrinkage), checkpoint and export, some
//! with extra connections left open, run against scion and against plain SQLite files
//! copied with `cp`. Every branch, checkpoint and checkout must read back identically.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;

use common::*;
use proptest::prelude::*;
use rusqlite::Connection;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::{BranchRef, DbName};

#[derive(Debug, Clone)]
enum Write {
    Insert { n: u8, len: u16, seed: u32 },
    Update { m: u8, r: u8, seed: u32 },
    Delete { m: u8, r: u8 },
    AddTable { t: u8 },
    DropTable { t: u8 },
    AddIndex,
    Vacuum,
    Grow { kib: u16, seed: u32 },
    Shrink,
}

#[derive(Debug, Clone)]
enum Op {
    Fork {
        src: usize,
        at: Option<usize>,
    },
    Write {
        branch: usize,
        w: Write,
    },
    Checkpoint {
        branch: usize,
    },
    HoldReader {
        branch: usize,
    },
    CloseConnections,
    Rollback {
        branch: usize,
        to: usize,
    },
    Promote {
        src: usize,
        onto: usize,
    },
    Destroy {
        branch: usize,
    },
    /// The branch's TTL runs out (its activity clock is moved into the past).
    Expire {
        branch: usize,
    },
    Gc,
    Verify,
}

fn write_strategy() -> impl Strategy<Value = Write> {
    prop_oneof![
        4 => (1u8..40, 1u16..600, any::<u32>()).prop_map(|(n, len, seed)| Write::Insert { n, len, seed }),
        3 => (1u8..7, 0u8..7, any::<u32>()).prop_map(|(m, r, seed)| Write::Update { m, r, seed }),
        2 => (1u8..7, 0u8..7).prop_map(|(m, r)| Write::Delete { m, r }),
        1 => (0u8..3).prop_map(|t| Write::AddTable { t }),
        1 => (0u8..3).prop_map(|t| Write::DropTable { t }),
        1 => Just(Write::AddIndex),
        1 => Just(Write::Vacuum),
        1 => (16u16..400, any::<u32>()).prop_map(|(kib, seed)| Write::Grow { kib, seed }),
        1 => Just(Write::Shrink),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0usize..8, proptest::option::of(0usize..8)).prop_map(|(src, at)| Op::Fork { src, at }),
        8 => (0usize..8, write_strategy()).prop_map(|(branch, w)| Op::Write { branch, w }),
        3 => (0usize..8).prop_map(|branch| Op::Checkpoint { branch }),
        1 => (0usize..8).prop_map(|branch| Op::HoldReader { branch }),
        1 => Just(Op::CloseConnections),
        2 => (0usize..8, 0usize..8).prop_map(|(branch, to)| Op::Rollback { branch, to }),
        1 => (0usize..8, 0usize..8).prop_map(|(src, onto)| Op::Promote { src, onto }),
        1 => (0usize..8).prop_map(|branch| Op::Destroy { branch }),
        1 => (0usize..8).prop_map(|branch| Op::Expire { branch }),
        1 => Just(Op::Gc),
        1 => Just(Op::Verify),
    ]
}

fn text(seed: u32, i: usize, len: usize) -> String {
    let base = format!("{seed:08x}-{i}-");
    base.repeat(len / base.len() + 1)[..len].to_string()
}

fn apply(c: &Connection, w: &Write) {
    match w {
        Write::Insert { n, len, seed } => {
            for i in 0..*n as usize {
                c.execute(
                    "INSERT INTO items(name, price) VALUES (?1, ?2)",
                    (
                        text(*seed, i, *len as usize),
                        (*seed as f64) / (i as f64 + 1.0),
                    ),
                )
                .unwrap();
            }
        }
        Write::Update { m, r, seed } => {
            c.execute(
                "UPDATE items SET name = ?1 || name, price = price + 1 WHERE id % ?2 = ?3",
                (format!("u{seed}"), *m as i64, *r as i64),
            )
            .unwrap();
        }
        Write::Delete { m, r } => {
            c.execute(
                "DELETE FROM items WHERE id % ?1 = ?2",
                (*m as i64, *r as i64),
            )
            .unwrap();
        }
        Write::AddTable { t } => {
            c.execute_batch(&format!(
                "CREATE TABLE IF NOT EXISTS extra{t}(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;
                 INSERT OR REPLACE INTO extra{t} VALUES ('a{t}', zeroblob(100)), ('b{t}', x'0102');"
            ))
            .unwrap();
        }
        Write::DropTable { t } => c
            .execute_batch(&format!("DROP TABLE IF EXISTS extra{t};"))
            .unwrap(),
        Write::AddIndex => c
            .execute_batch("CREATE INDEX IF NOT EXISTS items_name ON items(name);")
            .unwrap(),
        Write::Vacuum => c.execute_batch("VACUUM;").unwrap(),
        Write::Grow { kib, seed } => {
            let blob: Vec<u8> = (0..*kib as usize * 1024)
                .map(|i| (i as u32).wrapping_mul(*seed | 1).rotate_left(7) as u8)
                .collect();
            c.execute("INSERT INTO items(name, price) VALUES ('blob', ?1)", [blob])
                .unwrap();
        }
        Write::Shrink => c
            .execute_batch("DELETE FROM items WHERE name = 'blob' OR id % 3 = 0; VACUUM;")
            .unwrap(),
    }
}

struct ModelBranch {
    scion: BranchRef,
    committed: PathBuf,
    working: PathBuf,
    fork_point: PathBuf,
    checkpoints: Vec<(String, PathBuf)>,
    checked_out: bool,
    alive: bool,
    /// Its TTL ran out: the next gc reaps it.
    expired: bool,
}

/// Mirror scion's safety fork `<branch>-<suffix>` (one rolling slot) in the model.
/// Returns the index of a slot that was replaced (its old checkout is now stale).
fn keep_safety(
    branches: &mut Vec<ModelBranch>,
    report: &scion_core::ops::lifecycle::MoveReport,
    old: &PathBuf,
    new_model: &dyn Fn(&str, &PathBuf) -> ModelBranch,
) -> Option<usize> {
    let fork = report
        .safety_fork
        .as_deref()
        .expect("a safety fork was made");
    let name = fork.split_once('@').expect("db@branch").1.to_string();
    match branches
        .iter()
        .position(|b| b.scion.branch.as_str() == name)
    {
        Some(j) => {
            let b = &mut branches[j];
            cp(old, &b.committed);
            cp(old, &b.working);
            cp(old, &b.fork_point);
            b.alive = true;
            b.expired = false;
            b.checkpoints.clear();
            Some(j)
        }
        None => {
            let snapshot = old.with_extension(format!("{}.db", super_unique()));
            cp(old, &snapshot);
            branches.push(new_model(&name, &snapshot));
            None
        }
    }
}

/// A replaced safety slot's checkout no longer matches its head: a user would discard it.
fn refresh_replaced(
    e: &Env,
    branches: &mut [ModelBranch],
    j: usize,
    conns: &mut HashMap<usize, Connection>,
    readers: &mut Vec<(usize, Connection)>,
) {
    conns.remove(&j);
    readers.retain(|(b, _)| *b != j);
    if branches[j].checked_out {
        e.scion.checkout(&branches[j].scion, true).unwrap();
    }
}

fn super_unique() -> u64 {
    common::unique()
}

fn cp(from: &PathBuf, to: &PathBuf) {
    std::fs::copy(from, to).unwrap();
}

fn run(ops: Vec<Op>) {
    run_in(env(), ops)
}

fn run_in(e: Env, ops: Vec<Op>) {
    let seed_file = e.path("seed.db");
    seed(&seed_file, 60);
    exec(&seed_file, "PRAGMA journal_mode=DELETE;");
    e.scion
        .engine()
        .create(&DbName::new("m").unwrap(), Some(&seed_file))
        .unwrap();
    let new_model = |name: &str, from: &PathBuf| {
        let committed = e.path(&format!("model-{name}-committed.db"));
        let working = e.path(&format!("model-{name}-working.db"));
        let fork_point = e.path(&format!("model-{name}-fork.db"));
        cp(from, &committed);
        cp(from, &working);
        cp(from, &fork_point);
        ModelBranch {
            scion: format!("m@{name}").parse().unwrap(),
            committed,
            working,
            fork_point,
            checkpoints: Vec::new(),
            checked_out: false,
            alive: true,
            expired: false,
        }
    };
    let mut branches = vec![new_model("main", &seed_file)];
    let mut conns: HashMap<usize, Connection> = HashMap::new();
    let mut readers: Vec<(usize, Connection)> = Vec::new();
    let mut counter = 0;

    let verify = |branches: &Vec<ModelBranch>, conns: &HashMap<usize, Connection>| {
        for (i, b) in branches.iter().enumerate() {
            if !b.alive {
                assert!(
                    e.scion.engine().read_ref(&b.scion).is_err(),
                    "{} was destroyed",
                    b.scion
                );
                continue;
            }
            let head = e.dump_target(&e.scion, &b.scion.to_string());
            same(&head, &dump(&b.committed), &format!("head of {}", b.scion));
            let fork = e.dump_target(&e.scion, &format!("{}@fork", b.scion));
            same(&fork, &dump(&b.fork_point), &format!("fork of {}", b.scion));
            for (name, file) in &b.checkpoints {
                let got = e.dump_target(&e.scion, &format!("{}@{name}", b.scion));
                same(&got, &dump(file), &format!("{}@{name}", b.scion));
            }
            if let Some(c) = conns.get(&i) {
                same(
                    &dump_conn(c),
                    &dump(&b.working),
                    &format!("checkout of {}", b.scion),
                );
            }
        }
    };

    for op in ops {
        match op {
            Op::Fork { src, at } => {
                if branches.iter().filter(|b| b.alive).count() >= 6 {
                    continue;
                }
                let src = src % branches.len();
                if !branches[src].alive {
                    continue;
                }
                let at = at.and_then(|a| {
                    let cps = &branches[src].checkpoints;
                    (!cps.is_empty()).then(|| cps[a % cps.len()].clone())
                });
                counter += 1;
                let name = format!("b{counter}");
                let at_name = at.as_ref().map(|(n, _)| n.parse().unwrap());
                e.scion
                    .engine()
                    .fork(
                        &branches[src].scion,
                        &name.parse().unwrap(),
                        scion_core::ForkOptions {
                            at: at_name.as_ref().cloned(),
                            ..Default::default()
                        },
                    )
                    .unwrap();
                let from = at
                    .map(|(_, f)| f)
                    .unwrap_or_else(|| branches[src].committed.clone());
                branches.push(new_model(&name, &from));
            }
            Op::Write { branch, w } => {
                let i = branch % branches.len();
                if !branches[i].alive {
                    continue;
                }
                if !branches[i].checked_out {
                    let path = e.scion.checkout(&branches[i].scion, false).unwrap().path;
                    branches[i].checked_out = true;
                    conns.insert(i, Connection::open(path).unwrap());
                }
                let scion_path = e.scion.checkout_path(&branches[i].scion);
                conns
                    .entry(i)
                    .or_insert_with(|| Connection::open(scion_path).unwrap());
                if matches!(w, Write::Vacuum | Write::Shrink) {
                    readers.retain(|(b, _)| *b != i);
                }
                apply(&conns[&i], &w);
                apply(&Connection::open(&branches[i].working).unwrap(), &w);
            }
            Op::Checkpoint { branch } => {
                let i = branch % branches.len();
                if !branches[i].alive {
                    continue;
                }
                counter += 1;
                let name = format!("c{counter}");
                let report = e
                    .scion
                    .checkpoint(
                        &branches[i].scion,
                        &name.parse().unwrap(),
                        Default::default(),
                    )
                    .unwrap();
                let b = &mut branches[i];
                if report.committed {
                    // A commit restarts the TTL clock.
                    b.expired = false;
                }
                if b.checked_out {
                    cp(&b.working, &b.committed);
                }
                let snap = e.path(&format!("model-{name}.db"));
                cp(&b.committed, &snap);
                b.checkpoints.push((name, snap));
            }
            Op::HoldReader { branch } => {
                let i = branch % branches.len();
                if branches[i].alive && branches[i].checked_out {
                    let c = Connection::open(e.scion.checkout_path(&branches[i].scion)).unwrap();
                    c.execute_batch("BEGIN; SELECT count(*) FROM items;")
                        .unwrap();
                    readers.push((i, c));
                }
            }
            Op::CloseConnections => {
                readers.clear();
                conns.clear();
            }
            Op::Rollback { branch, to } => {
                let i = branch % branches.len();
                if !branches[i].alive || branches[i].checkpoints.is_empty() {
                    continue;
                }
                let (name, file) =
                    branches[i].checkpoints[to % branches[i].checkpoints.len()].clone();
                conns.remove(&i);
                readers.retain(|(b, _)| *b != i);
                let force = MoveOptions {
                    force: true,
                    ..Default::default()
                };
                let report = e
                    .scion
                    .rollback(&branches[i].scion, &name.parse().unwrap(), &force)
                    .unwrap();
                branches[i].expired = false;
                let old = branches[i].committed.clone();
                if let Some(j) = keep_safety(&mut branches, &report, &old, &new_model) {
                    refresh_replaced(&e, &mut branches, j, &mut conns, &mut readers);
                }
                let b = &mut branches[i];
                cp(&file, &b.committed);
                cp(&file, &b.working);
            }
            Op::Promote { src, onto } => {
                let (s_i, o_i) = (src % branches.len(), onto % branches.len());
                if s_i == o_i || !branches[s_i].alive || !branches[o_i].alive {
                    continue;
                }
                conns.remove(&o_i);
                readers.retain(|(b, _)| *b != o_i);
                let force = MoveOptions {
                    force: true,
                    ..Default::default()
                };
                let report = e
                    .scion
                    .promote(&branches[s_i].scion, &branches[o_i].scion.branch, &force)
                    .unwrap();
                // The source's state, before its ref might be the safety slot replaced below.
                let from = e.path(&format!("promote-{}.db", common::unique()));
                cp(&branches[s_i].committed, &from);
                branches[o_i].expired = false;
                let old = branches[o_i].committed.clone();
                if let Some(j) = keep_safety(&mut branches, &report, &old, &new_model) {
                    refresh_replaced(&e, &mut branches, j, &mut conns, &mut readers);
                }

                cp(&from, &branches[o_i].committed);
                cp(&from, &branches[o_i].working);
            }
            Op::Destroy { branch } => {
                let i = branch % branches.len();
                if i == 0 || !branches[i].alive {
                    continue;
                }
                conns.remove(&i);
                readers.retain(|(b, _)| *b != i);
                e.scion.destroy(&branches[i].scion, true).unwrap();
                branches[i].alive = false;
                branches[i].checked_out = false;
                branches[i].checkpoints.clear();
            }
            Op::Expire { branch } => {
                let i = branch % branches.len();
                if i == 0 || !branches[i].alive {
                    continue;
                }
                // Time passing, simulated: a 1 s TTL counted from the epoch.
                let b = &branches[i].scion;
                let (mut r, etag) = e.scion.engine().read_ref(b).unwrap();
                r.ttl_secs = Some(1);
                r.touched_at =
                    scion_core::clock::StoreTime::from_store_clock(std::time::UNIX_EPOCH);
                e.scion
                    .engine()
                    .backend()
                    .put(
                        &format!("refs/{}/{}", b.db, b.branch),
                        &r.encode(),
                        scion_store::PutMode::Update(etag),
                    )
                    .unwrap();
                branches[i].expired = true;
            }
            Op::Gc => {
                let report = e.scion.gc(std::time::Duration::ZERO, true).unwrap();
                for b in branches.iter_mut().filter(|b| b.alive && b.expired) {
                    if report.kept_in_use.contains(&b.scion.to_string()) {
                        // Its checkout is open or holds uncheckpointed writes: kept, and
                        // the model takes its TTL away so it stays.
                        assert!(b.checked_out, "{} kept without a checkout", b.scion);
                        e.scion.engine().touch(&b.scion, Some(None)).unwrap();
                        b.expired = false;
                        continue;
                    }
                    assert!(
                        report.reaped.contains(&b.scion.to_string()),
                        "{} expired but was not reaped",
                        b.scion
                    );
                    b.alive = false;
                    b.checked_out = false;
                    b.checkpoints.clear();
                }
                let dead: Vec<usize> = (0..branches.len())
                    .filter(|i| !branches[*i].alive)
                    .collect();
                conns.retain(|i, _| !dead.contains(i));
                readers.retain(|(i, _)| !dead.contains(i));
                verify(&branches, &conns);
            }
            Op::Verify => verify(&branches, &conns),
        }
    }
    verify(&branches, &conns);
    readers.clear();
    conns.clear();
    // After every connection closed (SQLite folds the WAL into the file), each checkout
    // still matches its model, and the clean ones are recognised as clean.
    for b in &branches {
        if b.alive && b.checked_out {
            assert_eq!(dump(&e.scion.checkout_path(&b.scion)), dump(&b.working));
        }
    }
    let report = e.scion.verify().unwrap();
    assert!(
        report.ok(),
        "verify after the sequence: {:?}",
        report.problems
    );
}

/// Equal dumps, or a short report of the first difference (dumps can be long).
fn same(got: &str, want: &str, what: &str) {
    if got == want {
        return;
    }
    let (g, w): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
    let i = g
        .iter()
        .zip(&w)
        .position(|(a, b)| a != b)
        .unwrap_or(g.len().min(w.len()));
    panic!(
        "{what}: dumps differ at line {i} (scion {} lines, model {} lines):\n  scion: {:?}\n  model: {:?}",
        g.len(),
        w.len(),
        g.get(i),
        w.get(i)
    );
}

#[test]
fn expire_then_commit_keeps_the_branch() {
    run(vec![
        Op::Fork { src: 0, at: None },
        Op::Fork { src: 0, at: None },
        Op::Fork { src: 0, at: None },
        Op::Expire { branch: 2 },
        Op::Write {
            branch: 2,
            w: Write::Insert {
                n: 1,
                len: 1,
                seed: 0,
            },
        },
        Op::Checkpoint { branch: 6 },
        Op::Gc,
    ]);
}

#[test]
fn fork_then_destroy() {
    run(vec![
        Op::Fork { src: 0, at: None },
        Op::Destroy { branch: 1 },
    ]);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("SCION_MODEL_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(40),
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    })]

    #[test]
    fn scion_matches_plain_sqlite_files(ops in proptest::collection::vec(op_strategy(), 1..40)) {
        run(ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("SCION_MODEL_S3_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(6),
        max_shrink_iters: 50,
        ..ProptestConfig::default()
    })]

    /// The same model, once against the S3 backend (a shorter run).
    #[test]
    fn scion_on_s3_matches_plain_sqlite_files(ops in proptest::collection::vec(op_strategy(), 1..25)) {
        run_in(env_s3(), ops);
    }
}
