//! Branches of a database: `create`, `fork`, `branches`, `rollback`, `promote`, `destroy`,
//! `protect`, `unprotect`, `touch` and `lease`: their syntax and what each runs.

use std::path::PathBuf;

use anyhow::{bail, Result};
use scion_core::clock::parse_duration;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::{BranchName, BranchRef, CheckpointName, DbName, LeaseChange};

use crate::open::Open;
use crate::output::Printer;

/// `scion create`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// Name of the new database (a-z, 0-9, '.', '_', '-').
    pub db: String,
    /// SQLite file to import.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
}

/// `scion fork`.
#[derive(Debug, clap::Args)]
pub struct ForkArgs {
    /// Source: db or db@branch.
    pub source: String,
    /// Name of the new branch.
    pub branch: String,
    /// Fork at this checkpoint of the source instead of its head ('fork', 'init' work too).
    #[arg(long, value_name = "CHECKPOINT")]
    pub at: Option<String>,
    /// Let `scion gc` reap the fork after this long without a commit or touch (e.g. 2h).
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
    /// Keep KEY=VALUE on the new branch (who made it and why); repeatable. `scion
    /// branches --json` shows it.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_meta)]
    pub meta: Vec<(String, String)>,
}

/// `scion branches`.
#[derive(Debug, clap::Args)]
pub struct BranchesArgs {
    /// Database name.
    pub db: String,
}

/// `scion rollback`.
#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// db or db@branch.
    pub target: String,
    /// Checkpoint to return to ('fork' and 'init' work too).
    #[arg(long, value_name = "CHECKPOINT")]
    pub to: String,
    #[command(flatten)]
    pub moving: MoveArgs,
}

/// `scion promote`.
#[derive(Debug, clap::Args)]
pub struct PromoteArgs {
    /// The winning branch: db@branch.
    pub source: String,
    /// The branch to move: `main`, or `db@main` (of the same database).
    #[arg(long, value_name = "BRANCH")]
    pub onto: String,
    #[command(flatten)]
    pub moving: MoveArgs,
}

/// What rollback and promote share: the safety fork and overriding refusals.
#[derive(Debug, clap::Args)]
pub struct MoveArgs {
    /// Make no safety fork (the head history keeps the abandoned head all the same).
    #[arg(long)]
    pub no_backup: bool,
    /// How long the safety fork lives (default 24h).
    #[arg(long, value_name = "DURATION")]
    pub backup_ttl: Option<String>,
    /// Needed to move a protected branch (main); also discards uncheckpointed changes in
    /// the moved branch's checkout and overrides another holder's lease.
    #[arg(long)]
    pub force: bool,
}

/// `scion destroy`.
#[derive(Debug, clap::Args)]
pub struct DestroyArgs {
    /// db or db@branch.
    pub target: String,
    /// Needed for main, protected and leased branches, and open checkouts.
    #[arg(long)]
    pub force: bool,
}

/// `scion protect` and `scion unprotect`.
#[derive(Debug, clap::Args)]
pub struct ProtectArgs {
    /// db or db@branch.
    pub target: String,
}

/// `scion touch`.
#[derive(Debug, clap::Args)]
pub struct TouchArgs {
    /// db or db@branch.
    pub target: String,
    /// New TTL (e.g. 30m, 2h) or 'none'.
    #[arg(long, value_name = "DURATION|none")]
    pub ttl: Option<String>,
}

/// `scion lease`.
#[derive(Debug, clap::Subcommand)]
pub enum LeaseCommand {
    /// Every branch with a lease: holder, epoch, expiry.
    #[command(after_help = "Example:\n  scion lease list")]
    List,
    /// Take (or renew) a branch's lease. Others are refused until it expires or is released.
    #[command(
        after_help = "Example:\n  SCION_HOLDER=agent-7 scion lease acquire shop@try-1 --ttl 10m"
    )]
    Acquire {
        /// db or db@branch.
        target: String,
        #[arg(long, value_name = "DURATION", default_value = "30s")]
        ttl: String,
    },
    /// Give up a lease (another holder's live lease only with --force).
    #[command(after_help = "Example:\n  SCION_HOLDER=agent-7 scion lease release shop@try-1")]
    Release {
        /// db or db@branch.
        target: String,
        #[arg(long)]
        force: bool,
    },
}

/// `KEY=VALUE` of `--meta`.
pub fn parse_meta(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
}

pub fn create(p: &Printer, open: &Open, a: &CreateArgs) -> Result<()> {
    let db = DbName::new(&a.db)?;
    let s = open()?;
    p.create(&s.engine().create(&db, a.from.as_deref())?);
    Ok(())
}

