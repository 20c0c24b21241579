//! Dispatch: open the store, run one command, print its result.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use scion_core::{BranchName, BranchRef, CheckpointName, DbName, Scion, Target};
use scion_store::CountingBackend;

use crate::cli::{CheckpointAction, Cli, Command, LeaseCommand};
use crate::cli_bench::BenchCommand;
use crate::output::Printer;
use scion_core::clock::parse_duration;
use scion_core::ops::lifecycle::MoveOptions;

pub fn run(cli: Cli) -> Result<()> {
    let counter: std::cell::RefCell<Option<Arc<CountingBackend>>> = Default::default();
    let open = |cli: &Cli, init: bool| -> Result<Scion> {
        let o = crate::store::open_store(cli, init)?;
        *counter.borrow_mut() = Some(o.counter);
        Ok(o.scion)
    };
    let result = run_command(&cli, &open);
    if cli.stats {
        if let Some(c) = counter.borrow().as_ref() {
            let n = c.counts();
            eprintln!(
                "store requests: {} ({} get, {} ranged get, {} head, {} put, {} list, {} delete); {} read, {} written",
                n.requests(), n.gets, n.ranged_gets, n.heads, n.puts, n.lists, n.deletes,
                crate::output::bytes(n.bytes_read), crate::output::bytes(n.bytes_written)
            );
        }
        let pages = scion_core::PageCache::process().stats();
        if pages.hits + pages.decodes > 0 {
            eprintln!(
                "page cache: {} hits, {} decoded, {} waited for ({:.1}% hit); {} pages, {} of {}",
                pages.hits,
                pages.decodes,
                pages.waits,
                pages.hit_rate() * 100.0,
                pages.pages,
                crate::output::bytes(pages.used_bytes),
                crate::output::bytes(pages.capacity_bytes)
            );
        }
    }
    result
}

fn move_options(m: &crate::cli::MoveArgs) -> Result<MoveOptions> {
    Ok(MoveOptions {
        force: m.force,
        no_backup: m.no_backup,
        backup_ttl: m.backup_ttl.as_deref().map(parse_duration).transpose()?,
    })
}

