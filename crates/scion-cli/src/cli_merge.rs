//! `scion merge`: another branch's changes brought into a branch, and the report of what
//! merged, what conflicts and what the result would violate.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;
use scion_core::{BranchRef, Scion, Target};
use scion_merge::{
    Granularity, MergeOptions, MergeReport, Outcome, Resolution, SchemaPolicy, Strategy,
};

use crate::output::Printer;

/// `scion merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// What to merge: db@branch, or db@branch@checkpoint.
    pub source: String,
    /// The branch that receives the changes: `main`, or `db@main` (of the same database).
    #[arg(long, value_name = "BRANCH")]
    pub into: String,
    /// Compute and check everything, publish nothing: the same report as a real run.
    #[arg(long)]
    pub dry_run: bool,
    /// What to do with conflicts no resolution names: fail publishes nothing while any
    /// is left; ours keeps the destination's side; theirs takes the source's.
    #[arg(long, value_enum, default_value = "fail")]
    pub strategy: StrategyArg,
    /// A JSON object of resolutions by conflict id (from the report): "ours", "theirs",
    /// a cell's value, or for a row an object of column values.
    #[arg(long, value_name = "FILE.json")]
    pub resolve: Option<PathBuf>,
    /// cell: edits to different columns of one row merge; row: any row both sides changed
    /// differently is one conflict.
    #[arg(long, value_enum, default_value = "cell")]
    pub conflict_granularity: GranularityArg,
    /// refuse: a schema change to a table the other side changed rows of is a conflict;
    /// one-sided: ADD COLUMN is carried anyway, rows matched by column name.
    #[arg(long, value_enum, default_value = "refuse")]
    pub schema_policy: PolicyArg,
    /// Publish even if the result violates a foreign key (a change SQLite cannot store,
    /// such as a duplicate of a UNIQUE value, is left out and reported).
    #[arg(long)]
    pub allow_violations: bool,
    /// Rows both sides inserted under the same INTEGER PRIMARY KEY are two rows, not a
    /// conflict: the source's new rows of that table, from the first shared id on, get ids
    /// after the destination's (in their order), and the source's rows that refer to them
    /// through a declared foreign key follow. The report lists every id given.
    #[arg(long)]
    pub renumber: bool,
    /// The version both sides are compared against (db@branch[@checkpoint]), where the
    /// version graph cannot tell: several best common versions, or versions written
    /// before scion recorded parents. It must be a version of the same database.
    #[arg(long, value_name = "TARGET")]
    pub base: Option<String>,
    /// Needed to merge into a protected branch (main).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum StrategyArg {
    Fail,
    Ours,
    Theirs,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GranularityArg {
    Cell,
    Row,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PolicyArg {
    Refuse,
    OneSided,
}

/// A merge that conflicts or violates: its report was printed, and nothing was published.
#[derive(Debug, thiserror::Error)]
#[error("{what}; nothing was published")]
pub struct MergeStopped {
    what: String,
    /// What settles each kind of stop the report holds.
    pub hint: String,
}

impl MergeStopped {
    pub(crate) fn new(what: String, hint: String) -> Self {
        MergeStopped { what, hint }
    }
}

pub fn merge(p: &Printer, scion: &Scion, args: &MergeArgs) -> Result<()> {
    let src: Target = args.source.parse()?;
    // `--into db@branch` of another database of this store than the source's: the two do
    // not go together, and neither name is wrong on its own. (`branch@checkpoint` of the
    // source's database is refused below, as what `--into` does not take.)
    if let Some(Ok(into)) = args
        .into
        .contains('@')
        .then(|| args.into.parse::<BranchRef>())
    {
        if into.db != src.branch.db && scion.engine().list_databases()?.contains(&into.db) {
            return Err(scion_merge::MergeError::DifferentDatabases {
                src: src.to_string(),
                dst: into.to_string(),
            }
            .into());
        }
    }
    let dst = BranchRef::new(
        src.branch.db.clone(),
        crate::branch_arg::branch_of(&src.branch.db, &args.into)?,
    );
    let resolutions = match &args.resolve {
        Some(path) => read_resolutions(path)?,
        None => BTreeMap::new(),
    };
    let opts = MergeOptions {
        dry_run: args.dry_run,
        strategy: match args.strategy {
            StrategyArg::Fail => Strategy::Fail,
            StrategyArg::Ours => Strategy::Ours,
            StrategyArg::Theirs => Strategy::Theirs,
        },
        granularity: match args.conflict_granularity {
            GranularityArg::Cell => Granularity::Cell,
            GranularityArg::Row => Granularity::Row,
        },
        schema_policy: match args.schema_policy {
            PolicyArg::Refuse => SchemaPolicy::Refuse,
            PolicyArg::OneSided => SchemaPolicy::OneSided,
        },
        resolutions,
        allow_violations: args.allow_violations,
        base: args.base.as_deref().map(str::parse).transpose()?,
        allow_protected: args.force,
        renumber: args.renumber,
    };
    let report = scion_merge::merge(
        scion.engine(),
        &mut scion.working_files(),
        &src,
        &dst,
        &opts,
    )?;
    if p.json {
        p.emit(&report);
    } else {
        out!("{}", render(&report));
    }
    if report.stopped() {
        let (mut parts, mut hints) = (Vec::new(), Vec::new());
        if report.unresolved > 0 {
            parts.push(count(report.unresolved, "unresolved conflict"));
            hints.push("settle conflicts by their ids in the report with --resolve FILE.json, or all at once with --strategy ours|theirs");
            if !args.renumber && shared_new_ids(&report) {
                hints.push("rows both sides added under the same id are kept as two rows with --renumber (the source's get new ids)");
            }
        }
        if !report.schema_conflicts.is_empty() {
            parts.push(count(report.schema_conflicts.len(), "schema conflict"));
            hints.push("a schema change on one side only merges with --schema-policy one-sided; changes on both sides are merged by hand");
        }
        if !report.violations.is_empty() && !args.allow_violations {
            parts.push(count(report.violations.len(), "violation"));
            hints.push("fix the rows the violations name on either side, or publish them anyway with --allow-violations");
        }
        return Err(MergeStopped {
            what: parts.join(", "),
            hint: hints.join("; "),
        }
        .into());
    }
    Ok(())
}

/// Whether an unresolved conflict is two new rows under one INTEGER PRIMARY KEY, which
/// `--renumber` keeps apart.
pub(crate) fn shared_new_ids(report: &MergeReport) -> bool {
    report.conflicts.iter().any(|c| {
        c.kind == scion_merge::ConflictKind::InsertInsert
            && c.resolution == "unresolved"
            && report
                .tables
                .iter()
                .any(|t| t.table == c.table && t.keyed_by_id)
    })
}

fn read_resolutions(path: &PathBuf) -> Result<BTreeMap<String, Resolution>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| scion_core::EngineError::InvalidInput {
            reason: format!("--resolve {}: cannot read it ({e})", path.display()),
        })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| scion_core::EngineError::InvalidInput {
            reason: format!("--resolve {}: not JSON ({e})", path.display()),
        })?;
    let Some(map) = value.as_object() else {
        return Err(scion_core::EngineError::InvalidInput {
            reason: format!(
                "--resolve {}: expected an object of conflict id to resolution",
                path.display()
            ),
        }
        .into());
    };
    Ok(map
        .iter()
        .map(|(id, v)| (id.clone(), Resolution::from_json(v.clone())))
        .collect())
}

