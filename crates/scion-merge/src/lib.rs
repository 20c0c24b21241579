//! `scion-merge`: bring a branch's changes into another branch of the same database,
//! three-way at the cell, atomically.
//!
//! The base is the best common ancestor of the two versions in the version graph
//! (`base.rs`). Both sides' changes
//! since the base come from the engine's page-skipping row delta (rows of pages neither
//! side changed are never read); the schema is settled first (`schema.rs`), then the rows
//! (`plan.rs`). The plan is applied through SQLite to a scratch fork of the destination,
//! opened by the scion VFS (`apply.rs`), checked for violations, and the scratch's version
//! is published as the destination's head by one compare-and-swap, recorded in its head
//! history with the merge's sources, or nothing is published. There is no merge in
//! progress: conflicts and violations are data in the [`MergeReport`].

mod apply;
mod base;
mod error;
mod plan;
mod renumber;
mod report;
mod schema;
mod values;
mod virtual_tables;

use rusqlite::{Connection, OpenFlags};
use std::sync::Arc;

use scion_engine::history::MergedFrom;
use scion_engine::ops::moves::{StoreOnly, WorkingFiles};
use scion_engine::{BranchName, BranchRef, Engine, ResolvedVersion, Target};

pub use error::{FilesError, MergeError, MergeResult};
pub use report::{
    BaseReport, CellValues, Conflict, ConflictKind, FollowedReferences, Granularity, MergeOptions,
    MergeReport, Outcome, Published, Renumbered, Resolution, SchemaConflict, SchemaPolicy,
    SchemaStep, Strategy, TableReport, Violation, ViolationKind,
};

