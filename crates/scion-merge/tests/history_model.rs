//! Merges over whole histories, against an oracle. Random sequences over 3 to 6 branches of
//! forks (from heads and checkpoints), row edits, checkpoints, rollbacks, promotes, undos,
//! restores and merges (every strategy, from heads and checkpoints), run on scion and
//! mirrored by an oracle that keeps its own graph of row-sets: it knows which versions each
//! operation makes and from which parents, computes every merge's base as the true best
//! common ancestor of its graph (all ancestors of both sides, the common ones that are no
//! other common one's ancestor), and the merged rows three-way at the cell. scion must agree
//! on every outcome, every version's parents and every branch's rows; every history ends
//! with `verify`, `integrity_check` and `foreign_key_check`.
//!
//! `SCION_HISTORY_SEED=N` replays from seed N; `SCION_HISTORY_CASES=N` sets the count.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{rows, Env};
use scion_core::format::{Locator, Parents};
use scion_core::ops::lifecycle::MoveOptions;
use scion_merge::{MergeError, MergeOptions, Outcome, Strategy};

/// A row: two value columns, so that edits to one row's different columns can merge.
type Row = (i64, i64);
type RowSet = BTreeMap<i64, Row>;

const SCHEMA: &str = "CREATE TABLE t(id INTEGER PRIMARY KEY, a INT, b INT);
    CREATE TABLE tag(id INTEGER PRIMARY KEY, t_id INT REFERENCES t(id) ON DELETE CASCADE);
    INSERT INTO t VALUES (1, 0, 0), (2, 0, 0), (3, 0, 0);";

/// A small deterministic generator: a history is its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

#[derive(Debug)]
struct Node {
    rows: RowSet,
    parents: Vec<usize>,
}

/// The oracle: versions as row-sets with parents, and what each branch and checkpoint names.
#[derive(Default)]
struct Oracle {
    nodes: Vec<Node>,
    by_root: BTreeMap<Locator, usize>,
    heads: BTreeMap<String, usize>,
    checkpoints: BTreeMap<(String, String), usize>,
}

/// What the oracle expects a merge to do.
#[derive(Debug, PartialEq)]
enum Expect {
    UpToDate,
    FastForward,
    Conflicts,
    Merged(RowSet),
    SeveralBases,
}

impl Oracle {
    fn ancestors(&self, n: usize) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        let mut todo = vec![n];
        while let Some(x) = todo.pop() {
            if out.insert(x) {
                todo.extend(&self.nodes[x].parents);
            }
        }
        out
    }

    /// The best common ancestors of `a` and `b`, the long way.
    fn bases(&self, a: usize, b: usize) -> Vec<usize> {
        let common: BTreeSet<usize> = self
            .ancestors(a)
            .intersection(&self.ancestors(b))
            .copied()
            .collect();
        common
            .iter()
            .copied()
            .filter(|c| {
                !common
                    .iter()
                    .any(|other| other != c && self.ancestors(*other).contains(c))
            })
            .collect()
    }

    fn expect_merge(&self, ours: usize, theirs: usize, strategy: Strategy) -> Expect {
        let bases = self.bases(ours, theirs);
        if bases.len() != 1 {
            assert!(bases.len() > 1, "every version descends from the import");
            return Expect::SeveralBases;
        }
        let base = bases[0];
        if base == theirs {
            return Expect::UpToDate;
        }
        if base == ours {
            return Expect::FastForward;
        }
        let (b, o, t) = (
            &self.nodes[base].rows,
            &self.nodes[ours].rows,
            &self.nodes[theirs].rows,
        );
        let ids: BTreeSet<i64> = b.keys().chain(o.keys()).chain(t.keys()).copied().collect();
        let mut out = o.clone();
        let mut conflicts = 0;
        for id in ids {
            let (bv, ov, tv) = (b.get(&id), o.get(&id), t.get(&id));
            if tv == bv || ov == tv {
                continue;
            }
            if ov == bv {
                set(&mut out, id, tv.copied());
                continue;
            }
            match (bv, ov, tv) {
                (Some(bv), Some(ov), Some(tv)) => {
                    let cell = |bc: i64, oc: i64, tc: i64| -> (i64, bool) {
                        if tc == bc || oc == tc {
                            (oc, false)
                        } else if oc == bc {
                            (tc, false)
                        } else {
                            (if strategy == Strategy::Theirs { tc } else { oc }, true)
                        }
                    };
                    let (a, ca) = cell(bv.0, ov.0, tv.0);
                    let (bb, cb) = cell(bv.1, ov.1, tv.1);
                    conflicts += ca as usize + cb as usize;
                    out.insert(id, (a, bb));
                }
                _ => {
                    // Insert/insert of different rows, update/delete, delete/update.
                    conflicts += 1;
                    if strategy == Strategy::Theirs {
                        set(&mut out, id, tv.copied());
                    }
                }
            }
        }
        if conflicts > 0 && strategy == Strategy::Fail {
            return Expect::Conflicts;
        }
        // A result equal to ours is a merge all the same (two parents): only a source that
        // is an ancestor is up to date.
        Expect::Merged(out)
    }
}