/// The report for people: what happened, per table, every conflict and violation.
pub(crate) fn render(r: &MergeReport) -> String {
    let mut out = String::new();
    let verb = if r.dry_run { "would be" } else { "" };
    let headline = match (r.outcome, r.dry_run) {
        (Outcome::UpToDate, _) => format!("{} already holds every change of {}", r.dst, r.src),
        (Outcome::FastForward, true) => {
            format!(
                "{} would fast-forward to {} (it has not moved since the base)",
                r.dst, r.src
            )
        }
        (Outcome::FastForward, false) => format!("fast-forwarded {} to {}", r.dst, r.src),
        (Outcome::Merged, true) => format!(
            "{} {verb} merged into {} cleanly (dry run: nothing published)",
            r.src, r.dst
        ),
        (Outcome::Merged, false) => format!("merged {} into {}", r.src, r.dst),
        (Outcome::Conflicts, _) => {
            format!("{} cannot be merged into {} as it stands", r.src, r.dst)
        }
    };
    out += &format!("{headline}\nbase: {}\n", r.base.how);
    if let Some(p) = &r.published {
        out += &format!(
            "{} is now version {} (history entry {}; `scion undo {}` takes it back)\n",
            r.dst, p.version, p.history_entry, r.dst
        );
        for w in &p.warnings {
            out += &format!("warning: {w}\n");
        }
    }
    for s in &r.schema {
        out += &format!("schema: {} {} {}\n", s.action, s.kind, s.name);
    }
    for t in &r.tables {
        out += &format!(
            "table {} (by {}): theirs inserted {}, updated {}, deleted {}; {} merged or agreed; {}\n",
            t.table, t.matched_by, t.theirs_inserted, t.theirs_updated, t.theirs_deleted, count(t.merged_cells, "cell"), count(t.conflicts, "conflict")
        );
    }
    let mut renumbered: Vec<(&str, Vec<String>)> = Vec::new();
    for n in &r.renumbered {
        let moved = format!("{} → {}", n.from, n.to);
        match renumbered.last_mut() {
            Some((t, ids)) if *t == n.table => ids.push(moved),
            _ => renumbered.push((&n.table, vec![moved])),
        }
    }
    for (table, ids) in renumbered {
        out += &format!(
            "renumbered {} of {} the source inserted: {}\n",
            count(ids.len(), "row"),
            table,
            ids.join(", ")
        );
    }
    for f in &r.followed_references {
        out += &format!(
            "followed: {}.{} in {} now names the new ids of {}\n",
            f.table,
            f.column,
            count(f.rows, "row"),
            f.parent
        );
    }
    let source = r.src.parse::<Target>().ok().map(|t| t.branch);
    if let Some(src) = source.filter(|_| !r.renumbered.is_empty()) {
        out += &match src.branch.tracking() {
            // A remote-tracking branch (a pull): the remote's hosts take the ids by
            // pulling what this store pushes.
            Some((_, remote_branch)) => format!(
                "note: the remote's {remote_branch} keeps these rows under its own ids: push {} there and pull it on its other hosts before they merge more of their work\n",
                r.dst
            ),
            None => format!(
                "note: {src} keeps these rows under its own ids: bring it up to date (`scion merge {} --into {src}`, a fast-forward) before more of its work is merged\n",
                r.dst
            ),
        };
    }
    for c in &r.schema_conflicts {
        out += &format!("schema conflict: {} {}: {}\n", c.kind, c.name, c.reason);
        for (side, sql) in [
            ("base", &c.base_sql),
            ("ours", &c.ours_sql),
            ("theirs", &c.theirs_sql),
        ] {
            out += &format!("  {side:>6}: {}\n", sql.as_deref().unwrap_or("(none)"));
        }
    }
    for c in &r.conflicts {
        let kind = serde_json::to_value(c.kind).unwrap_or_default();
        out += &format!(
            "conflict {} ({}, {}): {}\n",
            c.id,
            kind.as_str().unwrap_or(""),
            c.resolution,
            conflict_values(c)
        );
    }
    for v in &r.violations {
        let kind = serde_json::to_value(v.kind).unwrap_or_default();
        out += &format!(
            "violation: {} in {} at {}{}{}\n",
            kind.as_str().unwrap_or(""),
            if v.table.is_empty() {
                "the schema"
            } else {
                &v.table
            },
            v.key,
            v.parent
                .as_ref()
                .map(|p| format!(" (parent {p})"))
                .unwrap_or_default(),
            v.message
                .as_ref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default(),
        );
    }
    if !r.unused_resolutions.is_empty() {
        out += &format!(
            "warning: resolutions named no conflict: {}\n",
            r.unused_resolutions.join(", ")
        );
    }
    out
}

/// `1 conflict`, `2 conflicts`.
fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn conflict_values(c: &scion_merge::Conflict) -> String {
    if !c.columns.is_empty() {
        return c
            .columns
            .iter()
            .map(|v| {
                format!(
                    "{}: base {} ours {} theirs {}",
                    v.name, v.base, v.ours, v.theirs
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
    }
    let show = |v: &Option<serde_json::Value>| {
        v.as_ref().map_or("(no row)".to_string(), |v| v.to_string())
    };
    format!("ours {} theirs {}", show(&c.ours), show(&c.theirs))
}
