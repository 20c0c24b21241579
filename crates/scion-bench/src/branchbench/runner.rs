//! One workflow run: T workers, each taking S steps (branch, mutate, evaluate, publish,
//! maybe a cross-branch pass, maybe prune) against one shared tree, as the harness does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rusqlite::InterruptHandle;
use scion_core::Scion;
use serde::Serialize;

use super::conn::{
    branch, connect_reader, connect_writable, query_rows, remove_checkout, ConnectMode,
};
use super::ops::{Failure, Op, OpRecord};
use super::seed::Shape;
use super::sql::{compare_sql, step_sql, suffix, SqlVariant};
use super::sync::{Semaphore, Turnstile};
use super::tree::{Choice, DepthRule, ParentRule, Tree, ROOT};
use super::tuples::{Tuple, Workflow};
use crate::datagen::SplitMix64;

#[derive(Debug, Clone)]
pub struct RunConfig {
    pub workflow: Workflow,
    pub tuple: Tuple,
    pub shape: Shape,
    pub concurrency: usize,
    pub max_runtime: Option<Duration>,
    pub rng_seed: u64,
    pub parent_rule: ParentRule,
    pub depth_rule: DepthRule,
    pub sql: SqlVariant,
    /// Emulate a hosted service's cap on alive branches: (cap, slot timeout).
    pub live_cap: Option<(usize, Duration)>,
    /// Lockstep rounds: parent choice and pruning in worker order, so trees repeat exactly.
    pub deterministic: bool,
    /// Counts steps as they end (completed or skipped), for progress reports.
    pub steps_ended: Arc<std::sync::atomic::AtomicUsize>,
    pub connect: ConnectMode,
    /// Remove a step's checkout file once it is published (the harness keeps it).
    pub drop_checkouts: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerStatus {
    Done,
    /// Saw the stop flag at a step boundary.
    Stopped,
    /// Was stopped in the middle of a step.
    Interrupted,
}

impl WorkerStatus {
    /// The word the harness's e2e files use.
    pub(crate) fn harness_name(self) -> &'static str {
        match self {
            WorkerStatus::Done => "completed",
            WorkerStatus::Stopped => "stopped",
            WorkerStatus::Interrupted => "interrupted",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PassReport {
    pub step: usize,
    pub leaves: usize,
    pub secs: f64,
}

#[derive(Debug)]
pub struct RunOutcome {
    pub records: Vec<OpRecord>,
    pub failures: Vec<Failure>,
    pub completed_steps: Vec<usize>,
    pub completed_ops: Vec<usize>,
    pub skipped: usize,
    pub root_fallbacks: usize,
    pub slot_timeouts: usize,
    pub worker_status: Vec<WorkerStatus>,
    pub wall_secs: f64,
    pub timed_out: bool,
    pub tree: Tree,
    pub passes: Vec<PassReport>,
    /// Completed steps by the number of harness ops they attempted.
    pub ops_per_step: std::collections::BTreeMap<usize, usize>,
    /// Completed steps whose attempted ops differ from the tuple's M_s/M_d/Q_v arithmetic.
    pub ops_mismatches: usize,
    pub evals: usize,
    pub evals_without_row: usize,
}

#[derive(Default)]
struct Shared {
    records: Vec<OpRecord>,
    failures: Vec<Failure>,
    passes: Vec<PassReport>,
    ops_per_step: std::collections::BTreeMap<usize, usize>,
    ops_mismatches: usize,
    skipped: usize,
    root_fallbacks: usize,
    slot_timeouts: usize,
    evals: usize,
    evals_without_row: usize,
    claimed_steps: Vec<usize>,
    pass_running: bool,
    /// Prunes between their wait for passes and the node's death in the tree.
    prunes_in_flight: usize,
}

struct Ctx {
    cfg: RunConfig,
    scion: Arc<Scion>,
    epoch: Instant,
    /// `epoch` as Unix time in seconds: op records carry wall-clock times, as the
    /// harness's do.
    epoch_unix: f64,
    tree: Mutex<Tree>,
    tree_cv: Condvar,
    shared: Mutex<Shared>,
    shared_cv: Condvar,
    progress: Mutex<Vec<usize>>,
    progress_cv: Condvar,
    stop: AtomicBool,
    turn_choose: Turnstile,
    turn_finish: Turnstile,
    permits: Semaphore,
    interrupts: Mutex<Vec<Option<InterruptHandle>>>,
}

/// The ops one step recorded, flushed to the shared log when it ends.
struct StepLog<'a> {
    ctx: &'a Ctx,
    thread: usize,
    step: usize,
    depth: usize,
    cross_branch: bool,
    records: Vec<OpRecord>,
    failures: Vec<Failure>,
    attempted: usize,
    /// Statements the step's lists hold after the M_s/M_d/Q_v caps.
    planned: usize,
}

impl<'a> StepLog<'a> {
    fn new(ctx: &'a Ctx, thread: usize, step: usize, depth: usize) -> Self {
        StepLog {
            ctx,
            thread,
            step,
            depth,
            cross_branch: false,
            records: Vec::new(),
            failures: Vec::new(),
            attempted: 0,
            planned: 0,
        }
    }