fn set(rows: &mut RowSet, id: i64, v: Option<Row>) {
    match v {
        Some(v) => rows.insert(id, v),
        None => rows.remove(&id),
    };
}

struct History<'a> {
    env: &'a Env,
    /// How many merges ended each way.
    outcomes: BTreeMap<&'static str, usize>,
    rng: Rng,
    oracle: Oracle,
    log: Vec<String>,
    names: usize,
}

fn quiet() -> MoveOptions {
    MoveOptions {
        force: true,
        no_backup: true,
        backup_ttl: None,
    }
}

impl History<'_> {
    fn target(b: &str) -> String {
        format!("h@{b}")
    }

    fn head_root(&self, b: &str) -> Locator {
        self.env
            .scion
            .engine()
            .read_ref(&Self::target(b).parse().unwrap())
            .unwrap()
            .0
            .root
    }

    fn scion_rows(&self, target: &str) -> RowSet {
        let c = self.env.open(target);
        let mut st = c.prepare("SELECT id, a, b FROM t ORDER BY id").unwrap();
        st.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn fail(&self, what: String) -> ! {
        panic!(
            "{}: {what}\nhistory:\n  {}",
            self.rng_seed(),
            self.log.join("\n  ")
        )
    }

    fn rng_seed(&self) -> String {
        self.log.first().cloned().unwrap_or_else(|| "?".to_string())
    }

    /// After an operation that makes no version: the head is a version the oracle knows.
    fn moved(&mut self, b: &str) {
        let root = self.head_root(b);
        let Some(&n) = self.oracle.by_root.get(&root) else {
            self.fail(format!("{b}'s head {root} is a version no operation made"));
        };
        self.oracle.heads.insert(b.to_string(), n);
        self.check_rows(b);
    }

    /// After a write to `b`: a new version whose parents are `parents`, or none.
    fn made(&mut self, b: &str, parents: &[usize], rows: RowSet) {
        let root = self.head_root(b);
        let old = self.oracle.heads[b];
        if self.oracle.by_root.get(&root) == Some(&old) {
            if self.oracle.nodes[old].rows != rows {
                self.fail(format!("{b}: the write made no version"));
            }
            return;
        }
        let record = self.env.scion.engine().root_record(&root).unwrap();
        let got = record
            .ancestry
            .expect("a version written now names its parents")
            .parents;
        let roots: Vec<Locator> = parents
            .iter()
            .map(|p| *self.oracle.by_root.iter().find(|(_, n)| *n == p).unwrap().0)
            .collect();
        let want = match roots[..] {
            [a] => Parents::One(a),
            [a, b] => Parents::Two(a, b),
            _ => unreachable!(),
        };
        if got != want {
            self.fail(format!("{b}: parents {got:?}, the oracle says {want:?}"));
        }
        let n = self.oracle.nodes.len();
        self.oracle.nodes.push(Node {
            rows,
            parents: parents.to_vec(),
        });
        self.oracle.by_root.insert(root, n);
        self.oracle.heads.insert(b.to_string(), n);
        self.check_rows(b);
    }

    fn check_rows(&self, b: &str) {
        let got = self.scion_rows(&Self::target(b));
        let want = &self.oracle.nodes[self.oracle.heads[b]].rows;
        if got != *want {
            self.fail(format!("{b}: rows {got:?}, the oracle says {want:?}"));
        }
    }

    fn branches(&self) -> Vec<String> {
        self.oracle.heads.keys().cloned().collect()
    }

    fn edit(&mut self) {
        let b = self.rng.pick(&self.branches()).clone();
        let mut rows = self.oracle.nodes[self.oracle.heads[&b]].rows.clone();
        let mut sql = Vec::new();
        for _ in 0..1 + self.rng.below(3) {
            let id = 1 + self.rng.below(5) as i64;
            let v = self.rng.below(3) as i64;
            match self.rng.below(4) {
                0 => {
                    sql.push(format!("DELETE FROM t WHERE id = {id}"));
                    rows.remove(&id);
                }
                1 if !rows.contains_key(&id) => {
                    sql.push(format!("INSERT INTO t VALUES ({id}, {v}, {v})"));
                    rows.insert(id, (v, v));
                }
                2 => {
                    sql.push(format!("UPDATE t SET b = {v} WHERE id = {id}"));
                    if let Some(r) = rows.get_mut(&id) {
                        r.1 = v;
                    }
                }
                _ => {
                    sql.push(format!("UPDATE t SET a = {v} WHERE id = {id}"));
                    if let Some(r) = rows.get_mut(&id) {
                        r.0 = v;
                    }
                }
            }
        }
        let sql = sql.join("; ");
        self.log.push(format!("edit {b}: {sql}"));
        self.env.write(&Self::target(&b), &sql);
        let old = self.oracle.heads[&b];
        self.made(&b, &[old], rows);
    }

    fn fork(&mut self) {
        if self.oracle.heads.len() >= 6 {
            return self.edit();
        }
        self.names += 1;
        let name = format!("b{}", self.names);
        let from = self.rng.pick(&self.branches()).clone();
        let cps: Vec<String> = self
            .oracle
            .checkpoints
            .keys()
            .filter(|(b, _)| *b == from)
            .map(|(_, c)| c.clone())
            .collect();
        let cp = (!cps.is_empty() && self.rng.below(2) == 0).then(|| self.rng.pick(&cps).clone());
        self.log.push(format!("fork {from}@{cp:?} -> {name}"));
        self.env
            .scion
            .engine()
            .fork(
                &Self::target(&from).parse().unwrap(),
                &name.parse().unwrap(),
                scion_core::ForkOptions {
                    at: cp.map(|c| c.parse().unwrap()).as_ref().cloned(),
                    ..Default::default()
                },
            )
            .unwrap();
        self.moved(&name);
    }

    fn checkpoint(&mut self) {
        let b = self.rng.pick(&self.branches()).clone();
        self.names += 1;
        let name = format!("c{}", self.names);
        self.log.push(format!("checkpoint {b}@{name}"));
        self.env
            .scion
            .checkpoint(
                &Self::target(&b).parse().unwrap(),
                &name.parse().unwrap(),
                Default::default(),
            )
            .unwrap();
        let head = self.oracle.heads[&b];
        self.oracle.checkpoints.insert((b.clone(), name), head);
        self.moved(&b);
    }

    fn merge(&mut self) {
        let names = self.branches();
        let dst = self.rng.pick(&names).clone();
        let src = self.rng.pick(&names).clone();
        if src == dst {
            return self.edit();
        }
        let cps: Vec<(String, usize)> = self
            .oracle
            .checkpoints
            .iter()
            .filter(|((b, _), _)| *b == src)
            .map(|((_, c), n)| (c.clone(), *n))
            .collect();
        let (source, theirs) = match (!cps.is_empty() && self.rng.below(2) == 0)
            .then(|| self.rng.pick(&cps).clone())
        {
            Some((c, n)) => (format!("h@{src}@{c}"), n),
            None => (Self::target(&src), self.oracle.heads[&src]),
        };
        let strategy = *self
            .rng
            .pick(&[Strategy::Fail, Strategy::Ours, Strategy::Theirs]);
        let ours = self.oracle.heads[&dst];
        let expect = self.oracle.expect_merge(ours, theirs, strategy);
        self.log.push(format!(
            "merge {source} into {dst} ({strategy:?}): expect {expect:?}"
        ));
        let opts = MergeOptions {
            strategy,
            allow_protected: true,
            ..Default::default()
        };
        let got = self.env.try_merge(&source, &Self::target(&dst), &opts);
        let kind = match &expect {
            Expect::UpToDate => "up to date",
            Expect::FastForward => "fast-forward",
            Expect::Conflicts => "conflicts",
            Expect::Merged(_) => "merged",
            Expect::SeveralBases => "several bases",
        };
        *self.outcomes.entry(kind).or_default() += 1;
        match (&expect, got) {
            (Expect::SeveralBases, Err(MergeError::SeveralBases { .. })) => self.moved(&dst),
            (Expect::UpToDate, Ok(r)) if r.outcome == Outcome::UpToDate => self.moved(&dst),
            (Expect::Conflicts, Ok(r)) if r.outcome == Outcome::Conflicts => self.moved(&dst),
            (Expect::FastForward, Ok(r)) if r.outcome == Outcome::FastForward => {
                self.moved(&dst);
                if self.oracle.heads[&dst] != theirs {
                    self.fail(format!("{dst} fast-forwarded elsewhere"));
                }
            }
            (Expect::Merged(rows), Ok(r)) if r.outcome == Outcome::Merged => {
                self.made(&dst, &[ours, theirs], rows.clone());
            }
            (_, got) => self.fail(format!("merge: expected {expect:?}, got {got:#?}")),
        }
    }

    fn rollback(&mut self) {
        let b = self.rng.pick(&self.branches()).clone();
        let mut cps: Vec<String> = self
            .oracle
            .checkpoints
            .keys()
            .filter(|(x, _)| *x == b)
            .map(|(_, c)| c.clone())
            .collect();
        cps.push(if b == "main" { "init" } else { "fork" }.to_string());
        let cp = self.rng.pick(&cps).clone();
        self.log.push(format!("rollback {b} to {cp}"));
        self.env
            .scion
            .rollback(
                &Self::target(&b).parse().unwrap(),
                &cp.parse().unwrap(),
                &quiet(),
            )
            .unwrap();
        self.moved(&b);
    }

    fn promote(&mut self) {
        let names = self.branches();
        let (src, dst) = (self.rng.pick(&names).clone(), self.rng.pick(&names).clone());
        if src == dst {
            return self.edit();
        }
        self.log.push(format!("promote {src} onto {dst}"));
        self.env
            .scion
            .promote(
                &Self::target(&src).parse().unwrap(),
                &dst.parse().unwrap(),
                &quiet(),
            )
            .unwrap();
        self.moved(&dst);
    }

    fn undo(&mut self) {
        let b = self.rng.pick(&self.branches()).clone();
        self.log.push(format!("undo {b}"));
        // A branch with nothing to undo refuses; either way its head is a known version.
        let _ = self
            .env
            .scion
            .undo(&Self::target(&b).parse().unwrap(), &quiet());
        self.moved(&b);
    }

    fn restore(&mut self) {
        let b = self.rng.pick(&self.branches()).clone();
        let history = self
            .env
            .scion
            .engine()
            .head_history(&Self::target(&b).parse().unwrap(), None)
            .unwrap();
        let Some(entry) =
            (!history.entries.is_empty()).then(|| self.rng.pick(&history.entries).seq)
        else {
            return self.edit();
        };
        self.log.push(format!("restore {b} to #{entry}"));
        let _ = self
            .env
            .scion
            .restore(&Self::target(&b).parse().unwrap(), Some(entry), &quiet());
        self.moved(&b);
    }

    fn finish(&self) {
        let report = self.env.scion.verify().unwrap();
        if !report.ok() {
            self.fail(format!("verify: {report:?}"));
        }
        for b in self.branches() {
            self.check_rows(&b);
            let c = self.env.open(&Self::target(&b));
            assert_eq!(rows(&c, "PRAGMA integrity_check"), ["ok"], "{b}");
            assert!(rows(&c, "PRAGMA foreign_key_check").is_empty(), "{b}");
        }
    }
}

