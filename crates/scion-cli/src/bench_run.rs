//! `scion bench`: each benchmark's options from the command line, its run, its report.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::cli_bench::{BenchCommand, BenchRunArgs};
use crate::output::Printer;

pub fn bench(p: &Printer, cmd: &BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Fork(run) => {
            let dir = bench_dir(&run.dir);
            let mut opts = if run.quick {
                scion_bench::fork::ForkBenchOptions::quick(dir.clone())
            } else {
                scion_bench::fork::ForkBenchOptions::full(dir.clone())
            };
            run.override_sizes(&mut opts.sizes_mib);
            opts.runs = run.runs.unwrap_or(opts.runs).max(1);
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = scion_bench::fork::run(&opts, &mut progress);
            let _ = std::fs::remove_dir_all(&dir);
            p.bench_fork(&report.map_err(|e| anyhow::anyhow!("{e}"))?);
        }
        BenchCommand::Vfs(run) => {
            let dir = bench_dir(&run.dir);
            let mut opts = if run.quick {
                scion_bench::vfs::VfsOptions::quick(dir.clone())
            } else {
                scion_bench::vfs::VfsOptions::full(dir.clone())
            };
            run.override_sizes(&mut opts.sizes_mib);
            opts.runs = run.runs.unwrap_or(opts.runs).max(1);
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = scion_bench::vfs::run(&opts, &mut progress);
            let _ = std::fs::remove_dir_all(&dir);
            let report = report.map_err(|e| anyhow::anyhow!("{e}"))?;
            p.rendered(&report, &report.render());
        }
        BenchCommand::Merge(run) => {
            let dir = bench_dir(&run.dir);
            let mut opts = if run.quick {
                scion_bench::merge::MergeBenchOptions::quick(dir.clone())
            } else {
                scion_bench::merge::MergeBenchOptions::full(dir.clone())
            };
            run.override_sizes(&mut opts.sizes_mib);
            opts.runs = run.runs.unwrap_or(opts.runs).max(1);
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = scion_bench::merge::run(&opts, &mut progress);
            let _ = std::fs::remove_dir_all(&dir);
            let report = report.map_err(|e| anyhow::anyhow!("{e}"))?;
            p.rendered(&report, &report.render());
        }
        BenchCommand::Graph(args) => {
            let dir = bench_dir(&args.run.dir);
            let mut opts = if args.run.quick {
                scion_bench::graph::GraphBenchOptions::quick(dir.clone())
            } else {
                scion_bench::graph::GraphBenchOptions::full(dir.clone())
            };
            opts.versions = args.versions.unwrap_or(opts.versions).max(10);
            opts.runs = args.run.runs.unwrap_or(opts.runs).max(1);
            opts.s3 = args.s3.clone();
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = scion_bench::graph::run(&opts, &mut progress);
            let _ = std::fs::remove_dir_all(&dir);
            let report = report.map_err(|e| anyhow::anyhow!("{e}"))?;
            p.rendered(&report, &report.render());
        }
        BenchCommand::Remote(args) => {
            use scion_bench::remote::{run, RemoteBenchOptions};
            let dir = bench_dir(&args.run.dir);
            let mut opts = if args.run.quick {
                RemoteBenchOptions::quick(dir.clone())
            } else {
                RemoteBenchOptions::full(dir.clone())
            };
            args.run.override_sizes(&mut opts.sizes_mib);
            opts.runs = args.run.runs.unwrap_or(opts.runs).max(1);
            opts.s3 = args.s3.clone();
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = run(&opts, &mut progress);
            let _ = std::fs::remove_dir_all(&dir);
            let report = report.map_err(|e| anyhow::anyhow!("{e}"))?;
            p.rendered(&report, &report.render());
        }
        BenchCommand::Pytest(args) => {
            use scion_bench::pytest_suite::{run, PytestBenchOptions};
            let dir = bench_dir(&args.run.dir);
            let scion = std::env::current_exe().context("finding the scion binary")?;
            let python = args.python.clone();
            let mut opts = if args.run.quick {
                PytestBenchOptions::quick(dir.clone(), python, scion)
            } else {
                PytestBenchOptions::full(dir.clone(), python, scion)
            };
            if let Some(&mib) = args.run.sizes.first() {
                opts.seed_mib = mib.max(1);
            }
            opts.tests = args.tests.unwrap_or(opts.tests).max(1);
            opts.runs = args.run.runs.unwrap_or(opts.runs).max(1);
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = run(&opts, &mut progress);
            let _ = std::fs::remove_dir_all(&dir);
            let report = report.map_err(|e| anyhow::anyhow!("{e}"))?;
            p.rendered(&report, &report.render());
        }
        BenchCommand::Capture(args) => {
            let keep = args.dir.is_some();
            let dir = bench_dir(&args.dir);
            let opts = scion_bench::torture::TortureOptions {
                dir: dir.clone(),
                scion: std::env::current_exe().context("finding the scion binary")?,
                rounds: args.rounds,
                seed: args.seed,
            };
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = scion_bench::torture::run(&opts, &mut progress);
            let passed = report.as_ref().is_ok_and(|r| r.passed());
            // A failed run keeps its files (store, checkout, daemon log) to look at.
            if !keep && passed {
                let _ = std::fs::remove_dir_all(&dir);
            }
            let report = report.map_err(|e| {
                anyhow::anyhow!("{e} (seed {}; files kept in {})", args.seed, dir.display())
            })?;
            p.rendered(&report, &report.render());
            if !passed {
                bail!(
                    "capture torture failed (seed {}); its files are in {}",
                    args.seed,
                    dir.display()
                );
            }
        }
        BenchCommand::Live(run) => {
            let dir = bench_dir(&run.dir);
            let exe = std::env::current_exe().context("finding the scion binary")?;
            let mut opts = if run.quick {
                scion_bench::live::LiveOptions::quick(dir.clone(), exe)
            } else {
                scion_bench::live::LiveOptions::full(dir.clone(), exe)
            };
            run.override_sizes(&mut opts.sizes_mib);
            opts.runs = run.runs.unwrap_or(opts.runs).max(1);
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = scion_bench::live::run(&opts, &mut progress);
            let _ = std::fs::remove_dir_all(&dir);
            let report = report.map_err(|e| anyhow::anyhow!("{e}"))?;
            p.rendered(&report, &report.render());
        }
        BenchCommand::Branchbench(args) => {
            let opts = branchbench_options(args)?;
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = scion_bench::branchbench::run(&opts, &mut progress);
            if args.dir.is_none() && !args.keep {
                let _ = std::fs::remove_dir_all(&opts.dir);
            }
            let report = report.map_err(|e| anyhow::anyhow!("{e}"))?;
            p.rendered(&report, &report.render());
        }
        BenchCommand::Isolation {
            run,
            postgres,
            python,
        } => {
            let dir = bench_dir(&run.dir);
            let mut opts = if run.quick {
                scion_bench::isolation::IsolationOptions::quick(dir.clone(), postgres.clone())
            } else {
                scion_bench::isolation::IsolationOptions::full(dir.clone(), postgres.clone())
            };
            run.override_sizes(&mut opts.sizes_mib);
            opts.scion_bin = std::env::current_exe().ok();
            opts.python = python.clone();
            opts.runs = run.runs.unwrap_or(opts.runs).max(1);
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = scion_bench::isolation::run(&opts, &mut progress);
            let _ = std::fs::remove_dir_all(&dir);
            let report = report.map_err(|e| anyhow::anyhow!("{e}"))?;
            p.rendered(&report, &report.render());
        }
    }
    Ok(())
}