    /// Time `f` around the call only; record it on success, count it on failure.
    fn timed<T>(
        &mut self,
        op: Op,
        sql: Option<&str>,
        f: impl FnOnce() -> Result<T, String>,
    ) -> Option<T> {
        if op != Op::Checkpoint && !self.cross_branch {
            self.attempted += 1;
        }
        let start = Instant::now();
        let result = f();
        let end = Instant::now();
        match result {
            Ok(v) => {
                self.records.push(OpRecord {
                    thread_id: self.thread,
                    step_id: self.step,
                    op_type: op.code(),
                    op,
                    latency: (end - start).as_secs_f64(),
                    depth: self.depth,
                    start_time: self.ctx.epoch_unix + (start - self.ctx.epoch).as_secs_f64(),
                    end_time: self.ctx.epoch_unix + (end - self.ctx.epoch).as_secs_f64(),
                    sql_query: sql.map(str::to_string),
                    cross_branch: self.cross_branch,
                });
                Some(v)
            }
            Err(message) => {
                self.failures.push(Failure {
                    thread_id: self.thread,
                    step_id: self.step,
                    op,
                    message,
                });
                None
            }
        }
    }

    fn flush(self) -> usize {
        let harness_ops = self
            .records
            .iter()
            .filter(|r| r.op != Op::Checkpoint && !r.cross_branch)
            .count();
        let mut s = self.ctx.shared.lock().unwrap();
        s.records.extend(self.records);
        s.failures.extend(self.failures);
        harness_ops
    }
}

impl Ctx {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn report_progress(&self, thread: usize, steps: usize) {
        self.cfg.steps_ended.fetch_add(1, Ordering::Relaxed);
        self.progress.lock().unwrap()[thread] = steps;
        self.progress_cv.notify_all();
    }

    /// Phase 1: pick a parent and reserve the child in the tree (or skip).
    fn choose(
        &self,
        thread: usize,
        step: usize,
        rng: &mut SplitMix64,
        current: Option<usize>,
    ) -> Option<(usize, usize)> {
        let mut tree = self.tree.lock().unwrap();
        if let Some((cap, timeout)) = self.cfg.live_cap {
            let deadline = Instant::now() + timeout;
            while tree.live >= cap {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || self.stopped() {
                    self.shared.lock().unwrap().slot_timeouts += 1;
                    return None;
                }
                tree = self.tree_cv.wait_timeout(tree, left).unwrap().0;
            }
        }
        let parent = match tree.choose(rng, current) {
            Choice::Parent(p) => p,
            Choice::RootFallback => {
                self.shared.lock().unwrap().root_fallbacks += 1;
                ROOT
            }
            Choice::Skip => return None,
        };
        let sfx = suffix(thread, step);
        let child = tree.add_child(parent, format!("macro_t{thread}_s{step}"), sfx);
        Some((parent, child))
    }

    fn kill(&self, node: usize) {
        self.tree.lock().unwrap().kill(node);
        self.tree_cv.notify_all();
    }

