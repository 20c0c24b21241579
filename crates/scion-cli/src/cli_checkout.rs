//! A branch as a file: `checkout`, `path`, `checkpoint` and `checkpoints`: their syntax and
//! what each runs.

use anyhow::{bail, Result};
use scion_core::{BranchRef, CheckpointName, Target};

use crate::open::Open;
use crate::output::Printer;

/// `scion checkout`.
#[derive(Debug, clap::Args)]
pub struct CheckoutArgs {
    /// db or db@branch (db@branch@checkpoint with --read-only).
    pub target: String,
    /// Discard changes in the checkout that were never checkpointed (with --release,
    /// also release the branch's checkouts on other hosts).
    #[arg(long)]
    pub force: bool,
    /// Materialize a checkpoint (or head) as a read-only file (mode 0444) in a separate
    /// tree; reused when already there.
    #[arg(long, conflicts_with = "release")]
    pub read_only: bool,
    /// End this host's writable checkout of the branch: remove its file and its record.
    #[arg(long)]
    pub release: bool,
}

/// `scion path`.
#[derive(Debug, clap::Args)]
pub struct PathArgs {
    /// db or db@branch.
    pub target: String,
}

/// `scion checkpoint`.
#[derive(Debug, clap::Args)]
pub struct CheckpointArgs {
    #[command(subcommand)]
    pub action: Option<CheckpointAction>,
    /// db or db@branch.
    #[arg(required = true)]
    pub target: Option<String>,
    /// Name of the checkpoint ('fork' and 'init' are reserved).
    #[arg(required = true)]
    pub name: Option<String>,
    /// Keep KEY=VALUE with the checkpoint; repeatable. `scion checkpoints --json`
    /// shows it.
    #[arg(long, value_name = "KEY=VALUE", value_parser = crate::cli_branches::parse_meta)]
    pub meta: Vec<(String, String)>,
}

#[derive(Debug, clap::Subcommand)]
pub enum CheckpointAction {
    /// Delete a checkpoint (its data goes at the next gc that finds it unreachable).
    #[command(after_help = "Example:\n  scion checkpoint delete shop@try-1 v1")]
    Delete {
        /// db or db@branch.
        target: String,
        name: String,
    },
}

/// `scion checkpoints`.
#[derive(Debug, clap::Args)]
pub struct CheckpointsArgs {
    /// db or db@branch.
    pub target: String,
}

pub fn checkout(p: &Printer, open: &Open, a: &CheckoutArgs) -> Result<()> {
    let s = open()?;
    if a.release {
        let b: BranchRef = a.target.parse()?;
        p.released(&s.release_checkout(&b, a.force)?);
    } else if a.read_only {
        let t: Target = a.target.parse()?;
        p.checkout(&s.checkout_read_only(&t)?);
    } else {
        let t: Target = a.target.parse()?;
        if let Some(checkpoint) = &t.checkpoint {
            return Err(scion_core::EngineError::CheckpointTarget {
                branch: t.branch.clone(),
                checkpoint: checkpoint.to_string(),
            }
            .into());
        }
        p.checkout(&s.checkout(&t.branch, a.force)?);
    }
    Ok(())
}

pub fn path(p: &Printer, open: &Open, a: &PathArgs) -> Result<()> {
    let b: BranchRef = a.target.parse()?;
    let s = open()?;
    s.engine().read_ref(&b)?;
    p.path(&b, &s.checkout_path(&b));
    Ok(())
}

pub fn checkpoint(p: &Printer, open: &Open, a: &CheckpointArgs) -> Result<()> {
    if let Some(CheckpointAction::Delete { target, name }) = &a.action {
        let b: BranchRef = target.parse()?;
        let name = CheckpointName::new(name)?;
        open()?.engine().delete_checkpoint(&b, &name)?;
        p.done(
            &format!("deleted checkpoint {b}@{name}"),
            serde_json::json!({"deleted": format!("{b}@{name}")}),
        );
        return Ok(());
    }
    let (Some(target), Some(name)) = (&a.target, &a.name) else {
        bail!("usage: scion checkpoint <db[@branch]> <name>");
    };
    let b: BranchRef = target.parse()?;
    let name = CheckpointName::new(name)?;
    let s = open()?;
    let meta = a.meta.iter().cloned().collect();
    p.checkpoint(&s.checkpoint(&b, &name, scion_core::CheckpointOptions { meta })?);
    Ok(())
}

pub fn checkpoints(p: &Printer, open: &Open, a: &CheckpointsArgs) -> Result<()> {
    let b: BranchRef = a.target.parse()?;
    let s = open()?;
    let list = s.engine().list_checkpoints(&b)?;
    // The reserved names resolve too (for --at and --to): list them, marked.
    let mut reserved = Vec::new();
    for name in CheckpointName::reserved() {
        let t = Target {
            branch: b.clone(),
            checkpoint: Some(name.clone()),
        };
        reserved.push((name, s.engine().resolve(&t)?.version));
    }
    p.checkpoints(&b, &reserved, &list);
    Ok(())
}
