//! One way of getting a fresh database per test: its row in `scion bench isolation`, and
//! the timer of the phases of one test it is made of.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::stats::Summary;
use crate::BenchResult;

/// The query every method runs once the database is open: a point lookup, which reads the
/// schema and one root-to-leaf path, as a test's first statement does.
pub const FIRST_QUERY: &str = "SELECT amount FROM orders WHERE id = $1";

/// One method's cost per test at one size.
#[derive(Debug, Clone, Serialize)]
pub struct MethodRow {
    pub method: String,
    /// None when the method could not run here; `missing` says why.
    pub per_test: Option<Summary>,
    /// This method's median over scion's (above 1: scion is faster).
    pub times_scion: Option<f64>,
    /// Medians of the steps making up one test, in order.
    pub phases: Vec<(String, f64)>,
    pub missing: Option<String>,
}

/// Times the named phases of one test, `runs` times after a warm-up.
pub(crate) struct PhaseTimer {
    names: Vec<&'static str>,
    samples: Vec<Vec<Duration>>,
    totals: Vec<Duration>,
}

impl PhaseTimer {
    pub(crate) fn new(names: &[&'static str]) -> Self {
        Self {
            names: names.to_vec(),
            samples: vec![Vec::new(); names.len()],
            totals: Vec::new(),
        }
    }

    /// Runs `test` once to warm up, then `runs` times. `test` calls `lap(i)` after phase i.
    pub(crate) fn run(
        &mut self,
        runs: usize,
        mut test: impl FnMut(usize, &mut dyn FnMut(usize)) -> BenchResult<()>,
    ) -> BenchResult<()> {
        for run in 0..=runs {
            let mut laps = vec![Duration::ZERO; self.names.len()];
            let mut last = Instant::now();
            let start = last;
            test(run, &mut |i| {
                let now = Instant::now();
                laps[i] = now - last;
                last = now;
            })?;
            let total = start.elapsed();
            if run > 0 {
                for (i, l) in laps.into_iter().enumerate() {
                    self.samples[i].push(l);
                }
                self.totals.push(total);
            }
        }
        Ok(())
    }

    pub(crate) fn row(&self, method: &str) -> MethodRow {
        MethodRow {
            method: method.to_string(),
            per_test: Some(Summary::of(&self.totals)),
            times_scion: None,
            phases: self
                .names
                .iter()
                .zip(&self.samples)
                .map(|(n, s)| (n.to_string(), Summary::of(s).median_ms))
                .collect(),
            missing: None,
        }
    }
}
