//! Dispatch: open the store, run one command, print its result.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use scion_core::{
    BranchName, BranchRef, CheckpointName, ClonePolicy, DbName, Scion, ScionOptions, Target,
};
use scion_store::{
    Backend, CountingBackend, LocalBackend, S3Backend, S3Config, S3Location, SegmentCache,
};

use crate::cli::{BenchCommand, CheckpointAction, Cli, Command, LeaseCommand};
use crate::output::Printer;
use scion_core::clock::parse_duration;
use scion_core::ops::lifecycle::MoveOptions;

/// Resolve a store spec to a local directory.
/// Where a store lives, from `--store` / `SCION_STORE`.
enum StoreSpec {
    Local(PathBuf),
    S3(S3Location),
}

/// Relative paths are made absolute so that printed checkout paths work from anywhere.
fn parse_spec(spec: &str) -> Result<StoreSpec> {
    if spec.starts_with("s3://") {
        return S3Location::parse(spec).map(StoreSpec::S3).ok_or_else(|| {
            anyhow::anyhow!("invalid S3 store {spec:?}: expected s3://bucket[/prefix]")
        });
    }
    let path = if let Some(rest) = spec.strip_prefix("file://") {
        PathBuf::from(rest)
    } else if spec.contains("://") {
        bail!(
            "unsupported store {spec:?}: use a directory path, file:///path or s3://bucket/prefix"
        );
    } else {
        PathBuf::from(spec)
    };
    Ok(StoreSpec::Local(std::path::absolute(&path).with_context(
        || format!("resolving store path {spec:?}"),
    )?))
}

/// The local cache directory of a remote store: `SCION_CHECKOUTS`, or the user's cache
/// directory keyed by the store's identity.
fn remote_cache_dir(identity: &str) -> Result<PathBuf> {
    if let Ok(dir) = std::env::var("SCION_CHECKOUTS") {
        if !dir.is_empty() {
            return Ok(std::path::absolute(dir)?);
        }
    }
    let base = std::env::var("XDG_CACHE_HOME")
        .ok()
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var("HOME")
                .ok()
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .ok_or_else(|| anyhow::anyhow!("no cache directory: set SCION_CHECKOUTS"))?;
    // FNV-1a: stable across builds, so the cache survives upgrades.
    let hash = identity.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    Ok(base
        .join("scion")
        .join(format!("{hash:016x}"))
        .join("checkouts"))
}

const PROBE_VALID: std::time::Duration = std::time::Duration::from_secs(3600);

/// The clock offset of a probe this machine ran against the store in the last hour.
fn recent_probe(path: &std::path::Path) -> Option<i64> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(v["probed_at_unix"].as_u64()?);
    let age = std::time::SystemTime::now().duration_since(at).ok()?;
    (age < PROBE_VALID)
        .then(|| v["clock_offset_ms"].as_i64())
        .flatten()
}

fn remember_probe(path: &std::path::Path, offset: i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let body = serde_json::json!({"probed_at_unix": now, "clock_offset_ms": offset}).to_string();
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(path, body);
}

/// The opened store and the request counter around it (for `--stats`).
struct Opened {
    scion: Scion,
    counter: Arc<CountingBackend>,
}

fn open_store(cli: &Cli, init: bool) -> Result<Opened> {
    let policy: ClonePolicy = cli.clone.parse().map_err(anyhow::Error::msg)?;
    // The counter sits right on the store, so --stats counts real requests (a segment
    // served from the local cache is not one).
    let (backend, counter, location, checkouts, store_dir): (
        Arc<dyn Backend>,
        Arc<CountingBackend>,
        String,
        PathBuf,
        Option<PathBuf>,
    ) = match parse_spec(&cli.store)? {
        StoreSpec::Local(dir) => {
            let location = dir.display().to_string();
            if !init && !dir.join(scion_core::MANIFEST_KEY).exists() {
                return Err(scion_core::CoreError::NotInitialized { location }.into());
            }
            let b =
                LocalBackend::open(&dir).with_context(|| format!("opening store {location}"))?;
            let counter = Arc::new(CountingBackend::new(Arc::new(b)));
            let checkouts = dir.join("checkouts");
            (counter.clone(), counter, location, checkouts, Some(dir))
        }
        StoreSpec::S3(loc) => {
            let location = format!("s3://{}/{}", loc.bucket, loc.prefix);
            let s3 = Arc::new(
                S3Backend::connect(loc, &S3Config::from_env())
                    .with_context(|| format!("connecting to {location}"))?,
            );
            let counter = Arc::new(CountingBackend::new(s3.clone()));
            let checkouts = remote_cache_dir(&s3.identity())?;
            // Refuse a store that does not enforce conditional writes, and learn its
            // clock. The proof is remembered for an hour per store in the local cache.
            let proof = checkouts.join(".probe.json");
            match recent_probe(&proof) {
                Some(offset) => s3.set_clock_offset_ms(offset),
                None => {
                    scion_store::probe::probe_with(counter.as_ref(), |key| s3.learn_clock(key))
                        .with_context(|| format!("attaching to {location}"))?;
                    remember_probe(&proof, s3.clock_offset_ms());
                }
            }
            let cached =
                SegmentCache::new(counter.clone(), checkouts.join(".segments"), "segments/")?;
            (Arc::new(cached), counter, location, checkouts, None)
        }
    };
    let mut options = ScionOptions::new(checkouts, policy);
    options.store_dir = store_dir;
    options.progress =
        scion_core::progress::ProgressSink(Arc::new(crate::progress::Bar::default()));
    if let Some(h) = &cli.holder {
        options.holder = h.clone();
    }
    let scion = if init {
        let min_grace = match &cli.command {
            crate::cli::Command::Init { min_grace } => parse_duration(min_grace)?,
            _ => scion_core::DEFAULT_MIN_GRACE,
        };
        Scion::init_with_min_grace(backend, &location, options, min_grace)?
    } else {
        Scion::open(backend, &location, options)?
    };
    Ok(Opened { scion, counter })
}

