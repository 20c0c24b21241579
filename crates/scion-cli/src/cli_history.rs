//! `scion log`, `scion undo` and `scion restore`: a branch's head history, and moving
//! along it.

use anyhow::Result;
use scion_core::history::HeadEntry;
use scion_core::ops::history::HeadHistory;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::{BranchRef, Scion};

use crate::output::Printer;

/// `scion log`.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// db or db@branch (a destroyed branch's history is shown while it lasts).
    pub target: String,
    /// Show at most this many entries, newest first.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub limit: usize,
}

/// `scion undo`.
#[derive(Debug, clap::Args)]
pub struct UndoArgs {
    /// db or db@branch.
    pub target: String,
    /// Needed on a protected branch (main); also discards uncheckpointed changes in the
    /// checkout and overrides another holder's lease.
    #[arg(long)]
    pub force: bool,
}

/// `scion restore`.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// db@branch; a destroyed branch is brought back by name.
    pub target: String,
    /// The entry of `scion log` whose result to restore (a destroyed branch: by default
    /// the head it had when destroyed).
    #[arg(long, value_name = "ENTRY", value_parser = parse_entry)]
    pub to: Option<u64>,
    /// Needed on a protected branch (main); also discards uncheckpointed changes in the
    /// checkout and overrides another holder's lease.
    #[arg(long)]
    pub force: bool,
}

/// `12` or `#12`, as `scion log` prints it.
fn parse_entry(s: &str) -> Result<u64, String> {
    s.trim_start_matches('#')
        .parse()
        .map_err(|_| format!("expected an entry number from `scion log`, such as 12, got {s:?}"))
}

fn force_only(force: bool) -> MoveOptions {
    MoveOptions {
        force,
        ..Default::default()
    }
}

pub fn log(p: &Printer, s: &Scion, args: &LogArgs) -> Result<()> {
    let b: BranchRef = args.target.parse()?;
    let history = s.head_history(&b, Some(args.limit))?;
    p.head_history(&history);
    Ok(())
}

pub fn undo(p: &Printer, s: &Scion, args: &UndoArgs) -> Result<()> {
    let b: BranchRef = args.target.parse()?;
    p.moved("undone", &s.undo(&b, &force_only(args.force))?);
    Ok(())
}

pub fn restore(p: &Printer, s: &Scion, args: &RestoreArgs) -> Result<()> {
    let b: BranchRef = args.target.parse()?;
    p.moved(
        "restored",
        &s.restore(&b, args.to, &force_only(args.force))?,
    );
    Ok(())
}

impl Printer {
    pub fn head_history(&self, h: &HeadHistory) {
        if self.json {
            return self.emit(h);
        }
        if !h.live {
            println!(
                "{} was destroyed; `scion restore {}` brings it back as it was (or `--to <entry>`)",
                h.branch, h.branch
            );
        }
        if h.entries.is_empty() {
            println!(
                "{}: no head moves recorded yet (a new database or fork, or a branch last moved by an older scion)",
                h.branch
            );
        }
        for e in &h.entries {
            println!("{}", entry_line(e));
        }
        if h.more {
            println!("... older entries: --limit");
        } else if h.expired_before {
            println!("... older entries passed the store's history retention (`scion config`)");
        }
    }
}

/// `#7  2026-12-03T07:00:01.123Z  rollback  v6 -> v7  shop@main@init  by host/123`
fn entry_line(e: &HeadEntry) -> String {
    let versions = match (e.old, e.new) {
        (None, _) => format!("(destroyed) -> v{}", e.new_version),
        (_, None) => format!("v{} -> (destroyed)", e.old_version),
        _ => format!("v{} -> v{}", e.old_version, e.new_version),
    };
    let detail = match (&e.detail, e.undoes) {
        (Some(d), _) if e.op == scion_core::history::HeadOp::Undo => format!("undid {d}"),
        (Some(d), _) => d.clone(),
        (None, Some(u)) => format!("undid #{u}"),
        (None, None) => String::new(),
    };
    format!(
        "#{:<4} {}  {:<8} {:<22} {}  by {}",
        e.seq, e.at, e.op, versions, detail, e.holder
    )
}