fn run_command(cli: &Cli, open: &dyn Fn(&Cli, bool) -> Result<Scion>) -> Result<()> {
    let p = Printer { json: cli.json };
    match &cli.command {
        Command::Init { .. } => {
            let s = open(cli, true)?;
            p.init(&s);
        }
        Command::Create { db, from } => {
            let db = DbName::new(db)?;
            let s = open(cli, false)?;
            p.create(&s.create(&db, from.as_deref())?);
        }
        Command::Checkout {
            target,
            force,
            read_only,
            release,
        } => {
            let s = open(cli, false)?;
            if *release {
                let b: BranchRef = target.parse()?;
                p.released(&s.release_checkout(&b, *force)?);
            } else if *read_only {
                let t: Target = target.parse()?;
                p.checkout(&s.checkout_read_only(&t)?);
            } else {
                let t: Target = target.parse()?;
                if let Some(checkpoint) = &t.checkpoint {
                    return Err(scion_core::EngineError::CheckpointTarget {
                        branch: t.branch.to_string(),
                        checkpoint: checkpoint.to_string(),
                    }
                    .into());
                }
                p.checkout(&s.checkout(&t.branch, *force)?);
            }
        }
        Command::Path { target } => {
            let b: BranchRef = target.parse()?;
            let s = open(cli, false)?;
            s.read_ref(&b)?;
            p.path(&b, &s.checkout_path(&b));
        }
        Command::Checkpoint {
            action: Some(CheckpointAction::Delete { target, name }),
            ..
        } => {
            let b: BranchRef = target.parse()?;
            let name = CheckpointName::new(name)?;
            let s = open(cli, false)?;
            s.delete_checkpoint(&b, &name)?;
            p.done(
                &format!("deleted checkpoint {b}@{name}"),
                serde_json::json!({"deleted": format!("{b}@{name}")}),
            );
        }
        Command::Checkpoint {
            action: None,
            target,
            name,
            meta,
        } => {
            let (Some(target), Some(name)) = (target, name) else {
                bail!("usage: scion checkpoint <db[@branch]> <name>");
            };
            let b: BranchRef = target.parse()?;
            let name = CheckpointName::new(name)?;
            let s = open(cli, false)?;
            let meta = meta.iter().cloned().collect();
            p.checkpoint(&s.checkpoint_with_meta(&b, &name, meta)?);
        }
        Command::Fork {
            source,
            branch,
            at,
            ttl,
            meta,
        } => {
            let src: BranchRef = source.parse()?;
            let new = BranchName::new(branch)?;
            let at = at.as_deref().map(CheckpointName::new).transpose()?;
            let ttl = ttl.as_deref().map(parse_duration).transpose()?;
            let s = open(cli, false)?;
            let meta = meta.iter().cloned().collect();
            let report = s.fork_with_meta(&src, &new, at.as_ref(), ttl, meta)?;
            // Told from the file's fingerprint alone: a fork stays O(1) whatever the size.
            if at.is_none() && !cli.json && s.checkout_maybe_written(&src)? {
                eprintln!(
                    "note: {src}'s checkout was written to since its last checkpoint; the fork holds the last checkpointed version, not those changes"
                );
            }
            p.fork(&report);
        }
        Command::Checkpoints { target } => {
            let b: BranchRef = target.parse()?;
            let s = open(cli, false)?;
            let list = s.list_checkpoints(&b)?;
            // The reserved names resolve too (for --at and --to): list them, marked.
            let mut reserved = Vec::new();
            for name in CheckpointName::reserved() {
                let t = Target {
                    branch: b.clone(),
                    checkpoint: Some(name.clone()),
                };
                reserved.push((name, s.resolve(&t)?.version));
            }
            p.checkpoints(&b, &reserved, &list);
        }
        Command::Branches { db } => {
            let db = DbName::new(db)?;
            let s = open(cli, false)?;
            p.branches(&db, &s.branch_statuses(&db)?);
        }
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(*shell, &mut cmd, "scion", &mut std::io::stdout());
        }
        Command::Man => {
            let cmd = <Cli as clap::CommandFactory>::command();
            clap_mangen::Man::new(cmd)
                .render(&mut std::io::stdout())
                .context("writing the man page")?;
        }
        Command::Serve(args) => crate::daemon::serve(cli, args)?,
        Command::Mcp(args) => crate::daemon::mcp(cli, args)?,
        Command::Sql(args) => {
            let s = open(cli, false)?;
            let report = crate::cli_vfs::sql(s, args)?;
            let header = args.header(std::io::IsTerminal::is_terminal(&std::io::stdout()));
            p.rendered(&report, &report.render(args.mode(), header));
            if let Some(line) = report.summary().filter(|_| !cli.json) {
                eprintln!("{line}");
            }
        }
        Command::Shell(args) => {
            let s = open(cli, false)?;
            crate::cli_vfs::shell(s, args)?
        }
        Command::Session(cmd) => crate::daemon::session(cli, cmd)?,
        Command::Token(cmd) => crate::tokens::token(cli, cmd)?,
        Command::Events {
            since,
            follow,
            socket,
        } => crate::daemon::events(cli, *since, *follow, socket)?,
        Command::Config {
            page_compression,
            history_retention,
        } => {
            let retention = history_retention
                .as_deref()
                .map(parse_duration)
                .transpose()?;
            let s = open(cli, false)?;
            let change = page_compression
                .map(|c| s.set_page_compression(c))
                .transpose()?;
            let retention_change = retention
                .map(|r| s.set_history_retention(r).map(|before| (before, r)))
                .transpose()?;
            p.config(&s, change, retention_change)?;
        }
        Command::Merge(args) => crate::cli_merge::merge(&p, &open(cli, false)?, args)?,
        Command::Remote(cmd) => crate::cli_remote::remote(&p, &open(cli, false)?, cmd)?,
        Command::Push(args) => crate::cli_remote::push(&p, &open(cli, false)?, args)?,
        Command::Pull(args) => crate::cli_remote::pull(&p, &open(cli, false)?, args)?,
        Command::Clone(args) => crate::cli_remote::clone(&p, cli.store.as_deref(), args)?,
        Command::Ui(args) => crate::ui::ui(cli, args)?,
        Command::Log(args) => crate::cli_history::log(&p, &open(cli, false)?, args)?,
        Command::Undo(args) => crate::cli_history::undo(&p, &open(cli, false)?, args)?,
        Command::Restore(args) => crate::cli_history::restore(&p, &open(cli, false)?, args)?,
        Command::Status => {
            let s = open(cli, false)?;
            p.status(&s.status()?);
        }
        Command::Bench(BenchCommand::Fork(run)) => {
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
        Command::Bench(BenchCommand::Vfs(run)) => {
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
        Command::Bench(BenchCommand::Merge(run)) => {
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
        Command::Bench(BenchCommand::Graph(args)) => {
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
        Command::Bench(BenchCommand::Remote(args)) => {
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
        Command::Bench(BenchCommand::Pytest(args)) => {
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
        Command::Bench(BenchCommand::Capture(args)) => {
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
        Command::Bench(BenchCommand::Live(run)) => {
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
        Command::Bench(BenchCommand::Branchbench(args)) => {
            let opts = branchbench_options(args)?;
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = scion_bench::branchbench::run(&opts, &mut progress);
            if args.dir.is_none() && !args.keep {
                let _ = std::fs::remove_dir_all(&opts.dir);
            }
            let report = report.map_err(|e| anyhow::anyhow!("{e}"))?;
            p.rendered(&report, &report.render());
        }
        Command::Bench(BenchCommand::Isolation {
            run,
            postgres,
            python,
        }) => {
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
        Command::Rollback { target, to, moving } => {
            let b: BranchRef = target.parse()?;
            let to = CheckpointName::new(to)?;
            let opts = move_options(moving)?;
            let s = open(cli, false)?;
            p.moved("rolled back", &s.rollback(&b, &to, &opts)?);
        }
        Command::Promote {
            source,
            onto,
            moving,
        } => {
            let src: BranchRef = source.parse()?;
            let onto = crate::branch_arg::branch_of(&src.db, onto)?;
            let opts = move_options(moving)?;
            let s = open(cli, false)?;
            p.moved("promoted", &s.promote(&src, &onto, &opts)?);
        }
        Command::Destroy { target, force } => {
            let b: BranchRef = target.parse()?;
            let s = open(cli, false)?;
            p.destroyed(&s.destroy(&b, *force)?);
        }
        Command::Protect { target } | Command::Unprotect { target } => {
            let protect = matches!(cli.command, Command::Protect { .. });
            let b: BranchRef = target.parse()?;
            let s = open(cli, false)?;
            s.set_protected(&b, protect)?;
            let word = if protect { "protected" } else { "unprotected" };
            p.done(
                &format!("{word} {b}"),
                serde_json::json!({"branch": b.to_string(), "protected": protect}),
            );
        }
        Command::Touch { target, ttl } => {
            let b: BranchRef = target.parse()?;
            let ttl = match ttl.as_deref() {
                None => None,
                Some("none") => Some(None),
                Some(d) => Some(Some(parse_duration(d)?)),
            };
            let s = open(cli, false)?;
            let r = s.touch(&b, ttl)?;
            let ttl_text = r
                .ttl_secs
                .map(scion_core::clock::format_duration)
                .unwrap_or_else(|| "none".into());
            p.done(
                &format!("touched {b} (ttl {ttl_text})"),
                serde_json::json!({"branch": b.to_string(), "touched_at": r.touched_at, "ttl_secs": r.ttl_secs}),
            );
        }
        Command::Lease(LeaseCommand::List) => {
            let s = open(cli, false)?;
            p.leases(&s.lease_list()?);
        }
        Command::Lease(LeaseCommand::Acquire { target, ttl }) => {
            let b: BranchRef = target.parse()?;
            if cli.holder.is_none() {
                bail!(
                    "name the holder with --holder or SCION_HOLDER: a lease outlives this process, \
                     and only commands run as that holder may then move {b}"
                );
            }
            let ttl = parse_duration(ttl)?;
            let s = open(cli, false)?;
            let l = s.lease_acquire(&b, ttl)?;
            p.done(
                &format!(
                    "leased {} to {} until {} (epoch {})",
                    l.branch, l.holder, l.expires, l.epoch
                ),
                serde_json::to_value(&l)?,
            );
        }
        Command::Lease(LeaseCommand::Release { target, force }) => {
            let b: BranchRef = target.parse()?;
            let s = open(cli, false)?;
            match s.lease_release(&b, *force)? {
                Some(l) => p.done(
                    &format!("released {b}'s lease (held by {})", l.holder),
                    serde_json::to_value(&l)?,
                ),
                None => p.done(
                    &format!("{b} had no lease"),
                    serde_json::json!({"branch": b.to_string(), "released": null}),
                ),
            }
        }
        Command::Verify => {
            let s = open(cli, false)?;
            let r = s.verify()?;
            p.verify(&r);
            if !r.ok() {
                return Err(scion_core::EngineError::VerifyFailed {
                    problems: r.problems.len(),
                }
                .into());
            }
        }
        Command::Gc { grace, force } => {
            let grace = parse_duration(grace)?;
            let s = open(cli, false)?;
            p.gc(&s.gc(grace, *force)?);
        }
        Command::Compact {
            target,
            scattered,
            force,
        } => {
            use scion_core::ops::compact::CompactScope;
            let b: BranchRef = target.parse()?;
            let s = open(cli, false)?;
            let scope = if *scattered {
                CompactScope::Scattered
            } else {
                CompactScope::All
            };
            let r = s.compact_scope(&b, *force, scope)?;
            let text = if r.pages_rewritten == 0 {
                format!(
                    "{} is not fragmented: no page lies in a small segment ({} in {}); nothing written",
                    r.branch,
                    crate::output::plural(r.pages as u64, "page"),
                    crate::output::plural(r.segments_before as u64, "segment"),
                )
            } else {
                format!(
                    "compacted {} to version {} ({} of {} rewritten, from {}, {} written)",
                    r.branch,
                    r.version,
                    crate::output::plural(r.pages_rewritten as u64, "page"),
                    r.pages,
                    crate::output::plural(r.segments_before as u64, "segment"),
                    crate::output::bytes(r.store_bytes_written)
                )
            };
            p.done(&text, serde_json::to_value(&r)?);
        }
        Command::Diff {
            left,
            right,
            table,
            sql,
            rows,
            limit,
            working,
        } => {
            let (l, r): (Target, Target) = (left.parse()?, right.parse()?);
            let s = open(cli, false)?;
            let opts = scion_core::diff::DiffOptions {
                table: table.clone(),
                sql: *sql,
                rows: rows.then_some(*limit),
            };
            let report = match working {
                true => s.diff_working(&l, &r, &opts)?,
                false => s.diff(&l, &r, &opts)?,
            };
            p.diff(&report);
        }
        Command::Export { target, out, force } => {
            let t: Target = target.parse()?;
            let s = open(cli, false)?;
            p.export(&s.export(&t, out, *force)?);
        }
    }
    Ok(())
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
