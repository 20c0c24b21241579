//! What a BranchBench run reports: the header, one row per workflow, detail lines, and the
//! harness-shaped files (`*_e2e_stats.json`, per-op records as JSON lines).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use super::ops::{branch_share, depth_latency, BranchShare, DepthLatency, Failure, Op};
use super::options::BranchbenchOptions;
use super::runner::{PassReport, RunOutcome, WorkerStatus};
use super::seed::SeedInfo;
use super::tuples::{Profile, Tuple, Workflow};
use crate::machine::Machine;
use crate::BenchResult;

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Bytes {
    /// Allocated blocks (st_blocks x 512): the harness's method.
    pub physical: u64,
    /// File sizes (st_size): offshoot's.
    pub logical: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Storage {
    /// The workflow's directory (store and checkouts) after seeding.
    pub before: Bytes,
    pub peak: Bytes,
    /// The peak of the store alone (the workflow's directory less its checkout files):
    /// what the disk holds when steps remove their checkouts.
    pub peak_store: Bytes,
    /// The peak of the checkout files (writable and read-only) alone.
    pub peak_checkouts: Bytes,
    pub after: Bytes,
    pub after_gc: Option<Bytes>,
    pub reclaimed_bytes: Option<u64>,
    pub gc_secs: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Header {
    pub machine: Machine,
    pub date: String,
    pub profile: Profile,
    pub scale: String,
    pub seed: SeedInfo,
    pub seed_rebuild_identical: bool,
    pub concurrency: String,
    pub max_runtime_secs: u64,
    pub rng_seed: u64,
    pub data_seed: u64,
    /// How steps reach their branches: `checkout`, `vfs` or `copy` (the baseline).
    pub connect: &'static str,
    pub deviations: Vec<String>,
}

impl Header {
    pub fn new(opts: &BranchbenchOptions, machine: Machine, seed: SeedInfo) -> Header {
        Header {
            machine,
            date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            profile: opts.profile,
            scale: opts.scale.to_string(),
            seed,
            seed_rebuild_identical: true,
            concurrency: opts
                .concurrency
                .map(|c| c.to_string())
                .unwrap_or_else(|| "all (T per workflow)".into()),
            max_runtime_secs: opts.max_runtime.map(|d| d.as_secs()).unwrap_or(0),
            rng_seed: opts.rng_seed,
            data_seed: opts.data_seed,
            connect: opts.connect.name(),
            deviations: opts.deviations(),
        }
    }
}

/// What a workflow cost in memory: the process's peak resident set (the kernel's high-water
/// mark, so it covers every workflow run before this one too) and what the process's page
/// cache served during this workflow (VFS connections only; checkout files bypass it).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Memory {
    pub peak_rss_kib: Option<u64>,
    pub page_cache_hits: u64,
    pub page_cache_decodes: u64,
    pub page_cache_waits: u64,
    pub page_cache_used_bytes: u64,
    pub page_cache_capacity_bytes: u64,
}

impl Memory {
    /// The movement of the process's page cache counters since `before`, and the peak RSS.
    pub fn since(before: &scion_core::PageCacheStats) -> Memory {
        let now = scion_core::PageCache::process().stats();
        Memory {
            peak_rss_kib: peak_rss_kib(),
            page_cache_hits: now.hits - before.hits,
            page_cache_decodes: now.decodes - before.decodes,
            page_cache_waits: now.waits - before.waits,
            page_cache_used_bytes: now.used_bytes,
            page_cache_capacity_bytes: now.capacity_bytes,
        }
    }

    pub(crate) fn page_cache_hit_rate(&self) -> f64 {
        scion_core::PageCacheStats {
            hits: self.page_cache_hits,
            decodes: self.page_cache_decodes,
            ..Default::default()
        }
        .hit_rate()
    }
}

/// `VmHWM` from /proc/self/status (Linux); `None` elsewhere.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkflowReport {
    pub workflow: Workflow,
    pub run_id: String,
    pub tuple: Tuple,
    pub tuple_label: String,
    pub effective_concurrency: usize,
    pub total_steps: usize,
    pub completed_steps: usize,
    pub skipped_steps: usize,
    pub root_fallbacks: usize,
    pub slot_timeouts: usize,
    pub wall_secs: f64,
    /// Wall time of every run made (with `--runs`); the rest of the report is the median run.
    pub wall_runs: Vec<f64>,
    pub timed_out: bool,
    pub worker_status: BTreeMap<String, usize>,
    /// Harness ops of completed steps (cross-branch passes and checkpoints excluded).
    pub completed_ops: usize,
    pub checkpoints: usize,
    pub branch_share: BranchShare,
    pub latencies: Vec<DepthLatency>,
    pub max_depth: usize,
    pub depth_bound: usize,
    pub depth_histogram: BTreeMap<usize, usize>,
    pub peak_live: usize,
    pub fanout_overruns: usize,
    pub storage: Storage,
    pub memory: Memory,
    pub cross_branch: Vec<PassReport>,
    pub failed_statements: BTreeMap<String, usize>,
    pub failure_samples: Vec<Failure>,
    pub ops_per_step: BTreeMap<usize, usize>,
    pub ops_mismatches: usize,
    pub evals: usize,
    pub evals_without_row: usize,
}

