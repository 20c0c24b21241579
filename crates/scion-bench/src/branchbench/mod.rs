//! `scion bench branchbench`: the five BranchBench workflows (simulation, data_cleaning,
//! software_dev, mcts, failure_repro) re-implemented on scion, behaviour for behaviour by
//! default: the harness's tuples, parent rule, depth off-by-one, prune coin, cross-branch
//! schedule and per-step op sequence. Deviations are flags, printed in the header.

mod conn;
pub mod ops;
mod options;
pub mod report;
pub mod runner;
pub mod seed;
pub mod sql;
mod sync;
pub mod tree;
pub mod tuples;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scion_core::{ClonePolicy, Scion, ScionOptions};
use scion_store::LocalBackend;

use crate::machine::describe;
use crate::{BenchError, BenchResult, Progress};
use report::{Bytes, Header, Report, Storage, WorkflowReport};
use runner::RunConfig;
use tuples::Workflow;

pub(crate) use options::DB;
pub use options::{BranchbenchOptions, Connect};

/// Bytes under `dir`: physical (allocated blocks) and logical (file sizes).
pub(crate) fn dir_bytes(dir: &Path) -> Bytes {
    Sample::take(dir).all
}

fn free_bytes(dir: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs fills the zeroed struct for a valid NUL-terminated path.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some(s.f_bavail as u64 * s.f_frsize as u64)
}

/// A workflow directory's bytes at one moment: all of it, and its checkout files.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    all: Bytes,
    checkouts: Bytes,
}

impl Sample {
    /// One walk of `dir`, so the two figures describe the same moment (two walks apart
    /// would count a file written in between in one figure and not the other).
    fn take(dir: &Path) -> Sample {
        use std::os::unix::fs::MetadataExt;
        let checkouts = [dir.join("store/checkouts"), dir.join("store/checkouts-ro")];
        let mut sample = Sample::default();
        let mut stack = vec![(dir.to_path_buf(), false)];
        while let Some((d, in_checkouts)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(m) = e.metadata() else { continue };
                let path = e.path();
                if m.is_dir() {
                    let inside = in_checkouts || checkouts.contains(&path);
                    stack.push((path, inside));
                    continue;
                }
                let (logical, physical) = (m.len(), m.blocks() * 512);
                sample.all.logical += logical;
                sample.all.physical += physical;
                if in_checkouts {
                    sample.checkouts.logical += logical;
                    sample.checkouts.physical += physical;
                }
            }
        }
        sample
    }

    fn store(&self) -> Bytes {
        Bytes {
            physical: self.all.physical.saturating_sub(self.checkouts.physical),
            logical: self.all.logical.saturating_sub(self.checkouts.logical),
        }
    }
}

/// The peaks of a directory's sizes: all of it, the store alone, the checkouts alone.
#[derive(Debug, Clone, Copy, Default)]
struct Peaks {
    all: Bytes,
    store: Bytes,
    checkouts: Bytes,
}

impl Peaks {
    fn add(&mut self, s: Sample) {
        let max = |p: &mut Bytes, b: Bytes| {
            p.physical = p.physical.max(b.physical);
            p.logical = p.logical.max(b.logical);
        };
        max(&mut self.all, s.all);
        max(&mut self.store, s.store());
        max(&mut self.checkouts, s.checkouts);
    }
}