fn run_history(seed: u64) -> (usize, BTreeMap<&'static str, usize>) {
    let env = Env::new();
    env.create("h", SCHEMA);
    env.scion
        .engine()
        .set_protected(&"h@main".parse().unwrap(), false)
        .unwrap();
    let mut rng = Rng(seed.max(1));
    // Two or more forks to start with: merges need somewhere to come from.
    let forks = 2 + rng.below(2);
    let steps = 14 + rng.below(16);
    let mut h = History {
        env: &env,
        outcomes: BTreeMap::new(),
        oracle: Oracle::default(),
        log: vec![format!("seed {seed}")],
        names: 0,
        rng,
    };
    let init = h.head_root("main");
    h.oracle.nodes.push(Node {
        rows: h.scion_rows("h@main"),
        parents: Vec::new(),
    });
    h.oracle.by_root.insert(init, 0);
    h.oracle.heads.insert("main".into(), 0);
    for _ in 0..forks {
        h.fork();
    }
    for _ in 0..steps {
        match h.rng.below(100) {
            0..=39 => h.edit(),
            40..=46 => h.fork(),
            47..=55 => h.checkpoint(),
            56..=81 => h.merge(),
            82..=85 => h.rollback(),
            86..=88 => h.promote(),
            89..=95 => h.undo(),
            _ => h.restore(),
        }
    }
    h.finish();
    (steps + forks, h.outcomes)
}