pub(crate) fn run_id(profile: Profile, w: Workflow, scale: &str) -> String {
    let mini = if profile == Profile::Full {
        ""
    } else {
        "_mini"
    };
    format!("macro_{w}{mini}_scion_{scale}")
}

impl WorkflowReport {
    pub fn new(
        opts: &BranchbenchOptions,
        w: Workflow,
        tuple: Tuple,
        concurrency: usize,
        o: &RunOutcome,
        storage: Storage,
    ) -> WorkflowReport {
        let mut status = BTreeMap::new();
        for s in &o.worker_status {
            let name = match s {
                WorkerStatus::Done => "done",
                WorkerStatus::Stopped => "stopped",
                WorkerStatus::Interrupted => "interrupted",
            };
            *status.entry(name.to_string()).or_default() += 1;
        }
        let mut failed = BTreeMap::new();
        for f in &o.failures {
            *failed.entry(f.op.name().to_string()).or_default() += 1;
        }
        WorkflowReport {
            workflow: w,
            run_id: run_id(opts.profile, w, &opts.scale.to_string()),
            tuple,
            tuple_label: tuple.label(),
            effective_concurrency: concurrency,
            total_steps: tuple.total_steps(),
            completed_steps: o.completed_steps.iter().sum(),
            skipped_steps: o.skipped,
            root_fallbacks: o.root_fallbacks,
            slot_timeouts: o.slot_timeouts,
            wall_secs: o.wall_secs,
            wall_runs: vec![o.wall_secs],
            timed_out: o.timed_out,
            worker_status: status,
            completed_ops: o.completed_ops.iter().sum(),
            checkpoints: o.records.iter().filter(|r| r.op == Op::Checkpoint).count(),
            branch_share: branch_share(&o.records, o.wall_secs, concurrency),
            latencies: [
                Op::Create,
                Op::Connect,
                Op::Checkpoint,
                Op::Delete,
                Op::Read,
            ]
            .into_iter()
            .map(|op| depth_latency(&o.records, op))
            .collect(),
            max_depth: o.tree.max_depth(),
            depth_bound: o.tree.depth_bound(),
            depth_histogram: o.tree.depth_histogram(),
            peak_live: o.tree.peak_live,
            fanout_overruns: o.tree.fanout_overruns,
            storage,
            memory: Memory::default(),
            cross_branch: o.passes.clone(),
            failed_statements: failed,
            failure_samples: o.failures.iter().take(5).cloned().collect(),
            ops_per_step: o.ops_per_step.clone(),
            ops_mismatches: o.ops_mismatches,
            evals: o.evals,
            evals_without_row: o.evals_without_row,
        }
    }