pub fn fork(p: &Printer, open: &Open, a: &ForkArgs) -> Result<()> {
    let src: BranchRef = a.source.parse()?;
    let new = BranchName::new(&a.branch)?;
    let at = a.at.as_deref().map(CheckpointName::new).transpose()?;
    let ttl = a.ttl.as_deref().map(parse_duration).transpose()?;
    let s = open()?;
    let meta = a.meta.iter().cloned().collect();
    let report = s.engine().fork(
        &src,
        &new,
        scion_core::ForkOptions {
            at: at.as_ref().cloned(),
            ttl,
            meta,
            ..Default::default()
        },
    )?;
    // Told from the file's fingerprint alone: a fork stays O(1) whatever the size.
    if at.is_none() && !p.json && s.checkout_maybe_written(&src)? {
        eprintln!(
            "note: {src}'s checkout was written to since its last checkpoint; the fork holds the last checkpointed version, not those changes"
        );
    }
    p.fork(&report);
    Ok(())
}

pub fn branches(p: &Printer, open: &Open, a: &BranchesArgs) -> Result<()> {
    let db = DbName::new(&a.db)?;
    let s = open()?;
    p.branches(&db, &s.branch_statuses(&db)?);
    Ok(())
}

fn move_options(m: &MoveArgs) -> Result<MoveOptions> {
    Ok(MoveOptions {
        force: m.force,
        no_backup: m.no_backup,
        backup_ttl: m.backup_ttl.as_deref().map(parse_duration).transpose()?,
    })
}

pub fn rollback(p: &Printer, open: &Open, a: &RollbackArgs) -> Result<()> {
    let b: BranchRef = a.target.parse()?;
    let to = CheckpointName::new(&a.to)?;
    let opts = move_options(&a.moving)?;
    let s = open()?;
    p.moved("rolled back", &s.rollback(&b, &to, &opts)?);
    Ok(())
}

pub fn promote(p: &Printer, open: &Open, a: &PromoteArgs) -> Result<()> {
    let src: BranchRef = a.source.parse()?;
    let onto = crate::branch_arg::branch_of(&src.db, &a.onto)?;
    let opts = move_options(&a.moving)?;
    let s = open()?;
    p.moved("promoted", &s.promote(&src, &onto, &opts)?);
    Ok(())
}

pub fn destroy(p: &Printer, open: &Open, a: &DestroyArgs) -> Result<()> {
    let b: BranchRef = a.target.parse()?;
    let s = open()?;
    p.destroyed(&s.destroy(&b, a.force)?);
    Ok(())
}

pub fn protect(p: &Printer, open: &Open, a: &ProtectArgs, protect: bool) -> Result<()> {
    let b: BranchRef = a.target.parse()?;
    let s = open()?;
    s.engine().set_protected(&b, protect)?;
    let word = if protect { "protected" } else { "unprotected" };
    p.done(
        &format!("{word} {b}"),
        serde_json::json!({"branch": b.to_string(), "protected": protect}),
    );
    Ok(())
}

pub fn touch(p: &Printer, open: &Open, a: &TouchArgs) -> Result<()> {
    let b: BranchRef = a.target.parse()?;
    let ttl = match a.ttl.as_deref() {
        None => None,
        Some("none") => Some(None),
        Some(d) => Some(Some(parse_duration(d)?)),
    };
    let s = open()?;
    let r = s.engine().touch(&b, ttl)?;
    let ttl_text = r
        .ttl_secs
        .map(scion_core::clock::format_duration)
        .unwrap_or_else(|| "none".into());
    p.done(
        &format!("touched {b} (ttl {ttl_text})"),
        serde_json::json!({"branch": b.to_string(), "touched_at": r.touched_at, "ttl_secs": r.ttl_secs}),
    );
    Ok(())
}

/// `scion lease ...`; `holder` is the global --holder, which a lease must name.
pub fn lease(p: &Printer, open: &Open, cmd: &LeaseCommand, holder: Option<&str>) -> Result<()> {
    match cmd {
        LeaseCommand::List => p.leases(&open()?.engine().lease_list()?),
        LeaseCommand::Acquire { target, ttl } => {
            let b: BranchRef = target.parse()?;
            if holder.is_none() {
                bail!(
                    "name the holder with --holder or SCION_HOLDER: a lease outlives this process, \
                     and only commands run as that holder may then move {b}"
                );
            }
            let ttl = parse_duration(ttl)?;
            let engine = open()?.engine().clone();
            let acquire = LeaseChange::Acquire { ttl };
            let outcome = engine.lease(&b, engine.holder(), acquire)?;
            let l = outcome.lease.expect("an acquisition leaves a lease");
            p.done(
                &format!(
                    "leased {} to {} until {} (epoch {})",
                    l.branch, l.holder, l.expires, l.epoch
                ),
                serde_json::to_value(&l)?,
            );
        }
        LeaseCommand::Release { target, force } => {
            let b: BranchRef = target.parse()?;
            let engine = open()?.engine().clone();
            let release = LeaseChange::Release { force: *force };
            match engine.lease(&b, engine.holder(), release)?.lease {
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
    }
    Ok(())
}
