//! Dispatch: open the store, run one command, print its result.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use scion_core::{
    BranchName, BranchRef, CheckpointName, ClonePolicy, DbName, Scion, ScionOptions, Target,
};
use scion_store::LocalBackend;

use crate::cli::{BenchCommand, Cli, Command};
use crate::output::Printer;

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
    let options = ScionOptions {
        checkouts_dir: dir.join("checkouts"),
        clone_policy: policy,
    };
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
        Command::Checkout { target, force } => {
            let b: BranchRef = target.parse()?;
            let s = open(&cli, false)?;
            p.checkout(&s.checkout(&b, *force)?);
        }
        Command::Path { target } => {
            let b: BranchRef = target.parse()?;
            let s = open(&cli, false)?;
            s.read_ref(&b)?;
            p.path(&b, &s.checkout_path(&b));
        }
        Command::Checkpoint { target, name } => {
            let b: BranchRef = target.parse()?;
            let name = CheckpointName::new(name)?;
            let s = open(&cli, false)?;
            p.checkpoint(&s.checkpoint(&b, &name)?);
        }
        Command::Fork { source, branch, at } => {
            let src: BranchRef = source.parse()?;
            let new = BranchName::new(branch)?;
            let at = at.as_deref().map(CheckpointName::new).transpose()?;
            let s = open(&cli, false)?;
            let report = s.fork(&src, &new, at.as_ref())?;
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
        Command::Export { target, out, force } => {
            let t: Target = target.parse()?;
            let s = open(&cli, false)?;
            p.export(&s.export(&t, out, *force)?);
        }
    }
    Ok(())
}