#[test]
fn merges_over_random_histories_agree_with_the_graph_oracle() {
    let cases: u64 = std::env::var("SCION_HISTORY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let first: u64 = std::env::var("SCION_HISTORY_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5c10_0001);
    // Two threads: the histories are independent stores.
    let run = |offset: u64| {
        let (mut steps, mut outcomes) = (0, BTreeMap::new());
        let mut seed = first + offset;
        while seed < first + cases {
            let (s, o) = run_history(seed);
            steps += s;
            for (k, n) in o {
                *outcomes.entry(k).or_insert(0) += n;
            }
            seed += 2;
        }
        (steps, outcomes)
    };
    let ((s1, mut outcomes), (s2, o2)) = std::thread::scope(|s| {
        let t = s.spawn(|| run(1));
        (run(0), t.join().unwrap())
    });
    for (k, n) in o2 {
        *outcomes.entry(k).or_insert(0) += n;
    }
    println!(
        "{cases} histories from seed {first}: {} operations; merges: {outcomes:?}",
        s1 + s2
    );
    // The histories must reach every kind of merge, or they test less than they claim.
    if cases >= 100 {
        for kind in [
            "up to date",
            "fast-forward",
            "conflicts",
            "merged",
            "several bases",
        ] {
            assert!(
                outcomes.get(kind).is_some_and(|n| *n > 0),
                "no merge was {kind}: {outcomes:?}"
            );
        }
    }
}