    /// Phase 2: fork, connect, mutate, evaluate, publish. False when the step was abandoned.
    fn work(&self, log: &mut StepLog<'_>, parent: &str, child: &str, rng: &mut SplitMix64) -> bool {
        let cfg = &self.cfg;
        let c = branch(child);
        let created = log.timed(Op::Create, None, || {
            cfg.connect.fork(&self.scion, parent, child)
        });
        if created.is_none() {
            return false;
        }
        let Some((conn, path)) = log.timed(Op::Connect, None, || {
            connect_writable(&self.scion, &cfg.connect, child)
        }) else {
            return false;
        };
        self.interrupts.lock().unwrap()[log.thread] = Some(conn.get_interrupt_handle());
        let sql = step_sql(cfg.workflow, cfg.sql, log.thread, log.step, rng, cfg.shape);
        log.planned = sql.ddl.len().min(cfg.tuple.max_ddl)
            + sql.dml.len().min(cfg.tuple.max_dml)
            + sql.evals.len().min(cfg.tuple.max_evals);
        for ddl in sql.ddl.iter().take(cfg.tuple.max_ddl) {
            log.timed(Op::Ddl, Some(ddl), || {
                conn.execute_batch(ddl).map_err(|e| e.to_string())
            });
        }
        for dml in sql.dml.iter().take(cfg.tuple.max_dml) {
            log.timed(dml.op, Some(&dml.sql), || {
                conn.execute_batch(&dml.sql).map_err(|e| e.to_string())
            });
        }
        for eval in sql.evals.iter().take(cfg.tuple.max_evals) {
            if let Some(rows) = log.timed(Op::Read, Some(eval), || query_rows(&conn, eval)) {
                let mut s = self.shared.lock().unwrap();
                s.evals += 1;
                if rows == 0 {
                    s.evals_without_row += 1;
                }
            }
        }
        self.interrupts.lock().unwrap()[log.thread] = None;
        if self.stopped() {
            return false;
        }
        let published = log.timed(Op::Checkpoint, None, || {
            match &cfg.connect {
                // The baseline's file is the branch: closing it is all there is.
                ConnectMode::Copy { .. } => {
                    drop(conn);
                    return Ok(());
                }
                // Through the VFS the step is one transaction: committing it publishes
                // exactly the pages it changed, and the checkpoint names that head.
                ConnectMode::Vfs { .. } => {
                    conn.execute_batch("COMMIT").map_err(|e| e.to_string())?
                }
                ConnectMode::Checkout => {}
            }
            drop(conn);
            self.scion
                .checkpoint(&c, &"step".parse().expect("valid"), Default::default())
                .map(drop)
                .map_err(|e| e.to_string())
        });
        // The branch lives on in the store; its working file is not needed until a
        // later step connects to it again, but the harness leaves it there meanwhile.
        if let Some(path) = path.as_ref().filter(|_| cfg.drop_checkouts) {
            remove_checkout(path);
        }
        published.is_some()
    }

    /// A cross-branch pass: wait for every worker to reach `step`, then read each leaf.
    fn cross_branch_pass(&self, thread: usize, step: usize) {
        let deadline = Instant::now() + Duration::from_secs(120);
        {
            let mut progress = self.progress.lock().unwrap();
            while progress.iter().any(|&p| p < step + 1) && !self.stopped() {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                progress = self.progress_cv.wait_timeout(progress, left).unwrap().0;
            }
        }
        {
            // Prunes already under way finish first, so no leaf listed below is deleted
            // while the pass reads it; later prunes wait for the pass.
            let mut s = self.shared.lock().unwrap();
            s.pass_running = true;
            while s.prunes_in_flight > 0 {
                s = self.shared_cv.wait(s).unwrap();
            }
        }
        let leaves: Vec<(String, String, usize)> = {
            let tree = self.tree.lock().unwrap();
            tree.leaves()
                .into_iter()
                .map(|i| {
                    let n = &tree.nodes[i];
                    (n.branch.clone(), n.suffix.clone(), n.depth)
                })
                .collect()
        };
        let start = Instant::now();
        let mut log = StepLog::new(self, thread, step, 0);
        log.cross_branch = true;
        for (leaf, sfx, depth) in &leaves {
            log.depth = *depth;
            let Some(query) = compare_sql(self.cfg.workflow, self.cfg.sql, sfx) else {
                break;
            };
            if let Some((conn, path)) = log.timed(Op::Connect, None, || {
                connect_reader(&self.scion, &self.cfg.connect, leaf)
            }) {
                log.timed(Op::Read, Some(&query), || query_rows(&conn, &query));
                drop(conn);
                if let Some(path) = path.as_ref().filter(|_| self.cfg.drop_checkouts) {
                    remove_checkout(path);
                }
            }
        }
        log.flush();
        let mut s = self.shared.lock().unwrap();
        s.passes.push(PassReport {
            step,
            leaves: leaves.len(),
            secs: start.elapsed().as_secs_f64(),
        });
        s.pass_running = false;
        drop(s);
        self.shared_cv.notify_all();
    }