impl BenchRunArgs {
    /// `--sizes`, where given, in place of a bench's own sizes.
    pub fn override_sizes(&self, sizes_mib: &mut Vec<u64>) {
        if !self.sizes.is_empty() {
            *sizes_mib = self.sizes.clone();
        }
    }
}

/// Where a benchmark works: the given directory, or a fresh one under the system temp dir.
fn bench_dir(dir: &Option<PathBuf>) -> PathBuf {
    match dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("scion-bench-{}", std::process::id())),
    }
}

fn branchbench_options(
    a: &crate::cli_bench::BranchbenchArgs,
) -> Result<scion_bench::branchbench::BranchbenchOptions> {
    use scion_bench::branchbench::BranchbenchOptions;
    let e = |m: String| anyhow::anyhow!(m);
    let profile = a.profile.parse().map_err(e)?;
    let mut o = BranchbenchOptions::for_profile(profile, bench_dir(&a.dir));
    o.connect = match a.connect.as_str() {
        "vfs" => scion_bench::branchbench::Connect::Vfs,
        "copy" => scion_bench::branchbench::Connect::Copy,
        _ => scion_bench::branchbench::Connect::Checkout,
    };
    if !a.workflows.is_empty() {
        o.workflows = a
            .workflows
            .iter()
            .map(|w| w.parse())
            .collect::<Result<_, _>>()
            .map_err(e)?;
    }
    if let Some(s) = &a.scale {
        o.scale = s.parse().map_err(e)?;
    }
    match a.concurrency.as_deref() {
        None => {}
        Some("all") => o.concurrency = None,
        Some(n) => match n.parse::<usize>() {
            Ok(n) if n >= 1 => o.concurrency = Some(n),
            _ => bail!("--concurrency takes a number >= 1 or \"all\", not {n:?}"),
        },
    }
    if let Some(secs) = a.max_runtime {
        o.max_runtime = Some(std::time::Duration::from_secs(secs));
    }
    o.rng_seed = a.rng_seed;
    o.data_seed = a.data_seed;
    o.parent_rule = a.parent_rule.parse().map_err(e)?;
    o.depth_rule = a.depth_rule.parse().map_err(e)?;
    o.sql = a.sql.parse().map_err(e)?;
    o.live_cap = a
        .live_cap
        .map(|n| (n, std::time::Duration::from_secs(a.slot_timeout)));
    o.deterministic |= a.deterministic;
    o.keep = a.keep;
    o.drop_checkouts = a.drop_checkouts;
    o.runs = a.runs.max(1);
    o.gc_after = !a.no_gc;
    o.out = a.out.clone();
    Ok(o)
}
