//! `scion bench graph`: what finding a merge base costs on long histories. Two shapes of
//! `--versions` versions each (a linear history, and a main into which 100 branches were
//! forked, changed and merged back), on a local store and, when given one, an S3 store.
//! For bases near the heads, halfway and at the very start: root records the walk read,
//! store requests, and wall time (median, each run on a fresh handle with a cold cache).
//! The goal: requests grow with the versions between the heads and the base, not with the
//! history, so a recent base costs the same at any length.
//!
//! The histories are built as the version graph alone (root records naming their parents
//! over one page map, `Engine::seal_root_with_parents`): the walk reads nothing else.

use std::path::PathBuf;
use std::time::Instant;

use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::format::{Locator, Parents};
use scion_core::ops::graph::CommonAncestry;
use scion_core::{Scion, StoreSettings};
use serde::Serialize;

use crate::machine::{describe, Machine};
use crate::stats::Summary;
use crate::{BenchError, BenchResult, Progress};

#[derive(Debug, Clone)]
pub struct GraphBenchOptions {
    pub dir: PathBuf,
    /// Versions in each history.
    pub versions: usize,
    pub runs: usize,
    /// An S3 store (`s3://bucket/prefix`, the endpoint from the environment) to run on as
    /// well as the local one.
    pub s3: Option<String>,
}

impl GraphBenchOptions {
    pub fn full(dir: PathBuf) -> Self {
        GraphBenchOptions {
            dir,
            versions: 10_000,
            runs: 5,
            s3: None,
        }
    }
    pub fn quick(dir: PathBuf) -> Self {
        GraphBenchOptions {
            dir,
            versions: 400,
            runs: 3,
            s3: None,
        }
    }
}

/// One base search.
#[derive(Debug, Clone, Serialize)]
pub struct BaseSearch {
    pub store: String,
    pub history: String,
    /// Where the base lies, for people.
    pub base: String,
    /// Versions that are ancestors of the heads and not of the base (known from how the
    /// history was built): what any walk must read at least.
    pub versions_between: usize,
    /// Root records the walk read.
    pub versions_visited: u64,
    /// Requests that reached the store (first run, cold).
    pub requests: u64,
    pub wall: Summary,
}

#[derive(Debug, Clone, Serialize)]
pub struct GraphBenchReport {
    pub machine: Machine,
    pub versions: usize,
    pub runs: usize,
    pub searches: Vec<BaseSearch>,
    /// Why a store was not measured.
    pub skipped: Vec<String>,
}

/// A history built for the bench, and the searches to run on it: (label, ours, theirs,
/// expected base, versions between).
struct Built {
    name: &'static str,
    searches: Vec<(String, Locator, Locator, Locator, usize)>,
}

fn seal(scion: &Scion, content: &Locator, parents: Parents) -> BenchResult<Locator> {
    Ok(scion.engine().seal_root_with_parents(content, parents)?)
}

/// v1 ← v2 ← … ← vN, and three side versions: off vN-1, off the middle, off v1.
fn linear(scion: &Scion, content: Locator, n: usize, progress: Progress<'_>) -> BenchResult<Built> {
    let mut chain = vec![content];
    for i in 1..n {
        if i % 2000 == 0 {
            progress(&format!("linear history: {i} of {n} versions"));
        }
        let next = seal(scion, &content, Parents::One(chain[i - 1]))?;
        chain.push(next);
    }
    let head = chain[n - 1];
    let mut searches = Vec::new();
    for (label, at) in [("recent", n - 2), ("halfway", n / 2), ("at the start", 0)] {
        let side = seal(scion, &content, Parents::One(chain[at]))?;
        searches.push((label.to_string(), head, side, chain[at], n - 1 - at));
    }
    Ok(Built {
        name: "linear",
        searches,
    })
}

/// main, into which 100 branches were forked (each from main's head then), changed by a
/// few versions of their own, and merged back (a merge version with two parents), the
/// rest of the versions being main's own commits. Searches: a branch forked from main's
/// head (recent base), one forked before the last 50 merges, one forked at the start.
fn merges(scion: &Scion, content: Locator, n: usize, progress: Progress<'_>) -> BenchResult<Built> {
    const BRANCHES: usize = 100;
    const OWN: usize = 3;
    let per_round = (n / BRANCHES).max(OWN + 2);
    let mut main = vec![content];
    let mut made = 1;
    // How many versions existed when each version of main was made: every version made
    // later is an ancestor of the final head (every branch is merged back).
    let mut made_when = vec![1];
    let mut rounds_started = Vec::new();
    for round in 0..BRANCHES {
        if made >= n {
            break;
        }
        rounds_started.push(main.len() - 1);
        // A branch of OWN versions off main's head, then main's own commits, then the merge.
        let mut side = *main.last().unwrap();
        for _ in 0..OWN {
            side = seal(scion, &content, Parents::One(side))?;
            made += 1;
        }
        for _ in 0..per_round.saturating_sub(OWN + 1) {
            let next = seal(scion, &content, Parents::One(*main.last().unwrap()))?;
            main.push(next);
            made += 1;
            made_when.push(made);
        }
        let merge = seal(scion, &content, Parents::Two(*main.last().unwrap(), side))?;
        main.push(merge);
        made += 1;
        made_when.push(made);
        if round % 20 == 19 {
            progress(&format!(
                "merge history: {} branches merged, {made} versions",
                round + 1
            ));
        }
    }
    let head = *main.last().unwrap();
    let mut searches = Vec::new();
    let last = main.len() - 1;
    let mid = rounds_started[rounds_started.len() / 2];
    for (label, at) in [
        ("recent".to_string(), last),
        (format!("{} merges back", BRANCHES / 2), mid),
        ("at the start".to_string(), 0),
    ] {
        let side = seal(scion, &content, Parents::One(main[at]))?;
        searches.push((label, head, side, main[at], made - made_when[at]));
    }
    Ok(Built {
        name: "100 branches merged into main",
        searches,
    })
}

