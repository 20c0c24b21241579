//! `scion bench pytest`: a pytest suite as an eval harness runs it, on the pytest plugin's
//! `scion_db` fixture (as installed and documented: a connection through the scion VFS by
//! default) beside a fixture that copies the seed file for every test.
//!
//! Each suite is `--tests` tests of one shape on a seed of `--sizes` MiB, run as its own
//! pytest process (a warm-up run, then `--runs` timed runs, the two fixtures alternating so
//! the machine's state falls on both alike). The scion suites share one lasting store, as
//! a developer rerunning a suite has: the seed is imported once, in the warm-up. Shapes:
//! `light` (each test inserts a row, commits, and reads one by key: what most tests of an
//! application do) and `scan` (each test reads a whole table: the worst case for a fork
//! read through the VFS, whose pages are decoded per connection).
//!
//! Figures: the suite's test time (the sum over its tests of pytest's setup + call +
//! teardown durations: what the fixture and the test cost, without pytest's start-up) and
//! the pytest process's wall time; then the lasting store's size after every run and one
//! `scion gc`, against the seed's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::datagen::orders_db;
use crate::machine::{describe, Machine};
use crate::stats::Summary;
use crate::{BenchError, BenchResult, Progress};

#[derive(Debug, Clone)]
pub struct PytestBenchOptions {
    pub dir: PathBuf,
    /// A Python with pytest and the scion package installed.
    pub python: PathBuf,
    /// The scion binary (for `scion gc` on the suites' store).
    pub scion: PathBuf,
    pub seed_mib: u64,
    pub tests: usize,
    pub runs: usize,
}

impl PytestBenchOptions {
    pub fn full(dir: PathBuf, python: PathBuf, scion: PathBuf) -> Self {
        PytestBenchOptions {
            dir,
            python,
            scion,
            seed_mib: 50,
            tests: 20,
            runs: 5,
        }
    }
    pub fn quick(dir: PathBuf, python: PathBuf, scion: PathBuf) -> Self {
        PytestBenchOptions {
            seed_mib: 2,
            tests: 4,
            runs: 2,
            ..Self::full(dir, python, scion)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    Light,
    Scan,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Light => "light",
            Shape::Scan => "scan",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fixture {
    /// The plugin's `scion_db`.
    ScionDb,
    /// `shutil.copyfile` of the seed into the test's `tmp_path`, then `sqlite3.connect`.
    CopyFile,
}

impl Fixture {
    fn name(self) -> &'static str {
        match self {
            Fixture::ScionDb => "scion",
            Fixture::CopyFile => "copy",
        }
    }
    fn label(self) -> &'static str {
        match self {
            Fixture::ScionDb => "scion_db (plugin, VFS)",
            Fixture::CopyFile => "fixture copying the file",
        }
    }
}

/// One suite, timed over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteRow {
    pub shape: Shape,
    pub fixture: Fixture,
    /// Sum over the suite's tests of setup + call + teardown.
    pub tests_time: Summary,
    /// The pytest process, start to exit.
    pub wall: Summary,
    /// Medians per test, in ms.
    pub setup_ms: f64,
    pub call_ms: f64,
    pub teardown_ms: f64,
}

/// The scion suites' lasting store after every run.
#[derive(Debug, Clone, Serialize)]
pub struct StoreAfter {
    /// Test forks made and destroyed in it.
    pub tests_run: usize,
    pub seed_bytes: u64,
    /// Bytes of the store's objects (its directory but the checkouts) before and after
    /// one `scion gc`.
    pub bytes_before_gc: u64,
    pub bytes_after_gc: u64,
    /// Bytes of checkout files kept in the store's directory (the seed's, which the
    /// plugin keeps checked out as the source of file-mode tests).
    pub checkout_bytes: u64,
    /// What that gc reported: bytes still reachable, and bytes only waiting out its grace
    /// period (in case a writer elsewhere still reads them).
    pub live_bytes: u64,
    pub waiting_bytes: u64,
    pub grace_secs: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PytestBenchReport {
    pub machine: Machine,
    pub seed_mib: u64,
    pub seed_bytes: u64,
    pub tests: usize,
    pub runs: usize,
    pub suites: Vec<SuiteRow>,
    pub store: StoreAfter,
}

/// The suite pytest runs: the fixture and shape come from the environment.
const TESTS: &str = r#"
import os, shutil, sqlite3
import pytest

N = int(os.environ["BENCH_TESTS"])
SHAPE = os.environ["BENCH_SHAPE"]
FIXTURE = os.environ["BENCH_FIXTURE"]


def body(conn, i):
    if SHAPE == "light":
        conn.execute(
            "INSERT INTO orders(customer, email, amount, status, note) VALUES (?, ?, ?, 'new', 'bench')",
            (f"test-{i}", f"test{i}@example.com", i),
        )
        conn.commit()
        assert conn.execute("SELECT amount FROM orders WHERE id = ?", (1 + i,)).fetchone() is not None
    else:
        (n, _) = conn.execute("SELECT count(*), sum(amount) FROM orders WHERE status = 'paid'").fetchone()
        assert n > 0


@pytest.fixture
def copied_db(tmp_path):
    path = tmp_path / "test.db"
    shutil.copyfile(os.environ["BENCH_SEED"], path)
    conn = sqlite3.connect(str(path))
    yield conn
    conn.close()
    os.remove(path)


if FIXTURE == "scion":

