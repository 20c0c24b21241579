//! The store as a whole and what reads across it: `init`, `config`, `status`, `verify`,
//! `gc`, `compact`, `diff`, `export`, `completions` and `man`: their syntax and what each
//! runs.

use std::path::PathBuf;

use anyhow::{Context, Result};
use scion_core::clock::parse_duration;
use scion_core::{BranchRef, Target};

use crate::open::Open;
use crate::output::Printer;

/// `scion init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Shortest grace period `gc` may use without --force.
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub min_grace: String,
    /// How full pages are stored (`scion config` changes it later).
    #[arg(long, value_name = "CODEC", default_value = "lz4", value_parser = page_compression())]
    pub page_compression: scion_core::PageCompression,
    /// How long `gc` keeps every head a branch's history names, so `scion undo` and
    /// `scion restore` can go back to it (`scion config` changes it later).
    #[arg(long, value_name = "DURATION", default_value = "7d")]
    pub history_retention: String,
}

/// `scion config`.
#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// How full pages are stored from now on.
    #[arg(long, value_name = "CODEC", value_parser = page_compression())]
    pub page_compression: Option<scion_core::PageCompression>,
    /// How long `gc` keeps every head a branch's history names (from the next `gc` on,
    /// in every process). Shorter frees space sooner; `undo` and `restore` reach back
    /// only this far.
    #[arg(long, value_name = "DURATION")]
    pub history_retention: Option<String>,
}

/// `scion gc`.
#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// Grace period.
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub grace: String,
    /// Allow a grace below the store's minimum.
    #[arg(long)]
    pub force: bool,
}

/// `scion compact`.
#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    /// db or db@branch.
    pub target: String,
    /// Rewrite only the pages in small segments (fewer than 64 of the head's pages
    /// each, as many small commits leave them) into one new segment; pages shared with
    /// other branches stay shared. Writes nothing when nothing is scattered.
    #[arg(long)]
    pub scattered: bool,
    /// Override another holder's lease.
    #[arg(long)]
    pub force: bool,
}

/// `scion diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// db[@branch[@checkpoint]]
    pub left: String,
    /// db[@branch[@checkpoint]]
    pub right: String,
    /// Only this table.
    #[arg(long, value_name = "TABLE")]
    pub table: Option<String>,
    /// Print SQL statements that turn left into right (and nothing else).
    #[arg(long, conflicts_with = "rows")]
    pub sql: bool,
    /// List the differing rows: key, and values before and after (with --json, as
    /// data: no SQL to parse).
    #[arg(long)]
    pub rows: bool,
    /// With --rows, list at most this many rows per table.
    #[arg(long, value_name = "N", default_value_t = 100, requires = "rows")]
    pub limit: usize,
    /// Take a branch side whose checkout holds changes not checkpointed as its file is
    /// (as `git diff` takes the working tree). Reads both sides whole.
    #[arg(long)]
    pub working: bool,
}

/// `scion export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// db, db@branch or db@branch@checkpoint.
    pub target: String,
    /// Output file.
    pub out: PathBuf,
    /// Replace an existing file.
    #[arg(long)]
    pub force: bool,
}

/// `scion completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// The page compressions by name, listed in `--help` and in the error for an unknown one.
fn page_compression() -> impl clap::builder::TypedValueParser<Value = scion_core::PageCompression> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(scion_core::PageCompression::ALL.map(|c| c.as_str()))
        .map(|name| {
            name.parse::<scion_core::PageCompression>()
                .expect("a possible value names a page compression")
        })
}

/// `scion init`: the store is made by opening it for init (the settings are read there).
pub fn init(p: &Printer, open_for_init: &Open) -> Result<()> {
    p.init(&open_for_init()?);
    Ok(())
}

pub fn config(p: &Printer, open: &Open, a: &ConfigArgs) -> Result<()> {
    let retention = a
        .history_retention
        .as_deref()
        .map(parse_duration)
        .transpose()?;
    let s = open()?;
    let change = a
        .page_compression
        .map(|c| s.engine().set_page_compression(c))
        .transpose()?;
    let retention_change = retention
        .map(|r| {
            s.engine()
                .set_history_retention(r)
                .map(|before| (before, r))
        })
        .transpose()?;
    p.config(&s, change, retention_change)
}

pub fn status(p: &Printer, open: &Open) -> Result<()> {
    p.status(&open()?.status()?);
    Ok(())
}

pub fn verify(p: &Printer, open: &Open) -> Result<()> {
    let r = open()?.verify()?;
    p.verify(&r);
    if !r.ok() {
        return Err(scion_core::EngineError::VerifyFailed {
            problems: r.problems.len(),
        }
        .into());
    }
    Ok(())
}

pub fn gc(p: &Printer, open: &Open, a: &GcArgs) -> Result<()> {
    let grace = parse_duration(&a.grace)?;
    p.gc(&open()?.gc(grace, a.force)?);
    Ok(())
}

pub fn compact(p: &Printer, open: &Open, a: &CompactArgs) -> Result<()> {
    use scion_core::ops::compact::CompactScope;
    let b: BranchRef = a.target.parse()?;
    let s = open()?;
    let scope = if a.scattered {
        CompactScope::Scattered
    } else {
        CompactScope::All
    };
    let r = s.compact_scope(&b, a.force, scope)?;
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
    Ok(())
}

pub fn diff(p: &Printer, open: &Open, a: &DiffArgs) -> Result<()> {
    let (l, r): (Target, Target) = (a.left.parse()?, a.right.parse()?);
    let s = open()?;
    let opts = scion_core::diff::DiffOptions {
        table: a.table.clone(),
        sql: a.sql,
        rows: a.rows.then_some(a.limit),
    };
    let report = match a.working {
        true => s.diff_working(&l, &r, &opts)?,
        false => s.diff(&l, &r, &opts)?,
    };
    p.diff(&report);
    Ok(())
}

pub fn export(p: &Printer, open: &Open, a: &ExportArgs) -> Result<()> {
    let t: Target = a.target.parse()?;
    p.export(&open()?.export(&t, &a.out, a.force)?);
    Ok(())
}

/// `scion completions`, for `cli`, the whole command line's definition.
pub fn completions(a: &CompletionsArgs, mut cli: clap::Command) {
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cli, "scion", &mut script);
    crate::stdout::write_bytes(&script);
}

/// `scion man`, for `cli`, the whole command line's definition.
pub fn man(cli: clap::Command) -> Result<()> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cli)
        .render(&mut page)
        .context("writing the man page")?;
    crate::stdout::write_bytes(&page);
    Ok(())
}