fn attach(spec: &StoreSpec, init: bool) -> BenchResult<scion_core::attach::Attached> {
    let options = AttachOptions {
        init: init.then(StoreSettings::default),
        ..Default::default()
    };
    Ok(Scion::attach(spec, options)?)
}

fn measure_store(
    label: &str,
    spec: &StoreSpec,
    cache: Option<&PathBuf>,
    opts: &GraphBenchOptions,
    progress: Progress<'_>,
) -> BenchResult<Vec<BaseSearch>> {
    let first = attach(spec, true)?.scion;
    first.engine().create(&"g".parse()?, None)?;
    let content = first.engine().read_ref(&"g".parse()?)?.0.root;
    let built = [
        linear(&first, content, opts.versions, progress)?,
        merges(&first, content, opts.versions, progress)?,
    ];
    drop(first);
    let mut out = Vec::new();
    for b in &built {
        for (base_label, ours, theirs, base, between) in &b.searches {
            progress(&format!("{label}: {}, base {base_label}", b.name));
            let mut samples = Vec::new();
            let (mut requests, mut visited) = (0, 0);
            for run in 0..opts.runs {
                if let Some(c) = cache {
                    // A cold cache: every root read goes to the store.
                    let _ = std::fs::remove_dir_all(c.join(".segments"));
                }
                let attached = attach(spec, false)?;
                let before = attached.counter.counts().requests();
                let t = Instant::now();
                let (found, stats) = attached.scion.engine().common_ancestry(ours, theirs)?;
                samples.push(t.elapsed());
                if found != CommonAncestry::Base(*base) {
                    return Err(BenchError::Other(format!(
                        "{}: the walk found {found:?}, not the base it was built with",
                        b.name
                    )));
                }
                if run == 0 {
                    requests = attached.counter.counts().requests() - before;
                    visited = stats.versions_visited;
                }
            }
            out.push(BaseSearch {
                store: label.to_string(),
                history: b.name.to_string(),
                base: base_label.clone(),
                versions_between: *between,
                versions_visited: visited,
                requests,
                wall: Summary::of(&samples),
            });
        }
    }
    Ok(out)
}

pub fn run(opts: &GraphBenchOptions, progress: Progress<'_>) -> BenchResult<GraphBenchReport> {
    std::fs::create_dir_all(&opts.dir)?;
    let machine = describe(&opts.dir);
    let mut searches = Vec::new();
    let mut skipped = Vec::new();
    let local = opts.dir.join("store");
    let _ = std::fs::remove_dir_all(&local);
    searches.extend(measure_store(
        "local",
        &StoreSpec::parse(&local.display().to_string())?,
        None,
        opts,
        progress,
    )?);
    match &opts.s3 {
        Some(s3) => {
            let cache = opts.dir.join("s3-cache");
            // The bench's own cache directory, emptied before each run.
            std::env::set_var("SCION_CHECKOUTS", &cache);
            let spec = StoreSpec::parse(s3)?;
            searches.extend(measure_store("s3", &spec, Some(&cache), opts, progress)?);
        }
        None => skipped.push("S3: not measured (pass --s3 s3://bucket/prefix)".to_string()),
    }
    Ok(GraphBenchReport {
        machine,
        versions: opts.versions,
        runs: opts.runs,
        searches,
        skipped,
    })
}

impl GraphBenchReport {
    pub fn render(&self) -> String {
        let mut out = format!(
            "{}\nbase finding on histories of {} versions; median of {} runs, each on a fresh handle with a cold cache\n\n",
            self.machine.line(),
            self.versions,
            self.runs
        );
        out += &format!(
            "{:<6} {:<30} {:<16} {:>8} {:>8} {:>9} {:>10}\n",
            "store", "history", "base", "between", "visited", "requests", "wall"
        );
        for s in &self.searches {
            out += &format!(
                "{:<6} {:<30} {:<16} {:>8} {:>8} {:>9} {:>10}\n",
                s.store,
                s.history,
                s.base,
                s.versions_between,
                s.versions_visited,
                s.requests,
                format!("{:.2} ms", s.wall.median_ms)
            );
        }
        for s in &self.skipped {
            out += &format!("{s}\n");
        }
        out
    }
}
