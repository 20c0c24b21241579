//! Dispatch: open the store, run one command, print its result.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use scion_core::{
    BranchName, BranchRef, CheckpointName, ClonePolicy, DbName, Scion, ScionOptions, Target,
};
use scion_store::LocalBackend;

use crate::cli::{BenchCommand, CheckpointAction, Cli, Command, LeaseCommand};
use crate::output::Printer;
use scion_core::clock::parse_duration;
use scion_core::ops::lifecycle::MoveOptions;

/// Resolve a store spec to a local directory.
/// Relative paths are made absolute so that printed checkout paths work from anywhere.
fn store_dir(spec: &str) -> Result<PathBuf> {
    let path = if let Some(rest) = spec.strip_prefix("file://") {
        PathBuf::from(rest)
    } else if spec.contains("://") {
        bail!("unsupported store {spec:?}: this scion supports local directories (a path or file:///path)");
    } else {
        PathBuf::from(spec)
    };
    std::path::absolute(&path).with_context(|| format!("resolving store path {spec:?}"))
}

fn open(cli: &Cli, init: bool) -> Result<Scion> {
    let dir = store_dir(&cli.store)?;
    let policy: ClonePolicy = cli.clone.parse().map_err(anyhow::Error::msg)?;
    let mut options = ScionOptions::new(dir.join("checkouts"), policy);
    if let Some(h) = &cli.holder {
        options.holder = h.clone();
    }
    let location = dir.display().to_string();
    if !init && !dir.join(scion_core::MANIFEST_KEY).exists() {
        return Err(scion_core::CoreError::NotInitialized { location }.into());
    }
    let backend =
        Arc::new(LocalBackend::open(&dir).with_context(|| format!("opening store {location}"))?);
    Ok(if init {
        Scion::init(backend, &location, options)?
    } else {
        Scion::open(backend, &location, options)?
    })
}

pub fn run(cli: Cli) -> Result<()> {
    let p = Printer { json: cli.json };
    match &cli.command {
        Command::Init => {
            let s = open(&cli, true)?;
            p.init(&s);
        }
        Command::Create { db, from } => {
            let db = DbName::new(db)?;
            let s = open(&cli, false)?;
            p.create(&s.create(&db, from.as_deref())?);
        }
        Command::Checkout {
            target,
            force,
            read_only,
        } => {
            let s = open(&cli, false)?;
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
            let s = open(&cli, false)?;
            s.read_ref(&b)?;
            p.path(&b, &s.checkout_path(&b));
        }
        Command::Checkpoint {
            action: Some(CheckpointAction::Delete { target, name }),
            ..
        } => {
            let b: BranchRef = target.parse()?;
            let name = CheckpointName::new(name)?;
            let s = open(&cli, false)?;
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
            let s = open(&cli, false)?;
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
            let s = open(&cli, false)?;
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
            let s = open(&cli, false)?;
            p.checkpoints(&b, &s.list_checkpoints(&b)?);
        }
        Command::Branches { db } => {
            let db = DbName::new(db)?;
            let s = open(&cli, false)?;
            p.branches(&db, &s.branch_statuses(&db)?);
        }
        Command::Status => {
            let s = open(&cli, false)?;
            p.status(&s.status()?);
        }
        Command::Bench(BenchCommand::Fork { quick, dir, runs }) => {
            let dir = match dir {
                Some(d) => d.clone(),
                None => std::env::temp_dir().join(format!("scion-bench-{}", std::process::id())),
            };
            let mut opts = if *quick {
                scion_bench::fork::ForkBenchOptions::quick(dir.clone())
            } else {
                scion_bench::fork::ForkBenchOptions::full(dir.clone())
            };
            if let Some(r) = runs {
                opts.runs = (*r).max(1);
            }
            let mut progress = |m: &str| eprintln!("bench: {m}");
            let report = scion_bench::fork::run(&opts, &mut progress);
            let _ = std::fs::remove_dir_all(&dir);
            p.bench_fork(&report.map_err(|e| anyhow::anyhow!("{e}"))?);
        }
        Command::Rollback {
            target,
            to,
            no_backup,
            backup_ttl,
            force,
        } => {
            let b: BranchRef = target.parse()?;
            let to = CheckpointName::new(to)?;
            let opts = MoveOptions {
                force: *force,
                no_backup: *no_backup,
                backup_ttl: backup_ttl.as_deref().map(parse_duration).transpose()?,
            };
            let s = open(&cli, false)?;
            p.moved("rolled back", &s.rollback(&b, &to, &opts)?);
        }
        Command::Promote {
            source,
            onto,
            no_backup,
            backup_ttl,
            force,
        } => {
            let src: BranchRef = source.parse()?;
            let onto = BranchName::new(onto)?;
            let opts = MoveOptions {
                force: *force,
                no_backup: *no_backup,
                backup_ttl: backup_ttl.as_deref().map(parse_duration).transpose()?,
            };
            let s = open(&cli, false)?;
            p.moved("promoted", &s.promote(&src, &onto, &opts)?);
        }
        Command::Destroy { target, force } => {
            let b: BranchRef = target.parse()?;
            let s = open(&cli, false)?;
            p.destroyed(&s.destroy(&b, *force)?);
        }
        Command::Protect { target } | Command::Unprotect { target } => {
            let protect = matches!(cli.command, Command::Protect { .. });
            let b: BranchRef = target.parse()?;
            let s = open(&cli, false)?;
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
            let s = open(&cli, false)?;
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
            let s = open(&cli, false)?;
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
            let s = open(&cli, false)?;
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
            let s = open(&cli, false)?;
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
        Command::Gc { grace } => {
            let grace = parse_duration(grace)?;
            let s = open(&cli, false)?;
            p.gc(&s.gc(grace)?);
        }
        Command::Compact { target, force } => {
            let b: BranchRef = target.parse()?;
            let s = open(&cli, false)?;
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
            let s = open(&cli, false)?;
            let opts = scion_core::diff::DiffOptions {
                table: table.clone(),
                sql: *sql,
            };
            p.diff(&s.diff(&l, &r, &opts)?);
        }
        Command::Export { target, out, force } => {
            let t: Target = target.parse()?;
            let s = open(&cli, false)?;
            p.export(&s.export(&t, out, *force)?);
        }
    }
    Ok(())
}