/// Samples a workflow directory's size until finished, keeping the peaks.
struct PeakSampler {
    peaks: Arc<Mutex<Peaks>>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeakSampler {
    fn start(dir: PathBuf) -> Self {
        let mut first = Peaks::default();
        first.add(Sample::take(&dir));
        let peaks = Arc::new(Mutex::new(first));
        let done = Arc::new(AtomicBool::new(false));
        let (p, d) = (peaks.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            while !d.load(Ordering::SeqCst) {
                let now = Sample::take(&dir);
                p.lock().unwrap().add(now);
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        PeakSampler {
            peaks,
            done,
            thread: Some(thread),
        }
    }

    fn finish(mut self, last: Sample) -> Peaks {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut p = *self.peaks.lock().unwrap();
        p.add(last);
        p
    }
}

/// Where `--connect copy` keeps its files: tmpfs when the machine has one (the baseline is
/// the queries' cost, not the disk's), else beside the store.
fn copy_dir(dir: &Path) -> BenchResult<PathBuf> {
    let shm = Path::new("/dev/shm");
    let copies = if shm.is_dir() {
        shm.join(format!("scion-bench-copies-{}", std::process::id()))
    } else {
        dir.join("copies")
    };
    let _ = std::fs::remove_dir_all(&copies);
    std::fs::create_dir_all(&copies)?;
    Ok(copies)
}

fn run_workflow(
    opts: &BranchbenchOptions,
    w: Workflow,
    seed_path: &Path,
    seed_bytes: u64,
    progress: Progress<'_>,
) -> BenchResult<(WorkflowReport, runner::RunOutcome)> {
    let tuple = opts.tuple(w);
    let concurrency = opts.concurrency.unwrap_or(tuple.workers).min(tuple.workers);
    let dir = opts.dir.join(w.name());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    // Through checkouts every step materializes a file (no clones on this filesystem?),
    // kept until its branch is destroyed unless steps drop them once published; the store
    // grows by the pages the steps change.
    let checkouts = match opts.connect {
        Connect::Checkout if opts.drop_checkouts => 2 * concurrency as u64,
        Connect::Checkout => (tuple.total_steps() + concurrency) as u64,
        Connect::Vfs | Connect::Copy => 0,
    };
    let need = seed_bytes * (checkouts + 8);
    if let Some(free) = free_bytes(&dir) {
        if free < need {
            return Err(BenchError::Other(format!(
                "{w}: needs about {} MiB free in {} (seed {} MiB x ({checkouts} checkout files + 8)), {} MiB free",
                need >> 20,
                dir.display(),
                seed_bytes >> 20,
                free >> 20
            )));
        }
    }
    let store =
        LocalBackend::open(dir.join("store")).map_err(|e| BenchError::Other(e.to_string()))?;
    let scion = Arc::new(Scion::init(
        Arc::new(store),
        "branchbench",
        ScionOptions::new(dir.join("store/checkouts"), ClonePolicy::Auto),
        Default::default(),
    )?);
    scion.engine().create(&DB.parse()?, Some(seed_path))?;
    let before = dir_bytes(&dir);
    progress(&format!(
        "{w}: {} ({} steps, {concurrency} at a time)",
        tuple.label(),
        tuple.total_steps()
    ));
    let sampler = PeakSampler::start(dir.clone());
    let cache_before = scion_core::PageCache::process().stats();
    let mut copies_made = None;
    let steps_ended = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let config = RunConfig {
        workflow: w,
        tuple,
        shape: opts.scale.shape(),
        concurrency,
        max_runtime: opts.max_runtime.filter(|d| !d.is_zero()),
        rng_seed: opts.rng_seed,
        parent_rule: opts.parent_rule,
        depth_rule: opts.depth_rule,
        sql: opts.sql,
        live_cap: opts.live_cap,
        deterministic: opts.deterministic,
        steps_ended: steps_ended.clone(),
        drop_checkouts: opts.drop_checkouts,
        connect: match opts.connect {
            Connect::Vfs => {
                // The VFS's connections share this attachment of the store.
                let store = dir.join("store");
                let location =
                    scion_core::attach::StoreSpec::parse(&store.display().to_string())?.location();
                scion_vfs::adopt(&location, scion.engine().clone());
                scion_vfs::register()
                    .map_err(|rc| BenchError::Other(format!("registering the VFS: {rc}")))?;
                conn::ConnectMode::Vfs { store }
            }
            Connect::Checkout => conn::ConnectMode::Checkout,
            Connect::Copy => {
                let copies = copy_dir(&dir)?;
                std::fs::copy(seed_path, copies.join("main.db"))?;
                copies_made = Some(copies.clone());
                conn::ConnectMode::Copy { dir: copies }
            }
        },
    };
    let outcome = std::thread::scope(|scope| {
        let worker = scope.spawn(|| runner::run(scion.clone(), config));
        let started = Instant::now();
        let mut last_report = Instant::now();
        while !worker.is_finished() {
            std::thread::sleep(Duration::from_millis(100));
            if last_report.elapsed() >= Duration::from_secs(5) {
                last_report = Instant::now();
                progress(&format!(
                    "{w}: {}/{} steps ended, {:.0} s",
                    steps_ended.load(Ordering::Relaxed),
                    tuple.total_steps(),
                    started.elapsed().as_secs_f64()
                ));
            }
        }
        worker.join().expect("the workflow runner panicked")
    });
    let last = Sample::take(&dir);
    let after = last.all;
    let peaks = sampler.finish(last);
    let mut storage = Storage {
        before,
        peak: peaks.all,
        peak_store: peaks.store,
        peak_checkouts: peaks.checkouts,
        after,
        after_gc: None,
        reclaimed_bytes: None,
        gc_secs: None,
    };
    if opts.gc_after {
        let start = Instant::now();
        let gc = scion.gc(Duration::ZERO, true)?;
        storage.gc_secs = Some(start.elapsed().as_secs_f64());
        storage.reclaimed_bytes = Some(gc.reclaimed_bytes);
        storage.after_gc = Some(dir_bytes(&dir));
    }
    let mut report = WorkflowReport::new(opts, w, tuple, concurrency, &outcome, storage);
    report.memory = report::Memory::since(&cache_before);
    progress(&format!(
        "{w}: {}/{} steps in {:.1} s",
        report.completed_steps, report.total_steps, report.wall_secs
    ));
    drop(scion);
    if let Some(copies) = copies_made {
        // tmpfs is memory: the copies go whatever `--keep` says.
        let _ = std::fs::remove_dir_all(copies);
    }
    if !opts.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok((report, outcome))
}

pub fn run(opts: &BranchbenchOptions, progress: Progress<'_>) -> BenchResult<Report> {
    std::fs::create_dir_all(&opts.dir)?;
    let machine = describe(&opts.dir);
    progress(&format!(
        "building the {} seed (twice, to check it is deterministic)",
        opts.scale
    ));
    let seed_path = opts.dir.join(format!("seed-{}.db", opts.scale));
    let again = opts.dir.join(format!("seed-{}-again.db", opts.scale));
    let seed = seed::build(&seed_path, opts.scale, opts.data_seed)?;
    let rebuilt = seed::build(&again, opts.scale, opts.data_seed)?;
    let _ = std::fs::remove_file(&again);
    if rebuilt.sha256 != seed.sha256 {
        return Err(BenchError::Other(format!(
            "the seed generator is not deterministic: two builds hash {} and {}",
            seed.sha256, rebuilt.sha256
        )));
    }
    let header = Header::new(opts, machine, seed.clone());
    let mut workflows = Vec::new();
    for &w in &opts.workflows {
        let mut runs = Vec::new();
        for run in 0..opts.runs.max(1) {
            if opts.runs > 1 {
                progress(&format!("{w}: run {} of {}", run + 1, opts.runs));
            }
            runs.push(run_workflow(opts, w, &seed_path, seed.bytes, progress)?);
        }
        // Report the run with the median wall time, with every run's wall time beside it.
        let walls: Vec<f64> = runs.iter().map(|(r, _)| r.wall_secs).collect();
        runs.sort_by(|a, b| a.0.wall_secs.total_cmp(&b.0.wall_secs));
        let (mut report, outcome) = runs.swap_remove(runs.len() / 2);
        report.wall_runs = walls;
        if let Some(out) = &opts.out {
            report::write_files(out, &header, &report, &outcome)?;
        }
        workflows.push(report);
    }
    if !opts.keep {
        let _ = std::fs::remove_file(&seed_path);
    }
    Ok(Report { header, workflows })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branchbench::sql::SqlVariant;
    use crate::branchbench::tuples::Profile;

    #[test]
    fn the_head_sql_variant_runs_software_dev_with_both_ddl_statements() {
        let mut o = BranchbenchOptions::for_profile(Profile::Full, PathBuf::from("unused"));
        assert_eq!(
            o.tuple(Workflow::SoftwareDev).max_ddl,
            1,
            "the published tuple"
        );
        o.sql = SqlVariant::Head;
        assert_eq!(o.tuple(Workflow::SoftwareDev).max_ddl, 2);
        assert_eq!(
            o.tuple(Workflow::FailureRepro).max_ddl,
            5,
            "other workflows untouched"
        );
        assert!(o.deviations().iter().any(|d| d.contains("HEAD")));
    }
}