    @pytest.mark.parametrize("i", range(N))
    def test_db(scion_db, i):
        body(scion_db.connection, i)

else:

    @pytest.mark.parametrize("i", range(N))
    def test_db(copied_db, i):
        body(copied_db, i)
"#;

const PHASES: [&str; 3] = ["setup", "call", "teardown"];

/// One pytest run's figures.
struct RunTimes {
    wall: Duration,
    tests: Duration,
    /// Per phase, every test's duration.
    phases: [Vec<Duration>; 3],
}

pub fn run(opts: &PytestBenchOptions, progress: Progress<'_>) -> BenchResult<PytestBenchReport> {
    let machine = describe(&opts.dir);
    let dir = std::path::absolute(&opts.dir)?;
    let suite = dir.join("suite");
    std::fs::create_dir_all(&suite)?;
    std::fs::write(suite.join("test_bench.py"), TESTS)?;
    std::fs::write(suite.join("conftest.py"), crate::isolation_python::CONFTEST)?;
    let seed = dir.join("seed.db");
    progress(&format!("seeding a {} MiB database", opts.seed_mib));
    let seed_bytes = orders_db(&seed, opts.seed_mib, 0x5eed)?;
    let store = dir.join("store");
    let python = std::path::absolute(&opts.python)?;
    let pytest = |fixture: Fixture, shape: Shape, out: &Path| -> BenchResult<RunTimes> {
        let _ = std::fs::remove_file(out);
        let mut cmd = Command::new(&python);
        cmd.args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
        ])
        .arg("--basetemp")
        .arg(dir.join("tmp"))
        .args(["--scion-seed"])
        .arg(&seed)
        .arg("--scion-store")
        .arg(&store)
        .arg("test_bench.py")
        .current_dir(&suite)
        .env("BENCH_TESTS", opts.tests.to_string())
        .env("BENCH_SHAPE", shape.name())
        .env("BENCH_FIXTURE", fixture.name())
        .env("BENCH_SEED", &seed)
        .env("BENCH_OUT", out);
        let start = Instant::now();
        let done = cmd.output()?;
        let wall = start.elapsed();
        if !done.status.success() {
            return Err(BenchError::Other(format!(
                "pytest ({} fixture, {} tests) failed:\n{}{}",
                fixture.name(),
                shape.name(),
                String::from_utf8_lossy(&done.stdout),
                String::from_utf8_lossy(&done.stderr)
            )));
        }
        read_phases(&std::fs::read_to_string(out)?, opts.tests, wall)
    };
    let out = dir.join("phases.jsonl");
    let mut suites = Vec::new();
    let mut tests_run = 0;
    for shape in [Shape::Light, Shape::Scan] {
        let fixtures = [Fixture::ScionDb, Fixture::CopyFile];
        let mut runs: Vec<Vec<RunTimes>> = vec![Vec::new(), Vec::new()];
        for round in 0..=opts.runs {
            progress(&format!(
                "{} tests: {}",
                shape.name(),
                if round == 0 {
                    "warm-up".to_string()
                } else {
                    format!("run {round} of {}", opts.runs)
                }
            ));
            // Alternate which goes first, so neither always follows the other's writeback.
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                crate::stats::settle_disk();
                let times = pytest(fixtures[i], shape, &out)?;
                if fixtures[i] == Fixture::ScionDb {
                    tests_run += opts.tests;
                }
                if round > 0 {
                    runs[i].push(times);
                }
            }
        }
        for (fixture, times) in fixtures.into_iter().zip(runs) {
            suites.push(row(shape, fixture, &times));
        }
    }
    progress("scion gc on the suites' store");
    // The store's own objects, not the checkout files kept in its directory.
    let objects = |store: &Path| dir_bytes(store, Some("checkouts"));
    let bytes_before_gc = objects(&store)?;
    let gc = Command::new(&opts.scion)
        .arg("--store")
        .arg(&store)
        .args(["--json", "gc"])
        .output()?;
    if !gc.status.success() {
        return Err(BenchError::Other(format!(
            "scion gc failed: {}",
            String::from_utf8_lossy(&gc.stderr)
        )));
    }
    let report: serde_json::Value =
        serde_json::from_slice(&gc.stdout).map_err(|e| BenchError::Other(e.to_string()))?;
    let field = |k: &str| report[k].as_u64().unwrap_or(0);
    let store_after = StoreAfter {
        tests_run,
        seed_bytes,
        bytes_before_gc,
        bytes_after_gc: objects(&store)?,
        checkout_bytes: dir_bytes(&store.join("checkouts"), None)?,
        live_bytes: field("live_bytes"),
        waiting_bytes: field("waiting_bytes"),
        grace_secs: field("grace_secs"),
    };
    Ok(PytestBenchReport {
        machine,
        seed_mib: opts.seed_mib,
        seed_bytes,
        tests: opts.tests,
        runs: opts.runs,
        suites,
        store: store_after,
    })
}

