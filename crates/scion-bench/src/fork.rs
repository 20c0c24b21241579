//! `scion bench fork`: the costs docs/benchmarks.md budgets, measured on generated databases:
//! fork latency and size across database sizes, bytes per single-row commit, checkpoints
//! of clean and dirty checkouts, materializing against `cp`, and re-checkout.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::Connection;
use scion_core::{BranchRef, CheckoutAction, ClonePolicy, Scion, ScionOptions};
use scion_store::{Backend, CountingBackend, LocalBackend};
use serde::Serialize;

use crate::checkout_vs_cp::{remove_checkout, AgainstCp};
use crate::datagen::{orders_db, SplitMix64};
use crate::machine::{describe, Machine};
use crate::stats::{measure, measure_interleaved, Summary};
use crate::{br, BenchError, BenchResult, Progress};

#[derive(Debug, Clone)]
pub struct ForkBenchOptions {
    pub dir: PathBuf,
    pub sizes_mib: Vec<u64>,
    pub runs: usize,
    pub commits: usize,
    pub commit_size_mib: u64,
}

impl ForkBenchOptions {
    pub fn full(dir: PathBuf) -> Self {
        Self {
            dir,
            sizes_mib: vec![1, 100, 1024],
            runs: 5,
            commits: 32,
            commit_size_mib: 100,
        }
    }
    pub fn quick(dir: PathBuf) -> Self {
        Self {
            dir,
            sizes_mib: vec![1, 8],
            runs: 3,
            commits: 8,
            commit_size_mib: 8,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ForkAtSize {
    pub size_mib: u64,
    pub db_bytes: u64,
    pub fork_at_head: Summary,
    /// A fork as `scion fork` runs it (with its O(1) look at the source's checkout) while
    /// the source is checked out: the goal is <= 1.2x `fork_at_head`.
    pub fork_with_checkout: Summary,
    pub fork_at_checkpoint: Summary,
    pub objects_per_fork: u64,
    pub bytes_per_fork: u64,
    pub objects_for_100_forks: u64,
    pub bytes_for_100_forks: u64,
    pub rollback: MoveCost,
    pub promote: MoveCost,
}

/// What one rollback or promote costs: time, and objects and bytes written to the store.
#[derive(Debug, Clone, Serialize)]
pub struct MoveCost {
    pub time: Summary,
    pub objects: u64,
    pub bytes: u64,
    /// Of `bytes`, the head-history entries the moved ref carries (at most 16 of them).
    pub history_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CommitCost {
    pub size_mib: u64,
    pub commits: usize,
    /// Growth of the store's objects (segments + checkpoint objects; refs are rewritten in place).
    pub store_bytes_added_per_commit: f64,
    pub store_bytes_added_max: u64,
    pub segment_bytes_per_commit: f64,
    pub checkpoint_object_bytes: u64,
    pub pages_changed_per_commit: f64,
    /// Each single-row checkpoint, timed alone (the row update and the size listing not).
    pub time: Summary,
}

#[derive(Debug, Clone, Serialize)]
pub struct CleanCheckpoint {
    pub time: Summary,
    pub data_objects_written: u64,
    pub objects_written_per_checkpoint: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct DirtyCheckpoint {
    pub size_mib: u64,
    pub time: Summary,
    pub read_and_hash_gb_per_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ForkBenchReport {
    pub machine: Machine,
    pub forks: Vec<ForkAtSize>,
    /// Fork median at the largest size over the smallest, the two timed in alternation
    /// (budget: <= 1.5).
    pub fork_time_ratio: f64,
    pub commit_cost: CommitCost,
    pub clean_checkpoint: CleanCheckpoint,
    pub dirty_checkpoint: DirtyCheckpoint,
    /// Checkouts with nothing local and exports, beside `cp`, at the largest size.
    pub against_cp: AgainstCp,
    pub recheckout_clean: Summary,
    /// At the commit size and at the largest size.
    pub diffs: Vec<crate::diffbench::DiffCost>,
    /// At the largest size.
    pub refresh: crate::refresh::RefreshCost,
}

struct Bed {
    dir: PathBuf,
    counter: Arc<CountingBackend>,
    scion: Scion,
    db_bytes: u64,
}

fn bed(root: &Path, mib: u64) -> BenchResult<Bed> {
    let dir = root.join(format!("size-{mib}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let src = dir.join("src.db");
    let db_bytes = orders_db(&src, mib, 1)?;
    let counter = Arc::new(CountingBackend::new(Arc::new(
        LocalBackend::open(dir.join("store")).map_err(|e| BenchError::Other(e.to_string()))?,
    )));
    let scion = Scion::init(
        counter.clone(),
        "bench",
        ScionOptions::new(dir.join("store/checkouts"), ClonePolicy::Auto),
        Default::default(),
    )?;
    scion.engine().create(&"db".parse()?, Some(&src))?;
    crate::stats::settle_disk();
    Ok(Bed {
        dir,
        counter,
        scion,
        db_bytes,
    })
}

fn store_object_bytes(b: &dyn Backend) -> BenchResult<u64> {
    let mut total = 0;
    for prefix in ["segments/", "checkpoints/", "refs/"] {
        total += b
            .list(prefix)
            .map_err(|e| BenchError::Other(e.to_string()))?
            .iter()
            .map(|m| m.size)
            .sum::<u64>();
    }
    Ok(total)
}

fn update_one_row(path: &Path, rng: &mut SplitMix64, rows: u64) -> BenchResult<()> {
    let c = Connection::open(path)?;
    c.execute(
        "UPDATE orders SET amount = amount + 1 WHERE id = ?1",
        [1 + rng.below(rows) as i64],
    )?;
    Ok(())
}

pub fn run(opts: &ForkBenchOptions, progress: Progress<'_>) -> BenchResult<ForkBenchReport> {
    std::fs::create_dir_all(&opts.dir)?;
    let machine = describe(&opts.dir);
    let mut forks = Vec::new();
    let mut largest: Option<Bed> = None;
    let mut smallest: Option<Bed> = None;
    let mut commit_bed: Option<Bed> = None;
    let smallest_mib = *opts.sizes_mib.iter().min().unwrap();
    let largest_mib = *opts.sizes_mib.iter().max().unwrap();
    for &mib in &opts.sizes_mib {
        progress(&format!("generating and importing a {mib} MiB database"));
        let b = bed(&opts.dir, mib)?;
        let main = br("db")?;
        progress(&format!("forking at {mib} MiB"));
        // Forks from a branch without a checkout and from one with a checkout, timed in
        // alternation: both sources name the same version, so the ratio is the cost of the
        // look at the checkout.
        let plain = br("db@plain")?;
        b.scion
            .engine()
            .fork(&main, &"plain".parse()?, Default::default())?;
        let source = b.scion.checkout(&main, false)?.path;
        // The checkout's writeback must not land in the timed forks' fsyncs.
        crate::stats::settle_disk();
        let (fork_at_head, fork_with_checkout) = measure_interleaved(
            opts.runs,
            |i| -> BenchResult<()> {
                b.scion
                    .engine()
                    .fork(&plain, &format!("head-{i}").parse()?, Default::default())?;
                Ok(())
            },
            |i| -> BenchResult<()> {
                b.scion
                    .engine()
                    .fork(&main, &format!("co-{i}").parse()?, Default::default())?;
                b.scion.checkout_maybe_written(&main)?;
                Ok(())
            },
        )?;
        remove_checkout(&source);
        let before = b.counter.counts();
        b.scion
            .engine()
            .fork(&main, &"one".parse()?, Default::default())?;
        let one = b.counter.counts();
        for i in 0..100 {
            b.scion
                .engine()
                .fork(&main, &format!("many-{i}").parse()?, Default::default())?;
        }
        let many = b.counter.counts();
        b.scion
            .checkpoint(&main, &"c0".parse()?, Default::default())?;
        let c0: scion_core::CheckpointName = "c0".parse()?;
        let fork_at_checkpoint = measure(opts.runs, |i| {
            b.scion.engine().fork(
                &main,
                &format!("cp-{i}").parse()?,
                scion_core::ForkOptions {
                    at: Some(c0.clone()),
                    ..Default::default()
                },
            )
        })?;
        // Rollback and promote: pointer moves, each with its safety fork.
        let rb = br("db@rb")?;
        b.scion
            .engine()
            .fork(&main, &"rb".parse()?, Default::default())?;
        b.scion
            .engine()
            .fork(&main, &"target".parse()?, Default::default())?;
        let count = |f: &mut dyn FnMut() -> BenchResult<()>| -> BenchResult<(u64, u64)> {
            let before = b.counter.counts();
            f()?;
            let after = b.counter.counts();
            Ok((
                after.puts - before.puts,
                after.bytes_written - before.bytes_written,
            ))
        };
        let opts_move = scion_core::ops::lifecycle::MoveOptions::default();
        let (rb_objects, rb_bytes) = count(&mut || {
            b.scion.rollback(&rb, &"fork".parse()?, &opts_move)?;
            Ok(())
        })?;
        let history_bytes = |b: &Bed, branch: &BranchRef| -> BenchResult<u64> {
            let (r, _) = b.scion.engine().read_ref(branch)?;
            Ok(serde_json::to_vec(&r.history).map_or(0, |v| v.len() as u64))
        };
        let rb_history = history_bytes(&b, &rb)?;
        let rollback_time = measure(opts.runs, |_| {
            b.scion.rollback(&rb, &"fork".parse()?, &opts_move)
        })?;
        let (pr_objects, pr_bytes) = count(&mut || {
            b.scion.promote(&rb, &"target".parse()?, &opts_move)?;
            Ok(())
        })?;
        let pr_history = history_bytes(&b, &br("db@target")?)?;
        let promote_time = measure(opts.runs, |_| {
            b.scion.promote(&rb, &"target".parse()?, &opts_move)
        })?;
        forks.push(ForkAtSize {
            size_mib: mib,
            db_bytes: b.db_bytes,
            fork_at_head,
            fork_with_checkout,
            fork_at_checkpoint,
            objects_per_fork: one.puts - before.puts,
            bytes_per_fork: one.bytes_written - before.bytes_written,
            objects_for_100_forks: many.puts - one.puts,
            bytes_for_100_forks: many.bytes_written - one.bytes_written,
            rollback: MoveCost {
                time: rollback_time,
                objects: rb_objects,
                bytes: rb_bytes,
                history_bytes: rb_history,
            },
            promote: MoveCost {
                time: promote_time,
                objects: pr_objects,
                bytes: pr_bytes,
                history_bytes: pr_history,
            },
        });
        if mib == opts.commit_size_mib {
            commit_bed = Some(b);
        } else if mib == largest_mib {
            largest = Some(b);
        } else if mib == smallest_mib {
            smallest = Some(b);
        } else {
            let _ = std::fs::remove_dir_all(&b.dir);
        }
    }
    let commit_bed = match commit_bed {
        Some(b) => b,
        None => {
            progress(&format!(
                "generating a {} MiB database for commit costs",
                opts.commit_size_mib
            ));
            bed(&opts.dir, opts.commit_size_mib)?
        }
    };
    // The size ratio from forks at the smallest and the largest size timed in alternation:
    // a fork's time is its one fsync, and the per-size rows above, measured minutes apart,
    // differ by whatever else the disk was writing then.
    let commit_sized = |mib: u64| (mib == opts.commit_size_mib).then_some(&commit_bed);
    let fork_time_ratio = match (
        smallest.as_ref().or(commit_sized(smallest_mib)),
        largest.as_ref().or(commit_sized(largest_mib)),
    ) {
        (Some(small), Some(large)) if smallest_mib != largest_mib => {
            progress(&format!(
                "forking at {smallest_mib} and {largest_mib} MiB in alternation"
            ));
            crate::stats::settle_disk();
            let fork = |b: &Bed, i: usize| -> BenchResult<()> {
                b.scion.engine().fork(
                    &br("db@plain")?,
                    &format!("ratio-{i}").parse()?,
                    Default::default(),
                )?;
                Ok(())
            };
            let (small, large) =
                measure_interleaved(opts.runs, |i| fork(small, i), |i| fork(large, i))?;
            large.median_ms / small.median_ms
        }
        // Every size keeps its bed up to here, so only a run of a single size ends up here:
        // nothing to compare.
        _ => 1.0,
    };
    if let Some(b) = smallest {
        let _ = std::fs::remove_dir_all(&b.dir);
    }

    // Bytes per single-row commit.
    progress(&format!(
        "{} single-row commits at {} MiB",
        opts.commits, opts.commit_size_mib
    ));
    let b = &commit_bed;
    let main = br("db")?;
    let path = b.scion.checkout(&main, false)?.path;
    let rows = Connection::open(&path)?
        .query_row("SELECT max(id) FROM orders", [], |r| r.get::<_, i64>(0))? as u64;
    let mut rng = SplitMix64(7);
    let mut added = Vec::new();
    let mut segment_bytes = 0u64;
    let mut pages = 0u64;
    let mut checkpoint_object_bytes = 0;
    let mut times = Vec::with_capacity(opts.commits);
    for i in 0..opts.commits {
        update_one_row(&path, &mut rng, rows)?;
        let size_before = store_object_bytes(b.scion.engine().backend().as_ref())?;
        let name = format!("s{i}").parse()?;
        let started = std::time::Instant::now();
        let report = b.scion.checkpoint(&main, &name, Default::default())?;
        times.push(started.elapsed());
        let size_after = store_object_bytes(b.scion.engine().backend().as_ref())?;
        added.push(size_after.saturating_sub(size_before));
        segment_bytes += report.store.bytes;
        pages += report.pages_changed;
        checkpoint_object_bytes = b
            .scion
            .engine()
            .backend()
            .head(&format!("checkpoints/db/main/s{i}"))
            .map(|m| m.size)
            .unwrap_or(0);
    }
    let commit_cost = CommitCost {
        size_mib: opts.commit_size_mib,
        commits: opts.commits,
        store_bytes_added_per_commit: added.iter().sum::<u64>() as f64 / opts.commits as f64,
        store_bytes_added_max: added.iter().copied().max().unwrap_or(0),
        segment_bytes_per_commit: segment_bytes as f64 / opts.commits as f64,
        checkpoint_object_bytes,
        pages_changed_per_commit: pages as f64 / opts.commits as f64,
        time: Summary::of(&times),
    };

    // Checkpoint of a clean checkout. A file modified less than a second before it is
    // fingerprinted is always re-hashed (the racily-clean rule), so the steady state this
    // measures starts a second after the last write.
    progress("checkpoints of a clean checkout (after the 1 s racily-clean window)");
    b.scion
        .checkpoint(&main, &"settle".parse()?, Default::default())?;
    std::thread::sleep(std::time::Duration::from_millis(1100));
    b.scion
        .checkpoint(&main, &"settled".parse()?, Default::default())?;
    let segments = |b: &Bed| -> BenchResult<u64> {
        Ok(b.scion
            .engine()
            .backend()
            .list("segments/")
            .map_err(|e| BenchError::Other(e.to_string()))?
            .len() as u64)
    };
    let segments_before = segments(b)?;
    let before = b.counter.counts();
    let time = measure(opts.runs, |i| {
        b.scion
            .checkpoint(&main, &format!("clean-{i}").parse()?, Default::default())
    })?;
    let after = b.counter.counts();
    let clean_checkpoint = CleanCheckpoint {
        time,
        data_objects_written: segments(b)? - segments_before,
        objects_written_per_checkpoint: (after.puts - before.puts) / (opts.runs as u64 + 1),
    };
    let recheckout_clean = measure(opts.runs, |_| {
        let r = b.scion.checkout(&main, false)?;
        if r.action != CheckoutAction::Reused {
            return Err(BenchError::Other("a clean checkout was not reused".into()));
        }
        Ok(())
    })?;

    // Dirty checkpoint and materialize vs cp at the largest size.
    let big = largest.as_ref().unwrap_or(&commit_bed);
    let big_mib = *opts.sizes_mib.iter().max().unwrap();
    progress(&format!("dirty checkpoints at {big_mib} MiB"));
    let big_path = big.scion.checkout(&main, false)?.path;
    let big_rows =
        Connection::open(&big_path)?
            .query_row("SELECT max(id) FROM orders", [], |r| r.get::<_, i64>(0))? as u64;
    let time = measure(opts.runs, |i| -> BenchResult<()> {
        update_one_row(&big_path, &mut rng, big_rows)?;
        big.scion.checkpoint(
            &main,
            &format!("dirty-{}", i.min(999_999)).parse()?,
            Default::default(),
        )?;
        Ok(())
    })?;
    let dirty_checkpoint = DirtyCheckpoint {
        size_mib: big_mib,
        read_and_hash_gb_per_s: big.db_bytes as f64 / 1e9 / (time.median_ms / 1000.0),
        time,
    };

    let against_cp = crate::checkout_vs_cp::measure(
        &big.scion,
        "db",
        &big.dir.join("src.db"),
        big_mib,
        opts.runs,
        &big.dir,
        progress,
    )?;
    // Diffs of two versions a few pages apart, at the commit size and the largest.
    let mut diffs = vec![crate::diffbench::diff_cost(
        &commit_bed.scion,
        opts.commit_size_mib,
        opts.runs,
        progress,
    )?];
    if let Some(b) = &largest {
        diffs.push(crate::diffbench::diff_cost(
            &b.scion, big_mib, opts.runs, progress,
        )?);
    }
    let refresh =
        crate::refresh::refresh_cost(&big.scion, big_mib, opts.runs, &opts.dir, progress)?;
    for b in [largest, Some(commit_bed)].into_iter().flatten() {
        let _ = std::fs::remove_dir_all(&b.dir);
    }
    Ok(ForkBenchReport {
        machine,
        forks,
        fork_time_ratio,
        commit_cost,
        clean_checkpoint,
        dirty_checkpoint,
        against_cp,
        recheckout_clean,
        diffs,
        refresh,
    })
}