    /// The harness's e2e keys, then ours.
    pub(crate) fn e2e_json(&self, o: &RunOutcome, max_runtime_secs: u64) -> serde_json::Value {
        let by_thread = |v: &dyn Fn(usize) -> serde_json::Value| -> serde_json::Value {
            (0..o.completed_steps.len())
                .map(|t| (t.to_string(), v(t)))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let per_step = self.workflow.estimated_bytes_per_dml() * self.tuple.max_dml as u64
            + 150 * self.tuple.max_ddl as u64;
        serde_json::json!({
            "run_id": self.run_id,
            "backend": "scion",
            "workflow": self.workflow.name(),
            "workers": self.tuple.workers,
            // The harness counts steps per worker.
            "total_steps": self.tuple.steps,
            "elapsed_sec": self.wall_secs,
            "max_runtime_sec": max_runtime_secs,
            "timed_out": self.timed_out,
            "completed_steps": by_thread(&|t| o.completed_steps[t].into()),
            "completed_ops": by_thread(&|t| o.completed_ops[t].into()),
            "worker_status": by_thread(&|t| o.worker_status[t].harness_name().into()),
            "estimated_bytes_per_step": per_step,
            "total_estimated_bytes_written": per_step * self.completed_steps as u64,
            "storage_before_bytes": self.storage.before.physical,
            "storage_after_bytes": self.storage.after.physical,
            "storage_delta_bytes": self.storage.after.physical as i64 - self.storage.before.physical as i64,
            "peak_live": self.peak_live,
            "max_depth": self.max_depth,
            "store_peak_bytes": self.storage.peak.physical,
            "store_peak_logical_bytes": self.storage.peak.logical,
            "store_only_peak_bytes": self.storage.peak_store.physical,
            "checkouts_peak_bytes": self.storage.peak_checkouts.physical,
            "reclaimed_bytes": self.storage.reclaimed_bytes,
            "skipped_steps": self.skipped_steps,
            "failed_statements": self.failed_statements,
        })
    }
}

/// Write `<run_id>_e2e_stats.json` and `<run_id>_ops.jsonl` under `out`.
pub(crate) fn write_files(
    out: &Path,
    h: &Header,
    r: &WorkflowReport,
    o: &RunOutcome,
) -> BenchResult<()> {
    std::fs::create_dir_all(out)?;
    let e2e = r.e2e_json(o, h.max_runtime_secs);
    std::fs::write(
        out.join(format!("{}_e2e_stats.json", r.run_id)),
        serde_json::to_vec_pretty(&e2e).map_err(|e| crate::BenchError::Other(e.to_string()))?,
    )?;
    let mut f = std::io::BufWriter::new(std::fs::File::create(
        out.join(format!("{}_ops.jsonl", r.run_id)),
    )?);
    for (i, rec) in o.records.iter().enumerate() {
        let mut v =
            serde_json::to_value(rec).map_err(|e| crate::BenchError::Other(e.to_string()))?;
        v["run_id"] = r.run_id.clone().into();
        v["random_seed"] = (h.rng_seed + rec.thread_id as u64).into();
        v["iteration_number"] = i.into();
        v["branch_count"] = 0.into();
        writeln!(f, "{v}")?;
    }
    f.flush()?;
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub header: Header,
    pub workflows: Vec<WorkflowReport>,
}

fn mib(b: u64) -> String {
    if b < 1 << 20 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
    }
}

fn lat(l: &Option<super::ops::Latency>) -> String {
    match l {
        Some(l) => format!("{:.1}/{:.1} (n={})", l.p50_ms, l.p99_ms, l.samples),
        None => "-".into(),
    }
}