/// How long a scratch fork outlives a merge killed before it removed it.
const SCRATCH_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// Merge `src` (a branch head, or a checkpoint) into `dst`, with `files` (this host's
/// checkouts, from `Scion::working_files`) asked before `dst`'s head moves and brought
/// along after.
pub fn merge<G>(
    engine: &Arc<Engine>,
    files: &mut G,
    src: &Target,
    dst: &BranchRef,
    opts: &MergeOptions,
) -> MergeResult<MergeReport>
where
    G: WorkingFiles,
    G::Error: scion_described::DescribedError,
{
    if src.branch.db != dst.db {
        return Err(MergeError::DifferentDatabases {
            src: src.to_string(),
            dst: dst.to_string(),
        });
    }
    if src.branch == *dst {
        return Err(MergeError::SameBranch {
            branch: dst.to_string(),
        });
    }
    if let Some(b) = opts.base.as_ref().filter(|b| b.branch.db != dst.db) {
        return Err(MergeError::BaseOfAnotherDatabase {
            base: b.to_string(),
            dst: dst.to_string(),
        });
    }
    let (d, _) = engine.read_ref(dst)?;
    let ours = ResolvedVersion {
        root: d.root,
        version: d.version,
    };
    let theirs = engine.resolve(src)?;
    if !opts.dry_run {
        // Refused before any work; the publish checks again against the ref it replaces.
        if d.protected && !opts.allow_protected {
            return Err(scion_engine::EngineError::Protected {
                branch: dst.clone(),
                action: "merging into it",
            }
            .into());
        }
        // A checkout of dst holding changes not checkpointed would be stranded by the move.
        files.refuse_unsaved(dst, &d).map_err(MergeError::files)?;
    }
    let base = base::find_base(
        engine,
        src,
        &theirs.root,
        (dst, &d),
        &ours.root,
        opts.base.as_ref(),
    )?;
    let mut report = MergeReport {
        src: src.to_string(),
        dst: dst.to_string(),
        dry_run: opts.dry_run,
        outcome: Outcome::UpToDate,
        base: BaseReport {
            how: base.how.clone(),
            root: base.root.to_string(),
        },
        strategy: opts.strategy,
        granularity: opts.granularity,
        schema_policy: opts.schema_policy,
        schema: Vec::new(),
        schema_conflicts: Vec::new(),
        tables: Vec::new(),
        conflicts: Vec::new(),
        violations: Vec::new(),
        renumbered: Vec::new(),
        followed_references: Vec::new(),
        unresolved: 0,
        unused_resolutions: Vec::new(),
        pages_read: 0,
        published: None,
    };
    let mut merged = MergedFrom {
        branch: src.branch.branch.to_string(),
        root: theirs.root,
        version: theirs.version,
        base: base.root,
        renumbered: Vec::new(),
    };
    if theirs.root == base.root || theirs.root == ours.root {
        report.unused_resolutions = opts.resolutions.keys().cloned().collect();
        return Ok(report);
    }
    if ours.root == base.root {
        report.outcome = Outcome::FastForward;
        report.unused_resolutions = opts.resolutions.keys().cloned().collect();
        // What it brings, read from the pages the two versions do not share.
        let delta_theirs = engine.version_delta(&base.root, &theirs.root)?;
        report.pages_read = delta_theirs.pages_read;
        report.tables = plan::fast_forward_tables(&delta_theirs);
        if !opts.dry_run {
            let moved = engine
                .publish_merge(dst, &ours, theirs.root, merged, opts.allow_protected, files)
                .map_err(MergeError::files)?;
            report.published = Some(moved.into());
        }
        return Ok(report);
    }

    let deltas = engine
        .version_delta(&base.root, &ours.root)
        .and_then(|o| Ok((o, engine.version_delta(&base.root, &theirs.root)?)));
    let (mut delta_ours, mut delta_theirs) = match deltas {
        Ok(d) => d,
        // A base whose pages gc reclaimed is known to the graph but cannot be read: a
        // refusal that says so, not a report of damage.
        Err(e @ scion_engine::EngineError::Corrupt { .. }) => {
            if engine.version_is_whole(&base.root)? {
                return Err(e.into());
            }
            return Err(MergeError::BaseReclaimed {
                src: src.to_string(),
                dst: dst.to_string(),
                base: base.how.clone(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    report.pages_read = delta_ours.pages_read + delta_theirs.pages_read;
    let virtual_plan = virtual_tables::prepare(
        engine,
        dst,
        (&base.root, &ours.root, &theirs.root),
        &mut delta_ours,
        &mut delta_theirs,
    )?;
    let mut readers = virtual_tables::Readers::new(engine, dst);
    // A source merged before with renumbered rows, not brought up to date since, still has
    // those rows under its own ids: its changes to them (or to rows that refer to them)
    // would land on the destination's rows of those ids.
    if let Some((seq, tables)) = renumbered_at_base(&d.history, &base.root) {
        readers.conn(&theirs.root)?;
        let touched = renumber::touched(&delta_theirs, &tables, readers.opened(&theirs.root))?;
        if !touched.is_empty() {
            return Err(MergeError::RenumberedSource {
                src: src.branch.to_string(),
                dst: dst.to_string(),
                entry: seq,
                tables: touched,
            });
        }
    }
    if opts.renumber {
        readers.conn(&ours.root)?;
        readers.conn(&theirs.root)?;
        let done = renumber::renumber(
            &delta_ours,
            &mut delta_theirs,
            readers.opened(&ours.root),
            readers.opened(&theirs.root),
        )?;
        report.renumbered = done.renumbered;
        report.followed_references = done.followed;
        // In table order already.
        merged.renumbered = report.renumbered.iter().map(|r| r.table.clone()).collect();
        merged.renumbered.dedup();
    }
    let mut schema_plan = schema::plan(&delta_ours, &delta_theirs, opts.schema_policy);
    schema_plan.after_rows.extend(virtual_plan.rebuilds);
    let data = plan::plan(&delta_ours, &delta_theirs, &schema_plan, opts)?;
    report.unused_resolutions = opts
        .resolutions
        .keys()
        .filter(|id| !data.used_resolutions.contains(*id))
        .cloned()
        .collect();
    report.schema = schema_plan.steps.clone();
    report.schema_conflicts = schema_plan.conflicts.clone();
    report.tables = data.tables.clone();
    report.conflicts = data.conflicts.clone();
    report.unresolved = data.unresolved;
    let nothing_to_do = data.changes.is_empty()
        && schema_plan.before_rows.is_empty()
        && schema_plan.after_rows.is_empty()
        && data.sequences.is_empty();
    if !report.schema_conflicts.is_empty() {
        report.outcome = Outcome::Conflicts;
        return Ok(report);
    }
    if nothing_to_do && report.unresolved == 0 {
        // Both sides made the same changes (or differ only in how pages are laid out): the
        // source is not an ancestor, so this is still a merge, recorded with both parents,
        // or the same merge would be judged anew next time.
        report.outcome = Outcome::Merged;
        if !opts.dry_run {
            let moved = engine
                .publish_merge(dst, &ours, ours.root, merged, opts.allow_protected, files)
                .map_err(MergeError::files)?;
            report.published = Some(moved.into());
        }
        return Ok(report);
    }

    let scratch = Scratch::fork(engine, dst, &ours)?;
    let result = scratch.apply(engine, &schema_plan, &data, opts, &mut report);
    let result_root = match result {
        Ok(root) => root,
        Err(e) => {
            scratch.remove(engine);
            return Err(e);
        }
    };
    // A result equal to ours (every conflict settled ours' way) is a merge all the same.
    let published = result_root.map(|root| {
        engine
            .publish_merge(dst, &ours, root, merged, opts.allow_protected, files)
            .map_err(MergeError::files)
    });
    scratch.remove(engine);
    match published {
        Some(moved) => {
            report.outcome = Outcome::Merged;
            report.published = Some(moved?.into());
        }
        None if report.outcome != Outcome::Conflicts => {
            // A dry run: what a real run would do.
            report.outcome = Outcome::Merged;
        }
        None => {}
    }
    Ok(report)
}

/// The head-history entry (its `seq`) of a merge into the destination whose source
/// version is `base` and whose rows were renumbered, with the tables they were in.
fn renumbered_at_base(
    history: &[scion_engine::history::HeadEntry],
    base: &scion_engine::format::Locator,
) -> Option<(u64, Vec<String>)> {
    history.iter().rev().find_map(|e| {
        let m = e.merged.as_ref()?;
        (m.root == *base && !m.renumbered.is_empty()).then(|| (e.seq, m.renumbered.clone()))
    })
}

/// The fork of the destination the merge is applied to: one ref, removed afterwards (a
/// merge killed before that leaves it to expire with its TTL).
struct Scratch {
    branch: BranchRef,
}

impl Scratch {
    fn fork(engine: &Arc<Engine>, dst: &BranchRef, ours: &ResolvedVersion) -> MergeResult<Scratch> {
        let mut tag = [0u8; 4];
        getrandom::fill(&mut tag).expect("the OS random source is available");
        let tag: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        let stem: String = dst.branch.as_str().chars().take(80).collect();
        let name = BranchName::new(&format!("{stem}-merge-{tag}"))?;
        let branch = BranchRef::new(dst.db.clone(), name);
        engine.fork(
            dst,
            &branch.branch,
            scion_engine::ForkOptions {
                ttl: Some(SCRATCH_TTL),
                ..Default::default()
            },
        )?;
        let scratch = Scratch { branch };
        let (r, _) = engine.read_ref(&scratch.branch)?;
        if r.root != ours.root {
            // dst moved between reading it and forking it: the plan is for another version.
            scratch.remove(engine);
            return Err(scion_engine::EngineError::Conflict {
                branch: dst.clone(),
            }
            .into());
        }
        Ok(scratch)
    }

    /// Apply the plan in one transaction. Returns the scratch's new head, or none when the
    /// transaction was rolled back (a dry run, or a merge that conflicts or violates).
    fn apply(
        &self,
        engine: &Arc<Engine>,
        schema: &schema::SchemaPlan,
        data: &plan::DataPlan,
        opts: &MergeOptions,
        report: &mut MergeReport,
    ) -> MergeResult<Option<scion_engine::format::Locator>> {
        scion_vfs::register().map_err(MergeError::Vfs)?;
        scion_vfs::adopt(engine.location(), engine.clone());
        let uri = scion_vfs::uri(&self.branch.to_string(), engine.location(), false);
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(&uri, flags)
            .map_err(MergeError::apply("opening the scratch fork"))?;
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER,
            false,
        )
        .map_err(MergeError::apply("turning triggers off"))?;
        conn.execute_batch("PRAGMA foreign_keys = OFF; BEGIN IMMEDIATE")
            .map_err(MergeError::apply("starting the transaction"))?;
        let applied = match apply::apply(&conn, schema, data) {
            Ok(a) => a,
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e);
            }
        };
        report.violations = applied.violations;
        for c in applied.clamped {
            report
                .tables
                .iter_mut()
                .filter(|t| t.table == c.table)
                .for_each(|t| t.conflicts += 1);
            report.conflicts.push(c);
        }
        let stopped =
            report.unresolved > 0 || (!report.violations.is_empty() && !opts.allow_violations);
        if stopped {
            report.outcome = Outcome::Conflicts;
        }
        if stopped || opts.dry_run {
            conn.execute_batch("ROLLBACK")
                .map_err(MergeError::apply("rolling back"))?;
            return Ok(None);
        }
        conn.execute_batch("COMMIT")
            .map_err(MergeError::apply("committing to the scratch fork"))?;
        drop(conn);
        let (r, _) = engine.read_ref(&self.branch)?;
        Ok(Some(r.root))
    }

    fn remove(&self, engine: &Engine) {
        // Best effort: what is left expires with the TTL. No checkout was made of it.
        let _ = engine.destroy(&self.branch, true, &mut StoreOnly);
    }
}
