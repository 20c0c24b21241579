//! The rows of `scion bench isolation` measured from Python: pytest runs `runs + 1` tests
//! (the first is a warm-up) that use the plugin's real `scion_db` fixture, and as many that
//! use a fixture copying the seed with `shutil.copyfile`; each test opens its database and
//! runs the first query. The cost of a test is its setup + call + teardown as pytest
//! reports them, so both rows pay the same fixture machinery.

use std::path::Path;
use std::time::Duration;

use crate::isolation_phases::{MethodRow, FIRST_QUERY};
use crate::stats::Summary;
use crate::{BenchError, BenchResult};

pub(crate) const SCION_DB_ROW: &str = "Python: pytest scion_db fixture (plugin)";
pub(crate) const COPY_ROW: &str = "Python: pytest fixture copying the file";

/// The test module pytest runs: one parametrized test per method.
const TESTS: &str = r#"
import os, shutil, sqlite3
import pytest

RUNS = int(os.environ["BENCH_RUNS"])
QUERY = os.environ["BENCH_QUERY"]
PROBE = int(os.environ["BENCH_PROBE"])


@pytest.fixture
def copied_db(tmp_path):
    path = tmp_path / "test.db"
    shutil.copyfile(os.environ["BENCH_SEED"], path)
    conn = sqlite3.connect(str(path))
    yield conn
    conn.close()
    os.remove(path)


@pytest.mark.parametrize("run", range(RUNS + 1))
def test_scion_db(scion_db, run):
    scion_db.connection.execute(QUERY, (PROBE,)).fetchone()


@pytest.mark.parametrize("run", range(RUNS + 1))
def test_file_copy(copied_db, run):
    copied_db.execute(QUERY, (PROBE,)).fetchone()
"#;

/// Records each test's phase durations as JSON lines (also `scion bench pytest`'s).
pub(crate) const CONFTEST: &str = r#"
import json, os

def pytest_runtest_logreport(report):
    with open(os.environ["BENCH_OUT"], "a") as f:
        f.write(json.dumps({"test": report.nodeid, "when": report.when, "s": report.duration,
                            "ok": report.passed}) + "\n")
"#;

fn missing(method: &str, why: &str) -> MethodRow {
    MethodRow {
        method: method.to_string(),
        per_test: None,
        times_scion: None,
        phases: Vec::new(),
        missing: Some(why.to_string()),
    }
}

/// Both rows, or rows that say why they could not be measured.
pub fn rows(
    dir: &Path,
    seed: &Path,
    runs: usize,
    probe_id: i64,
    python: Option<&Path>,
) -> BenchResult<Vec<MethodRow>> {
    let Some(python) = python else {
        let why = "no Python with the scion package given (--python or SCION_BENCH_PYTHON)";
        return Ok(vec![missing(SCION_DB_ROW, why), missing(COPY_ROW, why)]);
    };
    // pytest runs in its own directory: a relative interpreter path must not move with it.
    let python = std::path::absolute(python)?;
    let dir = dir.join("python");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("test_isolation.py"), TESTS)?;
    std::fs::write(dir.join("conftest.py"), CONFTEST)?;
    let out = dir.join("phases.jsonl");
    let _ = std::fs::remove_file(&out);
    crate::stats::settle_disk();
    let run = std::process::Command::new(&python)
        .args([
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
        .arg("--scion-seed")
        .arg(seed)
        .arg("test_isolation.py")
        .current_dir(&dir)
        .env("BENCH_RUNS", runs.to_string())
        .env("BENCH_QUERY", FIRST_QUERY.replace("$1", "?"))
        .env("BENCH_PROBE", probe_id.to_string())
        .env("BENCH_SEED", seed)
        .env("BENCH_OUT", &out)
        .output()?;
    if !run.status.success() {
        return Err(BenchError::Other(format!(
            "pytest for the Python rows failed:\n{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        )));
    }
    let text = std::fs::read_to_string(&out)?;
    let mut result = Vec::new();
    for (method, prefix) in [
        (SCION_DB_ROW, "test_scion_db["),
        (COPY_ROW, "test_file_copy["),
    ] {
        result.push(row_of(&text, method, prefix, runs)?);
    }
    Ok(result)
}

/// Per test: setup + call + teardown, skipping the warm-up (`[0]`).
fn row_of(text: &str, method: &str, prefix: &str, runs: usize) -> BenchResult<MethodRow> {
    let phases = ["setup", "call", "teardown"];
    let mut per_phase: Vec<Vec<Duration>> = vec![Vec::new(); phases.len()];
    let mut totals: std::collections::BTreeMap<String, Duration> = Default::default();
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| BenchError::Other(e.to_string()))?;
        let test = v["test"].as_str().unwrap_or_default();
        let Some(param) = test
            .split_once(prefix)
            .map(|(_, p)| p.trim_end_matches(']'))
        else {
            continue;
        };
        if param == "0" {
            continue;
        }
        let when = v["when"].as_str().unwrap_or_default();
        let d = Duration::from_secs_f64(v["s"].as_f64().unwrap_or(0.0));
        if let Some(i) = phases.iter().position(|p| *p == when) {
            per_phase[i].push(d);
            *totals.entry(param.to_string()).or_default() += d;
        }
    }
    if totals.len() != runs {
        return Err(BenchError::Other(format!(
            "{method}: {} of {runs} tests reported",
            totals.len()
        )));
    }
    let totals: Vec<Duration> = totals.into_values().collect();
    Ok(MethodRow {
        method: method.to_string(),
        per_test: Some(Summary::of(&totals)),
        times_scion: None,
        phases: phases
            .iter()
            .zip(&per_phase)
            .map(|(n, s)| (n.to_string(), Summary::of(s).median_ms))
            .collect(),
        missing: None,
    })
}
