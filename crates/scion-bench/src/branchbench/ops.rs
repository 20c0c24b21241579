//! The harness's op codes, the per-op records, and the figures computed from them.

use std::collections::BTreeMap;

use serde::Serialize;

/// BranchBench's op codes; `Checkpoint` (6, COMMIT in the harness, unused there) is scion's
/// publish at the end of a step, which children need to see their parent's writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Create,
    Connect,
    Read,
    Insert,
    Update,
    Checkpoint,
    Ddl,
    Delete,
}

impl Op {
    pub fn code(self) -> u8 {
        match self {
            Op::Create => 1,
            Op::Connect => 2,
            Op::Read => 3,
            Op::Insert => 4,
            Op::Update => 5,
            Op::Checkpoint => 6,
            Op::Ddl => 7,
            Op::Delete => 8,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Connect => "connect",
            Op::Read => "read",
            Op::Insert => "insert",
            Op::Update => "update/delete",
            Op::Checkpoint => "checkpoint",
            Op::Ddl => "ddl",
            Op::Delete => "delete",
        }
    }
    /// Branch management under the harness's definition (ops 1, 2, 8).
    pub(crate) fn is_branch_op(self) -> bool {
        matches!(self, Op::Create | Op::Connect | Op::Delete)
    }
}

/// One timed operation, with the harness's columns plus depth and whether it belonged to a
/// cross-branch pass (those are not part of `completed_ops`).
#[derive(Debug, Clone, Serialize)]
pub struct OpRecord {
    pub thread_id: usize,
    pub step_id: usize,
    pub op_type: u8,
    #[serde(skip)]
    pub op: Op,
    /// Seconds, around the call only.
    pub latency: f64,
    pub depth: usize,
    /// Unix time in seconds, as the harness records it.
    pub start_time: f64,
    pub end_time: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sql_query: Option<String>,
    pub cross_branch: bool,
}

/// A statement or branch operation that failed: counted, never swallowed.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub thread_id: usize,
    pub step_id: usize,
    pub op: Op,
    pub message: String,
}

/// p50 and p99 (linear interpolation, as pandas computes them) of one op at one depth.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

impl Latency {
    pub fn of(mut ms: Vec<f64>) -> Option<Latency> {
        if ms.is_empty() {
            return None;
        }
        ms.sort_by(|a, b| a.total_cmp(b));
        Some(Latency {
            samples: ms.len(),
            p50_ms: quantile(&ms, 0.5),
            p99_ms: quantile(&ms, 0.99),
        })
    }
}

/// One op's latency at depth 1 and at the deepest depth it was recorded at.
#[derive(Debug, Clone, Serialize)]
pub struct DepthLatency {
    pub op: Op,
    pub at_depth_1: Option<Latency>,
    pub max_depth: usize,
    pub at_max_depth: Option<Latency>,
}

/// Latency of `op` (outside cross-branch passes) at depth 1 and at its deepest depth.
pub(crate) fn depth_latency(records: &[OpRecord], op: Op) -> DepthLatency {
    let mut by_depth: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.op == op && !r.cross_branch) {
        by_depth
            .entry(r.depth)
            .or_default()
            .push(r.latency * 1000.0);
    }
    let max_depth = by_depth.keys().next_back().copied().unwrap_or(0);
    DepthLatency {
        op,
        at_depth_1: by_depth.get(&1).cloned().and_then(Latency::of),
        max_depth,
        at_max_depth: by_depth.get(&max_depth).cloned().and_then(Latency::of),
    }
}

/// Time shares of branch management, under each definition in use.
#[derive(Debug, Clone, Serialize)]
pub struct BranchShare {
    /// Sum of ops 1, 2, 8 over the sum of all recorded ops (BranchBench's "Branch %").
    pub harness_pct: f64,
    /// Sum of ops 1, 2, 6, 8 over the sum of all recorded ops.
    pub with_checkpoint_pct: f64,
    /// Sum of ops 1, 2, 6, 8 over wall time x effective concurrency (offshoot's overhead).
    pub wall_pct: f64,
}

pub(crate) fn branch_share(
    records: &[OpRecord],
    wall_secs: f64,
    concurrency: usize,
) -> BranchShare {
    let total: f64 = records.iter().map(|r| r.latency).sum();
    let branch: f64 = records
        .iter()
        .filter(|r| r.op.is_branch_op())
        .map(|r| r.latency)
        .sum();
    let checkpoint: f64 = records
        .iter()
        .filter(|r| r.op == Op::Checkpoint)
        .map(|r| r.latency)
        .sum();
    let pct = |x: f64, d: f64| if d > 0.0 { 100.0 * x / d } else { 0.0 };
    BranchShare {
        harness_pct: pct(branch, total),
        with_checkpoint_pct: pct(branch + checkpoint, total),
        wall_pct: pct(branch + checkpoint, wall_secs * concurrency as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_like_pandas() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.5), 2.5);
        assert!((quantile(&v, 0.99) - 3.97).abs() < 1e-9);
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
    }
}