    /// Whether this worker runs the pass scheduled at `step` (the first to get there does).
    fn claim_pass(&self, step: usize) -> bool {
        if !self.cfg.tuple.is_cross_branch_step(step) {
            return false;
        }
        let mut s = self.shared.lock().unwrap();
        if s.claimed_steps.len() >= self.cfg.tuple.cross_branch || s.claimed_steps.contains(&step) {
            return false;
        }
        s.claimed_steps.push(step);
        true
    }

    /// Prune: connect to the root, then destroy the child (ops 2 and 8).
    fn prune(&self, log: &mut StepLog<'_>, child: &str, node: usize) {
        {
            let mut s = self.shared.lock().unwrap();
            while s.pass_running {
                s = self.shared_cv.wait(s).unwrap();
            }
            s.prunes_in_flight += 1;
        }
        log.timed(Op::Connect, None, || {
            connect_reader(&self.scion, &self.cfg.connect, "main").map(drop)
        });
        log.timed(Op::Delete, None, || {
            self.cfg.connect.destroy(&self.scion, child, false)
        });
        self.kill(node);
        self.shared.lock().unwrap().prunes_in_flight -= 1;
        self.shared_cv.notify_all();
    }

    fn worker(&self, thread: usize) -> (WorkerStatus, usize, usize) {
        let cfg = &self.cfg;
        let mut rng = SplitMix64(cfg.rng_seed + thread as u64);
        let (mut steps_done, mut ops_done) = (0, 0);
        let mut current = None;
        for step in 0..cfg.tuple.steps {
            if self.stopped() {
                return (WorkerStatus::Stopped, steps_done, ops_done);
            }
            let ticket = step * cfg.tuple.workers + thread;
            // A round's choices see every commit and prune of the round before.
            self.turn_finish
                .wait_passed(step * cfg.tuple.workers, &self.stop);
            self.turn_choose.wait(ticket, &self.stop);
            // Free-running, a step takes its slot before it picks a parent, so only running
            // steps hold tree nodes. In lockstep a worker may not hold a slot while it waits
            // for its turn (the turn's owner could be waiting for that slot), so it picks first.
            let early_permit = (!cfg.deterministic).then(|| self.permits.acquire());
            let chosen = self.choose(thread, step, &mut rng, current);
            self.turn_choose.done();
            let Some((parent, node)) = chosen else {
                drop(early_permit);
                self.shared.lock().unwrap().skipped += 1;
                self.report_progress(thread, step + 1);
                self.turn_finish.wait(ticket, &self.stop);
                self.turn_finish.done();
                continue;
            };
            let (parent_name, child_name, depth) = {
                let tree = self.tree.lock().unwrap();
                let n = &tree.nodes[node];
                (tree.nodes[parent].branch.clone(), n.branch.clone(), n.depth)
            };
            let mut log = StepLog::new(self, thread, step, depth);
            let permit = early_permit.unwrap_or_else(|| self.permits.acquire());
            let worked = self.work(&mut log, &parent_name, &child_name, &mut rng);
            drop(permit);
            if !worked {
                let interrupted = self.stopped();
                log.flush();
                self.kill(node);
                let _ = cfg.connect.destroy(&self.scion, &child_name, true);
                self.report_progress(thread, step + 1);
                self.turn_finish.wait(ticket, &self.stop);
                self.turn_finish.done();
                if interrupted {
                    return (WorkerStatus::Interrupted, steps_done, ops_done);
                }
                self.shared.lock().unwrap().skipped += 1;
                continue;
            }
            self.tree.lock().unwrap().nodes[node].pre_committed = true;
            self.report_progress(thread, step + 1);
            self.turn_finish.wait(ticket, &self.stop);
            if self.claim_pass(step) {
                self.cross_branch_pass(thread, step);
            }
            let pruned = rng.unit() < cfg.tuple.prune;
            if pruned {
                self.prune(&mut log, &child_name, node);
                current = None;
            } else {
                self.tree.lock().unwrap().nodes[node].committed = true;
                self.tree_cv.notify_all();
                current = Some(node);
            }
            self.turn_finish.done();
            let attempted = log.attempted;
            // 2 branch ops, the capped statement lists, and 2 more when pruned.
            let expected = 2 + log.planned + if pruned { 2 } else { 0 };
            let ops = log.flush();
            {
                let mut s = self.shared.lock().unwrap();
                *s.ops_per_step.entry(attempted).or_default() += 1;
                if attempted != expected {
                    s.ops_mismatches += 1;
                }
            }
            steps_done += 1;
            ops_done += ops;
        }
        (WorkerStatus::Done, steps_done, ops_done)
    }
}

pub fn run(scion: Arc<Scion>, cfg: RunConfig) -> RunOutcome {
    let workers = cfg.tuple.workers;
    let ctx = Arc::new(Ctx {
        tree: Mutex::new(Tree::new(
            cfg.tuple,
            cfg.parent_rule,
            cfg.depth_rule,
            "main",
        )),
        tree_cv: Condvar::new(),
        shared: Mutex::new(Shared::default()),
        shared_cv: Condvar::new(),
        progress: Mutex::new(vec![0; workers]),
        progress_cv: Condvar::new(),
        stop: AtomicBool::new(false),
        turn_choose: Turnstile::new(cfg.deterministic),
        turn_finish: Turnstile::new(cfg.deterministic),
        permits: Semaphore::new(cfg.concurrency.max(1)),
        interrupts: Mutex::new((0..workers).map(|_| None).collect()),
        epoch: Instant::now(),
        epoch_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
        scion,
        cfg,
    });
    let finished = Arc::new(AtomicBool::new(false));
    let timer = ctx.cfg.max_runtime.map(|cap| {
        let (ctx, finished) = (ctx.clone(), finished.clone());
        std::thread::spawn(move || {
            let deadline = ctx.epoch + cap;
            while !finished.load(Ordering::SeqCst) {
                if Instant::now() >= deadline {
                    ctx.stop.store(true, Ordering::SeqCst);
                    for h in ctx.interrupts.lock().unwrap().iter().flatten() {
                        h.interrupt();
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    });
    let handles: Vec<_> = (0..workers)
        .map(|t| {
            let ctx = ctx.clone();
            std::thread::Builder::new()
                .name(format!("bb-worker-{t}"))
                .stack_size(1 << 20)
                .spawn(move || ctx.worker(t))
                .expect("spawn a worker thread")
        })
        .collect();
    let results: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().expect("a worker panicked"))
        .collect();
    let wall_secs = ctx.epoch.elapsed().as_secs_f64();
    finished.store(true, Ordering::SeqCst);
    if let Some(t) = timer {
        let _ = t.join();
    }
    let timed_out = ctx.stopped();
    let ctx = Arc::try_unwrap(ctx).unwrap_or_else(|_| panic!("workers are joined"));
    let mut s = ctx.shared.into_inner().unwrap();
    s.records
        .sort_by(|a, b| a.start_time.total_cmp(&b.start_time));
    RunOutcome {
        records: s.records,
        failures: s.failures,
        completed_steps: results.iter().map(|r| r.1).collect(),
        completed_ops: results.iter().map(|r| r.2).collect(),
        worker_status: results.iter().map(|r| r.0).collect(),
        skipped: s.skipped,
        root_fallbacks: s.root_fallbacks,
        slot_timeouts: s.slot_timeouts,
        wall_secs,
        timed_out,
        tree: ctx.tree.into_inner().unwrap(),
        passes: s.passes,
        ops_per_step: s.ops_per_step,
        ops_mismatches: s.ops_mismatches,
        evals: s.evals,
        evals_without_row: s.evals_without_row,
    }
}