pub fn run(cli: Cli) -> Result<()> {
    let counter: std::cell::RefCell<Option<Arc<CountingBackend>>> = Default::default();
    let open = |cli: &Cli, init: bool| -> Result<Scion> {
        let o = open_store(cli, init)?;
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
        } => {
            let s = open(cli, false)?;
            if *read_only {
                let t: Target = target.parse()?;
                p.checkout(&s.checkout_read_only(&t)?);
            } else {
                let b: BranchRef = target.parse()?;
                p.checkout(&s.checkout(&b, *force)?);
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
        } => {
            let (Some(target), Some(name)) = (target, name) else {
                bail!("usage: scion checkpoint <db[@branch]> <name>");
            };
            let b: BranchRef = target.parse()?;
            let name = CheckpointName::new(name)?;
            let s = open(cli, false)?;
            p.checkpoint(&s.checkpoint(&b, &name)?);
        }
        Command::Fork {
            source,
            branch,
            at,
            ttl,
        } => {
            let src: BranchRef = source.parse()?;
            let new = BranchName::new(branch)?;
            let at = at.as_deref().map(CheckpointName::new).transpose()?;
            let ttl = ttl.as_deref().map(parse_duration).transpose()?;
            let s = open(cli, false)?;
            let report = s.fork_with_ttl(&src, &new, at.as_ref(), ttl)?;
            if at.is_none() && !cli.json {
                let (r, _) = s.read_ref(&src)?;
                if s.checkout_state(&src, &r.root)? == scion_core::CheckoutState::Dirty {
                    eprintln!(
                        "note: {src}'s checkout has changes that were never checkpointed; the fork does not include them"
                    );
                }
            }
            p.fork(&report);
        }
        Command::Checkpoints { target } => {
            let b: BranchRef = target.parse()?;
            let s = open(cli, false)?;
            p.checkpoints(&b, &s.list_checkpoints(&b)?);
        }
        Command::Branches { db } => {
            let db = DbName::new(db)?;
            let s = open(cli, false)?;
            p.branches(&db, &s.branch_statuses(&db)?);
        }
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
            opts.runs = run.runs.unwrap_or(opts.runs).max(1);
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = scion_bench::fork::run(&opts, &mut progress);
            let _ = std::fs::remove_dir_all(&dir);
            p.bench_fork(&report.map_err(|e| anyhow::anyhow!("{e}"))?);
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
        Command::Bench(BenchCommand::Isolation { run, postgres }) => {
            let dir = bench_dir(&run.dir);
            let mut opts = if run.quick {
                scion_bench::isolation::IsolationOptions::quick(dir.clone(), postgres.clone())
            } else {
                scion_bench::isolation::IsolationOptions::full(dir.clone(), postgres.clone())
            };
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
            let onto = BranchName::new(onto)?;
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
                return Err(scion_core::CoreError::VerifyFailed {
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
        Command::Compact { target, force } => {
            let b: BranchRef = target.parse()?;
            let s = open(cli, false)?;
            let r = s.compact(&b, *force)?;
            p.done(
                &format!(
                    "compacted {} to version {} ({} pages from {} segments into {} written)",
                    r.branch,
                    r.version,
                    r.pages,
                    r.segments_before,
                    crate::output::bytes(r.store_bytes_written)
                ),
                serde_json::to_value(&r)?,
            );
        }
        Command::Diff {
            left,
            right,
            table,
            sql,
        } => {
            let (l, r): (Target, Target) = (left.parse()?, right.parse()?);
            let s = open(cli, false)?;
            let opts = scion_core::diff::DiffOptions {
                table: table.clone(),
                sql: *sql,
            };
            p.diff(&s.diff(&l, &r, &opts)?);
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
    a: &crate::cli::BranchbenchArgs,
) -> Result<scion_bench::branchbench::BranchbenchOptions> {
    use scion_bench::branchbench::BranchbenchOptions;
    let e = |m: String| anyhow::anyhow!(m);
    let profile = a.profile.parse().map_err(e)?;
    let mut o = BranchbenchOptions::for_profile(profile, bench_dir(&a.dir));
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
    o.runs = a.runs.max(1);
    o.gc_after = !a.no_gc;
    o.out = a.out.clone();
    Ok(o)
}
