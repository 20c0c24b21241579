//! `scion log`, `scion undo` and `scion restore`: a branch's head history, and moving
//! along it.

use anyhow::Result;
use scion_core::history::HeadEntry;
use scion_core::ops::history::HeadHistory;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::{BranchRef, DbName, Scion};

use crate::output::Printer;

/// `scion log`.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// db or db@branch (a destroyed branch's history is shown while it lasts). With
    /// --graph: the database's whole tree, or the subtree of db@branch; without one, every
    /// database's tree.
    #[arg(required_unless_present = "graph")]
    pub target: Option<String>,
    /// Show at most this many entries, newest first (default 50); with --graph, at most
    /// this many branches (default 200).
    #[arg(long, short = 'n', value_name = "N")]
    pub limit: Option<usize>,
    /// Draw the database's branches as a tree by lineage: each branch under the branch it
    /// was forked from, with head version, fork point, checkpoints, protection, TTL, a live
    /// lease or checkout and safety forks. Idle subtrees deeper than --depth are folded.
    #[arg(long)]
    pub graph: bool,
    /// With --graph: fold nothing and draw every branch (-n still limits).
    #[arg(long, requires = "graph")]
    pub all: bool,
    /// With --graph: fold idle subtrees that start more than this many forks below a root
    /// (a subtree with a live lease, a checkout or a branch touched within --idle stays).
    #[arg(long, value_name = "FORKS", default_value_t = 4, requires = "graph")]
    pub depth: usize,
    /// With --graph: a branch untouched for this long is idle, so foldable (unless it has
    /// a live lease or a writable checkout).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "15m",
        requires = "graph"
    )]
    pub idle: String,
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
    if args.graph {
        return graph(p, s, args);
    }
    let target = args.target.as_deref().unwrap_or_default();
    let b: BranchRef = target.parse()?;
    let history = s
        .engine()
        .head_history(&b, Some(args.limit.unwrap_or(50)))?;
    p.head_history(&history);
    Ok(())
}

/// `scion log --graph`: one database's tree (or a subtree), or every database's.
fn graph(p: &Printer, s: &Scion, args: &LogArgs) -> Result<()> {
    let Some(target) = args.target.as_deref() else {
        let dbs = s.engine().list_databases()?;
        if dbs.is_empty() && !p.json {
            outln!("no databases yet (scion create <db> --from FILE)");
        }
        let mut all = Vec::new();
        for (i, db) in dbs.iter().enumerate() {
            if i > 0 && !p.json {
                outln!();
            }
            all.push(graph_of(p, s, args, db.as_str(), None)?);
        }
        if p.json {
            p.emit(&serde_json::json!({ "databases": all }));
        }
        return Ok(());
    };
    let (db, branch) = match target.split_once('@') {
        Some((db, b)) => (db, Some(b)),
        None => (target, None),
    };
    let tree = graph_of(p, s, args, db, branch)?;
    if p.json {
        p.emit(&tree);
    }
    Ok(())
}

/// The tree of `db` (or the subtree of its `branch`): drawn, or as JSON for the caller
/// to print.
fn graph_of(
    p: &Printer,
    s: &Scion,
    args: &LogArgs,
    db: &str,
    branch: Option<&str>,
) -> Result<serde_json::Value> {
    let db: DbName = db.parse()?;
    if let Some(b) = branch {
        // The engine's words for a branch that is not there.
        s.engine()
            .read_ref(&BranchRef::new(db.clone(), b.parse()?))?;
    }
    if p.json {
        return Ok(s.branch_tree_json(&db, branch)?);
    }
    let branches = s.branch_statuses(&db)?;
    let mut trees = crate::graph::build(&branches, branch);
    // Merges are read for the branches that are drawn.
    let mut budget = if args.all {
        usize::MAX
    } else {
        args.limit.unwrap_or(200)
    };
    let mut merges_of = |b: &scion_core::ops::status::BranchStatus| {
        s.engine()
            .merges_on_line(&BranchRef::new(db.clone(), b.branch.clone()), 256)
            .unwrap_or_default()
    };
    for t in &mut trees {
        t.attach_merges(&mut budget, &mut merges_of);
    }
    let options = crate::graph::GraphOptions {
        db: db.to_string(),
        all: args.all,
        depth: args.depth,
        limit: args.limit.or((!args.all).then_some(200)),
        now_unix_ms: scion_core::clock::unix_ms(s.engine().store_clock()?.as_system_time()),
        idle_ms: scion_core::clock::parse_duration(&args.idle)?.as_millis() as u64,
    };
    let shown: usize = trees.iter().map(crate::graph::TreeNode::size).sum();
    let mut out = anstream::stdout();
    use std::io::Write;
    let _ = writeln!(
        out,
        "{db}: {} branch{}{}",
        branches.len(),
        if branches.len() == 1 { "" } else { "es" },
        if branch.is_some() {
            format!(", {shown} in this subtree")
        } else {
            String::new()
        }
    );
    for line in crate::graph::render(&trees, &options) {
        let _ = writeln!(out, "{line}");
    }
    Ok(serde_json::Value::Null)
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
            outln!(
                "{} was destroyed; `scion restore {}` brings it back as it was (or `--to <entry>`)",
                h.branch,
                h.branch
            );
        }
        if h.entries.is_empty() && !h.more {
            outln!(
                "{}: no head moves recorded yet (a new database or fork, or a branch last moved by an older scion)",
                h.branch
            );
        }
        for e in &h.entries {
            outln!("{}", entry_line(e));
        }
        if h.more {
            outln!("... older entries: --limit");
        } else if h.expired_before {
            outln!("... older entries passed the store's history retention (`scion config`)");
        }
    }
}

/// `#7  2026-12-03T07:00:01.123Z  rollback  v6 -> v7  shop@main@init  by host/123`, or
/// `by token:ci (via host/123)` when the move was made for an actor.
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
    // Who it was for when a front end knew (a token, an agent), else the process.
    let by = match &e.by {
        Some(actor) => format!("{actor} (via {})", e.holder),
        None => e.holder.clone(),
    };
    format!(
        "#{:<4} {}  {:<8} {:<22} {}  by {by}",
        e.seq, e.at, e.op, versions, detail
    )
}
