//! Writing a whole version out beside `cp` of the same file: a checkout with nothing local
//! (in the bench's store, and in a store of the same database made with page compression
//! off) against a plain `cp`, and an export against `cp` plus an fsync. Each pair takes
//! turns going first, so whichever runs second writes into a page cache the first has just
//! churned, alike for both.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scion_core::{
    BranchRef, CheckoutAction, ClonePolicy, PageCompression, Scion, ScionOptions, StoreSettings,
};
use scion_store::LocalBackend;
use serde::Serialize;

use crate::stats::Summary;
use crate::{BenchError, BenchResult, Progress};

/// scion beside its baseline, timed in alternation.
#[derive(Debug, Clone, Serialize)]
pub struct Materialize {
    pub size_mib: u64,
    pub scion: Summary,
    pub cp: Summary,
    /// scion throughput as a fraction of cp's (cp median / scion median).
    pub throughput_vs_cp: f64,
}

/// Every whole-file write the bench times against `cp`.
#[derive(Debug, Clone, Serialize)]
pub struct AgainstCp {
    /// A checkout with nothing local, in the bench's (lz4) store.
    pub materialize: Materialize,
    /// The same, in a store of the same database made with `--page-compression none`.
    pub materialize_uncompressed: Materialize,
    /// `scion export` (fsynced) beside `cp` followed by an fsync of the copy.
    pub export: Materialize,
}

/// Time `scion` and `cp` `runs` times each, alternating which goes first. Each closure
/// does its own untimed preparation and answers the time of the part that counts.
fn race(
    size_mib: u64,
    runs: usize,
    mut scion: impl FnMut() -> BenchResult<Duration>,
    mut cp: impl FnMut() -> BenchResult<Duration>,
) -> BenchResult<Materialize> {
    let (mut scion_samples, mut cp_samples) = (Vec::new(), Vec::new());
    for i in 0..runs {
        if i % 2 == 1 {
            cp_samples.push(cp()?);
        }
        scion_samples.push(scion()?);
        if i % 2 == 0 {
            cp_samples.push(cp()?);
        }
    }
    let (scion, cp) = (Summary::of(&scion_samples), Summary::of(&cp_samples));
    Ok(Materialize {
        size_mib,
        throughput_vs_cp: cp.median_ms / scion.median_ms,
        scion,
        cp,
    })
}

/// Remove `branch`'s checkout, then time a checkout that must materialize it.
fn timed_checkout(scion: &Scion, branch: &BranchRef) -> BenchResult<Duration> {
    remove_checkout(&scion.checkout_path(branch));
    let start = Instant::now();
    let r = scion.checkout(branch, false)?;
    let took = start.elapsed();
    if r.action != CheckoutAction::Materialized {
        return Err(BenchError::Other(format!(
            "expected a materialization, got {:?}",
            r.action
        )));
    }
    Ok(took)
}

/// The rows at `size_mib`: `scion`'s database `db` (imported from `source`, its main branch
/// checked out), measured in `work`.
pub(crate) fn measure(
    scion: &Scion,
    db: &str,
    source: &Path,
    size_mib: u64,
    runs: usize,
    work: &Path,
    progress: Progress<'_>,
) -> BenchResult<AgainstCp> {
    let main: BranchRef = db.parse()?;
    // `cp` copies a file of its own, so that neither contestant reads what the other wrote.
    let cp_source = work.join("cp-source.db");
    let copy_target = work.join("cp-target.db");
    std::fs::copy(scion.checkout_path(&main), &cp_source)?;

    progress(&format!(
        "materializing {size_mib} MiB against cp, {runs} runs each"
    ));
    let materialize = race(
        size_mib,
        runs,
        || timed_checkout(scion, &main),
        || timed_cp(&cp_source, &copy_target),
    )?;

    progress(&format!(
        "importing {size_mib} MiB into a store without page compression"
    ));
    let raw_dir = work.join("uncompressed");
    let raw = Scion::init(
        Arc::new(LocalBackend::open(&raw_dir).map_err(|e| BenchError::Other(e.to_string()))?),
        "bench-uncompressed",
        ScionOptions::new(raw_dir.join("checkouts"), ClonePolicy::Auto),
        StoreSettings {
            page_compression: PageCompression::Uncompressed,
            ..Default::default()
        },
    )?;
    raw.engine().create(&db.parse()?, Some(source))?;
    crate::stats::settle_disk();
    progress(&format!(
        "materializing {size_mib} MiB from the uncompressed store against cp, {runs} runs each"
    ));
    let materialize_uncompressed = race(
        size_mib,
        runs,
        || timed_checkout(&raw, &main),
        || timed_cp(&cp_source, &copy_target),
    )?;
    drop(raw);
    let _ = std::fs::remove_dir_all(&raw_dir);

    progress(&format!(
        "exporting {size_mib} MiB against cp + fsync, {runs} runs each"
    ));
    let export_target = work.join("export.db");
    let target: scion_core::Target = db.parse()?;
    let export = race(
        size_mib,
        runs,
        || {
            let _ = std::fs::remove_file(&export_target);
            let start = Instant::now();
            scion.export(&target, &export_target, false)?;
            Ok(start.elapsed())
        },
        || timed_cp_durable(&cp_source, &copy_target),
    )?;
    for f in [&export_target, &copy_target, &cp_source] {
        let _ = std::fs::remove_file(f);
    }
    Ok(AgainstCp {
        materialize,
        materialize_uncompressed,
        export,
    })
}

/// `cp src dst` (after removing `dst`), timed: the baseline a user would reach for.
pub(crate) fn timed_cp(src: &Path, dst: &Path) -> BenchResult<Duration> {
    let _ = std::fs::remove_file(dst);
    let start = Instant::now();
    let ok = Command::new("cp").arg(src).arg(dst).status()?.success();
    let took = start.elapsed();
    if !ok {
        return Err(BenchError::Other("cp failed".into()));
    }
    Ok(took)
}

/// `cp src dst` and an fsync of `dst` and its directory, timed: what a durable copy costs,
/// beside `scion export` (which syncs both before it answers).
fn timed_cp_durable(src: &Path, dst: &Path) -> BenchResult<Duration> {
    let _ = std::fs::remove_file(dst);
    let start = Instant::now();
    if !Command::new("cp").arg(src).arg(dst).status()?.success() {
        return Err(BenchError::Other("cp failed".into()));
    }
    std::fs::File::open(dst)?.sync_all()?;
    std::fs::File::open(dst.parent().unwrap_or(Path::new(".")))?.sync_all()?;
    Ok(start.elapsed())
}

/// Remove a checkout and every file beside it.
pub(crate) fn remove_checkout(path: &Path) {
    for suffix in ["", "-wal", "-shm", ".scion"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
