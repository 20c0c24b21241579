//! `scion bench merge`: a merge of one changed row on each side, at each size: the dry
//! run and the real merge (time, pages read for both sides' changes, bytes read and
//! written at the store), beside `scion diff` of the source's change (what a dry run should
//! cost) and the alternative a user has today: export base, ours and theirs, `sqldiff` base
//! against theirs, and apply that SQL to ours.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use scion_core::attach::StoreSpec;
use scion_core::{BranchRef, ClonePolicy, Scion, ScionOptions, Target};
use scion_merge::{MergeOptions as Merge, Outcome};
use scion_store::{CountingBackend, LocalBackend};
use serde::Serialize;

use crate::datagen::orders_db;
use crate::machine::{describe, Machine};
use crate::stats::Summary;
use crate::{BenchError, BenchResult, Progress};

#[derive(Debug, Clone)]
pub struct MergeBenchOptions {
    pub dir: PathBuf,
    pub sizes_mib: Vec<u64>,
    pub runs: usize,
}

impl MergeBenchOptions {
    pub fn full(dir: PathBuf) -> Self {
        MergeBenchOptions {
            dir,
            sizes_mib: vec![100, 1024],
            runs: 5,
        }
    }
    pub fn quick(dir: PathBuf) -> Self {
        MergeBenchOptions {
            dir,
            sizes_mib: vec![2],
            runs: 3,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct MergeAtSize {
    pub size_mib: u64,
    pub sqlite_bytes: u64,
    pub page_count: u32,
    pub dry_run: Summary,
    pub merge: Summary,
    /// Pages read to find both sides' changes (the same in a dry run and a merge).
    pub pages_read: u64,
    /// Pages `scion diff` reads for the source's change alone.
    pub diff_pages_read: u64,
    /// At the store, per merge (median run): bytes read and written, requests.
    pub merge_bytes_read: u64,
    pub merge_bytes_written: u64,
    pub merge_requests: u64,
    pub dry_run_bytes_read: u64,
    /// Export the three versions, `sqldiff` base theirs, apply the SQL to ours.
    pub sqldiff: Summary,
    /// `merge` median over `sqldiff` median.
    pub vs_sqldiff: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MergeBenchReport {
    pub machine: Machine,
    pub runs: usize,
    pub sizes: Vec<MergeAtSize>,
}

fn timed<T>(f: impl FnOnce() -> BenchResult<T>) -> BenchResult<(T, Duration)> {
    let t = Instant::now();
    let v = f()?;
    Ok((v, t.elapsed()))
}

fn merge_err(e: scion_merge::MergeError) -> BenchError {
    BenchError::Other(e.to_string())
}

/// One row changed on `target` through the VFS (one commit).
fn change_row(scion: &Scion, target: &str, id: i64, status: &str) -> BenchResult<()> {
    let uri = scion_vfs::uri(target, scion.engine().location(), false);
    let c = Connection::open(uri)?;
    c.execute("UPDATE orders SET status = ?2 WHERE id = ?1", (id, status))?;
    Ok(())
}

pub fn run(opts: &MergeBenchOptions, progress: Progress<'_>) -> BenchResult<MergeBenchReport> {
    scion_vfs::register().map_err(|rc| BenchError::Other(format!("registering the VFS: {rc}")))?;
    std::fs::create_dir_all(&opts.dir)?;
    let machine = describe(&opts.dir);
    let mut sizes = Vec::new();
    for &mib in &opts.sizes_mib {
        let dir = opts.dir.join(format!("merge-{mib}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        progress(&format!("seeding a {mib} MiB database"));
        let native = dir.join("native.db");
        let sqlite_bytes = orders_db(&native, mib, 1)?;
        Connection::open(&native)?.execute_batch("PRAGMA journal_mode=DELETE;")?;
        let rows: i64 =
            Connection::open(&native)?.query_row("SELECT max(id) FROM orders", [], |r| r.get(0))?;
        let store_dir = dir.join("store");
        let counter = Arc::new(CountingBackend::new(Arc::new(
            LocalBackend::open(&store_dir).map_err(|e| BenchError::Other(e.to_string()))?,
        )));
        let scion = Scion::init(
            counter.clone(),
            &StoreSpec::parse(&store_dir.display().to_string())?.location(),
            ScionOptions::new(store_dir.join("checkouts"), ClonePolicy::Auto),
            Default::default(),
        )?;
        scion_vfs::adopt(scion.engine().location(), scion.engine().clone());
        scion.engine().create(&"db".parse()?, Some(&native))?;
        let main: BranchRef = "db".parse()?;
        let page_count = scion.engine().read_ref(&main)?.0.page_count;

        progress(&format!(
            "{mib} MiB: merges of one changed row on each side"
        ));
        let (mut dry, mut real, mut alt) = (Vec::new(), Vec::new(), Vec::new());
        let (mut pages_read, mut diff_pages_read) = (0, 0);
        let mut costs = Vec::new();
        for run in 0..=opts.runs {
            let (dst, src) = (format!("dst{run}"), format!("src{run}"));
            scion
                .engine()
                .fork(&main, &dst.parse()?, Default::default())?;
            let dst_ref: BranchRef = format!("db@{dst}").parse()?;
            scion
                .engine()
                .fork(&dst_ref, &src.parse()?, Default::default())?;
            change_row(&scion, &format!("db@{dst}"), rows / 3, "ours")?;
            change_row(&scion, &format!("db@{src}"), rows * 2 / 3, "theirs")?;
            let src_t: Target = format!("db@{src}").parse()?;

            let before = counter.counts();
            let dry_opts = Merge {
                dry_run: true,
                ..Default::default()
            };
            let (report, t_dry) = timed(|| {
                scion_merge::merge(
                    scion.engine(),
                    &mut scion.working_files(),
                    &src_t,
                    &dst_ref,
                    &dry_opts,
                )
                .map_err(merge_err)
            })?;
            let after_dry = counter.counts();
            let (done, t_real) = timed(|| {
                scion_merge::merge(
                    scion.engine(),
                    &mut scion.working_files(),
                    &src_t,
                    &dst_ref,
                    &Default::default(),
                )
                .map_err(merge_err)
            })?;
            let after = counter.counts();
            if done.outcome != Outcome::Merged {
                return Err(BenchError::Other(format!(
                    "the merge did not merge: {done:?}"
                )));
            }
            pages_read = report.pages_read;
            let base: Target = format!("db@{src}@fork").parse()?;
            diff_pages_read = scion.diff(&base, &src_t, &Default::default())?.pages_read;

            let t_alt = sqldiff_merge(&scion, &dir, &base, &src_t, &format!("db@{dst}"))?;
            if run > 0 {
                dry.push(t_dry);
                real.push(t_real);
                alt.push(t_alt);
                costs.push((
                    after.bytes_read - after_dry.bytes_read,
                    after.bytes_written - after_dry.bytes_written,
                    after.requests() - after_dry.requests(),
                    after_dry.bytes_read - before.bytes_read,
                ));
            }
        }
        costs.sort();
        let (merge_bytes_read, merge_bytes_written, merge_requests, dry_run_bytes_read) =
            costs[costs.len() / 2];
        let (dry_run, merge, sqldiff) = (Summary::of(&dry), Summary::of(&real), Summary::of(&alt));
        sizes.push(MergeAtSize {
            size_mib: mib,
            sqlite_bytes,
            page_count,
            vs_sqldiff: merge.median_ms / sqldiff.median_ms,
            dry_run,
            merge,
            pages_read,
            diff_pages_read,
            merge_bytes_read,
            merge_bytes_written,
            merge_requests,
            dry_run_bytes_read,
            sqldiff,
        });
        drop(scion);
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(MergeBenchReport {
        machine,
        runs: opts.runs,
        sizes,
    })
}

/// Today's alternative: export base, ours (as it was) and theirs, `sqldiff --primarykey`
/// base theirs, and run the SQL on ours. Two-way, it cannot see conflicts at all; it is the
/// floor of what a user pays to combine the two files by hand.
fn sqldiff_merge(
    scion: &Scion,
    dir: &Path,
    base: &Target,
    theirs: &Target,
    ours: &str,
) -> BenchResult<Duration> {
    let ours_before: Target = format!("{ours}@fork").parse()?;
    let files = ["base.db", "theirs.db", "ours.db"].map(|f| dir.join(f));
    for f in &files {
        let _ = std::fs::remove_file(f);
    }
    let t = Instant::now();
    scion.export(base, &files[0], false)?;
    scion.export(theirs, &files[1], false)?;
    scion.export(&ours_before, &files[2], false)?;
    let diff = std::process::Command::new("sqldiff")
        .arg("--primarykey")
        .args([&files[0], &files[1]])
        .output()
        .map_err(|e| {
            BenchError::Other(format!("running sqldiff (apt install sqlite3-tools): {e}"))
        })?;
    if !diff.status.success() {
        return Err(BenchError::Other(format!(
            "sqldiff failed: {}",
            String::from_utf8_lossy(&diff.stderr)
        )));
    }
    let sql = String::from_utf8_lossy(&diff.stdout);
    let c = Connection::open(&files[2])?;
    c.execute_batch(&format!("BEGIN; {sql} COMMIT;"))?;
    Ok(t.elapsed())
}

impl MergeBenchReport {
    pub fn render(&self) -> String {
        let mut s = format!(
            "{}\nmedians of {} runs after a warm-up; one changed row on each side\n",
            self.machine.line(),
            self.runs
        );
        for z in &self.sizes {
            s += &format!(
                "\n{} MiB ({} B, {} pages)\n",
                z.size_mib, z.sqlite_bytes, z.page_count
            );
            s += &format!(
                "  dry run              {:>10.3} ms   {} pages read for both sides' changes ({} for `scion diff` of one side), {} B read at the store\n",
                z.dry_run.median_ms, z.pages_read, z.diff_pages_read, z.dry_run_bytes_read
            );
            s += &format!(
                "  merge                {:>10.3} ms   {} B read, {} B written, {} requests at the store\n",
                z.merge.median_ms, z.merge_bytes_read, z.merge_bytes_written, z.merge_requests
            );
            s += &format!(
                "  export x3 + sqldiff  {:>10.3} ms   merge / this = {:.4}\n",
                z.sqldiff.median_ms, z.vs_sqldiff
            );
        }
        s
    }
}
