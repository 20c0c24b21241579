//! The refresh row of `scion bench fork`: rolling back a checked-out branch to a version a
//! clean local file already holds (the checkout is then a clone or an in-kernel copy of
//! that file, not a decode of the version), beside `cp` of the same file.

use std::path::Path;
use std::time::Instant;

use rusqlite::Connection;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::Scion;
use serde::Serialize;

use crate::fork::{br, timed_cp};
use crate::stats::Summary;
use crate::{BenchError, BenchResult, Progress};

#[derive(Debug, Clone, Serialize)]
pub struct RefreshCost {
    pub size_mib: u64,
    /// Rollback of a checked-out branch to its fork point, whose version `main`'s clean
    /// checkout holds: the head moves and the checkout is refreshed from that file.
    pub rollback: Summary,
    /// `cp` of the same file, interleaved with the rollbacks.
    pub cp: Summary,
    /// Rollback median over `cp`'s (goal: <= 1).
    pub vs_cp: f64,
}

/// On `scion` (a generated database of `mib` MiB at `db@main`), fork `refresh`, check it out,
/// change it and checkpoint; then, `runs` times: roll back to the checkpoint (untimed),
/// roll back to the fork point (timed), and `cp` `main`'s checkout (timed).
pub fn refresh_cost(
    scion: &Scion,
    mib: u64,
    runs: usize,
    scratch: &Path,
    progress: Progress<'_>,
) -> BenchResult<RefreshCost> {
    progress(&format!(
        "rollback of a checked-out branch to a version a clean file holds, at {mib} MiB"
    ));
    let main = br("db")?;
    let main_path = scion.checkout(&main, false)?.path;
    scion.fork(&main, &"refresh".parse()?, None)?;
    let b = br("db@refresh")?;
    let path = scion.checkout(&b, false)?.path;
    Connection::open(&path)?.execute("UPDATE orders SET status = 'moved' WHERE id = 1", [])?;
    scion.checkpoint(&b, &"moved".parse()?)?;
    let opts = MoveOptions {
        no_backup: true,
        ..MoveOptions::default()
    };
    let copy_target = scratch.join("refresh-cp.db");
    let (mut rollbacks, mut copies) = (Vec::new(), Vec::new());
    for run in 0..=runs {
        scion.rollback(&b, &"moved".parse()?, &opts)?;
        let start = Instant::now();
        let report = scion.rollback(&b, &"fork".parse()?, &opts)?;
        let took = start.elapsed();
        if report.checkout.is_none() {
            return Err(BenchError::Other("the checkout was not refreshed".into()));
        }
        let cp_took = timed_cp(&main_path, &copy_target)?;
        // The first round warms up.
        if run > 0 {
            rollbacks.push(took);
            copies.push(cp_took);
        }
    }
    let _ = std::fs::remove_file(&copy_target);
    let (rollback, cp) = (Summary::of(&rollbacks), Summary::of(&copies));
    Ok(RefreshCost {
        size_mib: mib,
        vs_cp: rollback.median_ms / cp.median_ms.max(f64::MIN_POSITIVE),
        rollback,
        cp,
    })
}