impl Report {
    pub fn render(&self) -> String {
        let h = &self.header;
        let mut s = format!("{}\n", h.machine.line());
        s += &format!(
            "branchbench {:?} profile, seed {} ({} B, sha256 {}, identical on rebuild), concurrency {}, cap {} s, rng seed {}, data seed {}, {}\n",
            h.profile, h.scale, h.seed.bytes, &h.seed.sha256[..16], h.concurrency, h.max_runtime_secs, h.rng_seed, h.data_seed, h.date
        );
        s += &format!(
            "deviations from the harness: {}\n",
            if h.deviations.is_empty() {
                "none".to_string()
            } else {
                h.deviations.join("; ")
            }
        );
        s += "latencies are ms p50/p99 at depth 1 -> at the deepest depth; branch % (harness) = ops 1,2,8 / all ops; (+ckpt) adds op 6; overhead = ops 1,2,6,8 / (wall x concurrency)\n";
        for r in &self.workflows {
            s += &format!(
                "\n{} [{}]: {}/{} steps ({} skipped), {:.2} s wall{}, concurrency {}\n",
                r.workflow,
                r.tuple_label,
                r.completed_steps,
                r.total_steps,
                r.skipped_steps,
                r.wall_secs,
                if r.timed_out { ", TIMED OUT" } else { "" },
                r.effective_concurrency
            );
            if r.wall_runs.len() > 1 {
                let mut w = r.wall_runs.clone();
                w.sort_by(|a, b| a.total_cmp(b));
                s += &format!(
                    "  wall over {} runs: median {:.2} s (min {:.2}, max {:.2}); the figures below are the median run's\n",
                    w.len(),
                    r.wall_secs,
                    w[0],
                    w[w.len() - 1]
                );
            }
            s += &format!(
                "  branch %: {:.1} (harness), {:.1} (+checkpoint); overhead {:.1} % of wall x concurrency\n",
                r.branch_share.harness_pct, r.branch_share.with_checkpoint_pct, r.branch_share.wall_pct
            );
            for l in &r.latencies {
                if l.at_depth_1.is_none() && l.at_max_depth.is_none() {
                    s += &format!("  {:<10} no samples\n", l.op.name());
                    continue;
                }
                s += &format!(
                    "  {:<10} d=1 {:<24} d={} {}\n",
                    l.op.name(),
                    lat(&l.at_depth_1),
                    l.max_depth,
                    lat(&l.at_max_depth)
                );
            }
            let hist: Vec<String> = r
                .depth_histogram
                .iter()
                .map(|(d, n)| format!("d{d}:{n}"))
                .collect();
            s += &format!(
                "  depth: max {} (bound {}), nodes by depth {}; peak live branches {} (root included)\n",
                r.max_depth, r.depth_bound, hist.join(" "), r.peak_live
            );
            let st = &r.storage;
            s += &format!(
                "  storage physical/logical: before {} / {}, peak {} / {}, after {} / {}",
                mib(st.before.physical),
                mib(st.before.logical),
                mib(st.peak.physical),
                mib(st.peak.logical),
                mib(st.after.physical),
                mib(st.after.logical)
            );
            if let (Some(g), Some(rec), Some(t)) = (st.after_gc, st.reclaimed_bytes, st.gc_secs) {
                s += &format!(
                    ", after gc {} / {} (gc reclaimed {} in {:.2} s)",
                    mib(g.physical),
                    mib(g.logical),
                    mib(rec),
                    t
                );
            }
            s += &format!(
                "\n  storage peak apart: store alone {} / {}, checkout files {} / {}\n",
                mib(st.peak_store.physical),
                mib(st.peak_store.logical),
                mib(st.peak_checkouts.physical),
                mib(st.peak_checkouts.logical)
            );
            let m = &r.memory;
            s += &format!(
                "  memory: peak RSS of the bench process {}; page cache {} hits, {} decoded, {} waited for ({:.1}% hit), {} held at the end (bound {})\n",
                m.peak_rss_kib.map_or("-".to_string(), |k| mib(k << 10)),
                m.page_cache_hits,
                m.page_cache_decodes,
                m.page_cache_waits,
                m.page_cache_hit_rate() * 100.0,
                mib(m.page_cache_used_bytes),
                mib(m.page_cache_capacity_bytes)
            );
            for p in &r.cross_branch {
                s += &format!(
                    "  cross-branch pass at step {}: {} leaves in {:.3} s\n",
                    p.step, p.leaves, p.secs
                );
            }
            let ops: Vec<String> = r
                .ops_per_step
                .iter()
                .map(|(k, n)| format!("{k} ops x {n}"))
                .collect();
            s += &format!(
                "  ops per completed step: {} ({} mismatches); evals {} ({} without a row); checkpoints {}; root fallbacks {}\n",
                ops.join(", "), r.ops_mismatches, r.evals, r.evals_without_row, r.checkpoints, r.root_fallbacks
            );
            if r.failed_statements.is_empty() {
                s += "  failed statements: none\n";
            } else {
                let f: Vec<String> = r
                    .failed_statements
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                s += &format!("  failed statements: {}\n", f.join(", "));
                for f in &r.failure_samples {
                    s += &format!(
                        "    t{} s{} {}: {}\n",
                        f.thread_id,
                        f.step_id,
                        f.op.name(),
                        f.message
                    );
                }
            }
        }
        s
    }
}