/// The phases of one run's `tests` tests.
fn read_phases(text: &str, tests: usize, wall: Duration) -> BenchResult<RunTimes> {
    let mut phases: [Vec<Duration>; 3] = Default::default();
    let mut total = Duration::ZERO;
    let mut passed = 0;
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| BenchError::Other(e.to_string()))?;
        let when = v["when"].as_str().unwrap_or_default();
        let Some(i) = PHASES.iter().position(|p| *p == when) else {
            continue;
        };
        let d = Duration::from_secs_f64(v["s"].as_f64().unwrap_or(0.0));
        phases[i].push(d);
        total += d;
        if when == "call" && v["ok"].as_bool() == Some(true) {
            passed += 1;
        }
    }
    if passed != tests {
        return Err(BenchError::Other(format!(
            "{passed} of {tests} tests passed"
        )));
    }
    Ok(RunTimes {
        wall,
        tests: total,
        phases,
    })
}

fn row(shape: Shape, fixture: Fixture, runs: &[RunTimes]) -> SuiteRow {
    let phase = |i: usize| {
        let all: Vec<Duration> = runs.iter().flat_map(|r| r.phases[i].clone()).collect();
        Summary::of(&all).median_ms
    };
    SuiteRow {
        shape,
        fixture,
        tests_time: Summary::of(&runs.iter().map(|r| r.tests).collect::<Vec<_>>()),
        wall: Summary::of(&runs.iter().map(|r| r.wall).collect::<Vec<_>>()),
        setup_ms: phase(0),
        call_ms: phase(1),
        teardown_ms: phase(2),
    }
}

/// Bytes of every file under `dir`, but under its top-level directory `skip`.
fn dir_bytes(dir: &Path, skip: Option<&str>) -> BenchResult<u64> {
    let mut total = 0;
    if !dir.exists() {
        return Ok(0);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() && d == dir && skip.is_some_and(|s| entry.file_name() == s) {
                continue;
            }
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

impl PytestBenchReport {
    /// scion's suite against the copying one, for a shape: (test time, wall) ratios.
    pub(crate) fn ratios(&self, shape: Shape) -> Option<(f64, f64)> {
        let find = |f| {
            self.suites
                .iter()
                .find(|s| s.shape == shape && s.fixture == f)
        };
        let (s, c) = (find(Fixture::ScionDb)?, find(Fixture::CopyFile)?);
        Some((
            s.tests_time.median_ms / c.tests_time.median_ms,
            s.wall.median_ms / c.wall.median_ms,
        ))
    }

    pub fn render(&self) -> String {
        let mut out = format!(
            "{}\n{} tests per suite on a {} MiB seed ({} B); median of {} runs after a warm-up\n\n",
            self.machine.line(),
            self.tests,
            self.seed_mib,
            self.seed_bytes,
            self.runs
        );
        out += &format!(
            "{:<6} {:<26} {:>12} {:>18} {:>11}  per test (medians, ms)\n",
            "shape", "fixture", "tests ms", "min-max", "pytest ms"
        );
        for s in &self.suites {
            out += &format!(
                "{:<6} {:<26} {:>12.1} {:>18} {:>11.1}  setup {:.2}, call {:.2}, teardown {:.2}\n",
                s.shape.name(),
                s.fixture.label(),
                s.tests_time.median_ms,
                format!("{:.1}-{:.1}", s.tests_time.min_ms, s.tests_time.max_ms),
                s.wall.median_ms,
                s.setup_ms,
                s.call_ms,
                s.teardown_ms
            );
        }
        out += "\n";
        for shape in [Shape::Light, Shape::Scan] {
            if let Some((tests, wall)) = self.ratios(shape) {
                let goal = match shape {
                    Shape::Light => " (goal <= 0.2x)",
                    Shape::Scan => "",
                };
                out += &format!(
                    "{} tests: scion / copy = {tests:.2}x in test time{goal}, {wall:.2}x in pytest's wall time\n",
                    shape.name()
                );
            }
        }
        let st = &self.store;
        out += &format!(
            "store after {} test forks and one `scion gc`: {:.1} MiB live ({:.2}x the {:.1} MiB seed; goal <= 2x), \
             {:.1} MiB waiting out the {} s grace; store objects on disk {:.1} MiB before gc, {:.1} MiB after \
             (and {:.1} MiB of checkout files: the seed's)\n",
            st.tests_run,
            mib(st.live_bytes),
            st.live_bytes as f64 / st.seed_bytes.max(1) as f64,
            mib(st.seed_bytes),
            mib(st.waiting_bytes),
            st.grace_secs,
            mib(st.bytes_before_gc),
            mib(st.bytes_after_gc),
            mib(st.checkout_bytes)
        );
        out
    }
}
