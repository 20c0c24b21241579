//! The refresh rows of `scion bench fork`: rolling back a checked-out branch, beside `cp`
//! of the file. Two ways in: the checkout is clean and holds a version a few pages away
//! (only those pages are rewritten), or it holds a change that the rollback discards with
//! `force` (the file is hashed to find what changed, then those pages are rewritten too).

use std::path::Path;
use std::time::Instant;

use rusqlite::Connection;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::Scion;
use serde::Serialize;

use crate::checkout_vs_cp::timed_cp;
use crate::stats::Summary;
use crate::{br, BenchError, BenchResult, Progress};

#[derive(Debug, Clone, Serialize)]
pub struct RefreshCost {
    pub size_mib: u64,
    /// Rollback of a checked-out branch whose clean checkout holds a version one row away
    /// (checkpoint `moved`) to its fork point: the pages that differ are rewritten.
    pub rollback: Summary,
    /// Rollback to the fork point again with a one-row change in the checkout, discarded
    /// (`force`).
    pub rollback_discarding: Summary,
    /// `cp` of the same file, interleaved with the rollbacks.
    pub cp: Summary,
    /// Rollback median over `cp`'s (goal: <= 1).
    pub vs_cp: f64,
    /// The same for the rollback discarding a change.
    pub discarding_vs_cp: f64,
}

/// On `scion` (a generated database of `mib` MiB at `db@main`), fork `refresh`, check it out,
/// change it and checkpoint; then, `runs` times: roll back to the checkpoint (untimed),
/// roll back to the fork point (timed), change the checkout and roll back to the fork
/// point again discarding it (timed), and `cp` `main`'s checkout (timed).
pub(crate) fn refresh_cost(
    scion: &Scion,
    mib: u64,
    runs: usize,
    scratch: &Path,
    progress: Progress<'_>,
) -> BenchResult<RefreshCost> {
    progress(&format!(
        "rollback of a checked-out branch, clean and discarding a change, at {mib} MiB"
    ));
    let main = br("db")?;
    let main_path = scion.checkout(&main, false)?.path;
    scion
        .engine()
        .fork(&main, &"refresh".parse()?, Default::default())?;
    let b = br("db@refresh")?;
    let path = scion.checkout(&b, false)?.path;
    let change = |status: &str| -> BenchResult<()> {
        Connection::open(&path)?.execute("UPDATE orders SET status = ?1 WHERE id = 1", [status])?;
        Ok(())
    };
    change("moved")?;
    scion.checkpoint(&b, &"moved".parse()?, Default::default())?;
    let opts = MoveOptions {
        no_backup: true,
        ..MoveOptions::default()
    };
    let discard = MoveOptions {
        force: true,
        ..opts.clone()
    };
    let copy_target = scratch.join("refresh-cp.db");
    let (mut in_place, mut discards, mut copies) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..=runs {
        scion.rollback(&b, &"moved".parse()?, &opts)?;
        let start = Instant::now();
        let report = scion.rollback(&b, &"fork".parse()?, &opts)?;
        let patched = start.elapsed();
        if report.checkout.is_none() {
            return Err(BenchError::Other("the checkout was not refreshed".into()));
        }
        change("unsaved")?;
        let start = Instant::now();
        let report = scion.rollback(&b, &"fork".parse()?, &discard)?;
        let discarded = start.elapsed();
        if !report.discarded_changes {
            return Err(BenchError::Other("the change was not discarded".into()));
        }
        let cp_took = timed_cp(&main_path, &copy_target)?;
        // The first round warms up.
        if run > 0 {
            in_place.push(patched);
            discards.push(discarded);
            copies.push(cp_took);
        }
    }
    let _ = std::fs::remove_file(&copy_target);
    let (rollback, discarding, cp) = (
        Summary::of(&in_place),
        Summary::of(&discards),
        Summary::of(&copies),
    );
    let floor = cp.median_ms.max(f64::MIN_POSITIVE);
    Ok(RefreshCost {
        size_mib: mib,
        vs_cp: rollback.median_ms / floor,
        discarding_vs_cp: discarding.median_ms / floor,
        rollback,
        rollback_discarding: discarding,
        cp,
    })
}
