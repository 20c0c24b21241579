//! `scion bench remote`: branches that travel. At each size: the first push of a database
//! to a local-directory remote (and, with an S3 location, to S3) beside copying the same
//! segment files (`cp` with an fsync per file; the same object-store client's uploads, four
//! in flight); then the push of a one-row commit and the pull of one made at the remote,
//! counted at the store that receives it (objects and bytes written). Then `push --follow`
//! under single-row commits at a steady rate: the lag of each version, from its commit to
//! the remote's ref naming it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::progress::ProgressSink;
use scion_core::{BranchRef, RemoteName, Scion, StoreSettings};
use scion_remote::{FollowOptions, PullOptions, PushOptions, Remote};
use scion_store::{Backend, CountingBackend, PutMode};
use serde::Serialize;

use crate::datagen::orders_db;
use crate::machine::{describe, Machine};
use crate::stats::Summary;
use crate::{BenchError, BenchResult, Progress};

#[derive(Debug, Clone)]
pub struct RemoteBenchOptions {
    pub dir: PathBuf,
    pub sizes_mib: Vec<u64>,
    pub runs: usize,
    /// An S3 location to push to as well (`s3://bucket/prefix`; the bench writes under it).
    pub s3: Option<String>,
    /// How long `--follow` is measured, and at how many commits a second.
    pub follow_secs: u64,
    pub follow_rate: u64,
}

impl RemoteBenchOptions {
    pub fn full(dir: PathBuf) -> Self {
        RemoteBenchOptions {
            dir,
            sizes_mib: vec![100, 1024],
            runs: 3,
            s3: None,
            follow_secs: 20,
            follow_rate: 100,
        }
    }
    pub fn quick(dir: PathBuf) -> Self {
        RemoteBenchOptions {
            dir,
            sizes_mib: vec![4],
            runs: 1,
            s3: None,
            follow_secs: 2,
            follow_rate: 50,
        }
    }
}

/// A first push beside copying the same segment files.
#[derive(Debug, Clone, Serialize)]
pub struct FirstPush {
    pub push: Summary,
    pub copy: Summary,
    /// `push` median over `copy` median.
    pub vs_copy: f64,
    pub bytes_sent: u64,
    pub objects_sent: u64,
}

/// What one small transfer wrote at the receiving store.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SmallTransfer {
    /// Segments sent, and their bytes.
    pub objects_sent: u64,
    pub bytes_sent: u64,
    /// Every object written at the receiver (segments and refs), and their bytes.
    pub puts: u64,
    pub bytes_written: u64,
    pub ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RemoteAtSize {
    pub size_mib: u64,
    pub sqlite_bytes: u64,
    /// The store's size of the branch: its segments' bytes.
    pub branch_store_bytes: u64,
    pub segments: u64,
    pub to_directory: FirstPush,
    pub to_s3: Option<FirstPush>,
    pub push_one_row: SmallTransfer,
    pub pull_one_row: SmallTransfer,
}

#[derive(Debug, Clone, Serialize)]
pub struct FollowBench {
    pub size_mib: u64,
    pub commits: u64,
    pub rate_per_sec: f64,
    pub interval_ms: u64,
    pub summary: scion_remote::FollowSummary,
}

#[derive(Debug, Clone, Serialize)]
pub struct RemoteBenchReport {
    pub machine: Machine,
    pub runs: usize,
    pub sizes: Vec<RemoteAtSize>,
    pub follow: Option<FollowBench>,
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Other(e.to_string())
}

fn new_store(location: &str) -> BenchResult<(Scion, Arc<CountingBackend>)> {
    let spec = StoreSpec::parse(location)?;
    let a = Scion::attach(
        &spec,
        AttachOptions {
            init: Some(StoreSettings::default()),
            ..Default::default()
        },
    )?;
    Ok((a.scion, a.counter))
}

fn remote(local: &Scion, location: &str) -> BenchResult<Remote> {
    Remote::open_at(
        local,
        RemoteName::new("bench")?,
        location,
        ProgressSink::default(),
    )
    .map_err(err)
}

/// A first push of `main` to `r`: how long it took, and the bytes and segments it sent.
fn timed_push(laptop: &Scion, r: &Remote, main: &BranchRef) -> BenchResult<(Duration, (u64, u64))> {
    let t = Instant::now();
    let rep = scion_remote::push(
        laptop,
        r,
        main,
        &PushOptions::default(),
        &*ProgressSink::default(),
    )
    .map_err(err)?;
    let sent = &rep.transfer.stats;
    Ok((t.elapsed(), (sent.bytes_sent, sent.objects_sent)))
}

/// One row changed on `target` through the VFS (one commit).
fn change_row(location: &str, target: &str, id: i64) -> BenchResult<()> {
    let c = Connection::open(scion_vfs::uri(target, location, false))?;
    c.execute("UPDATE orders SET status = 'changed' WHERE id = ?1", [id])?;
    Ok(())
}

fn segment_files(store: &Path) -> BenchResult<Vec<(PathBuf, u64)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(store.join("segments"))? {
        let e = e?;
        out.push((e.path(), e.metadata()?.len()));
    }
    out.sort();
    Ok(out)
}

/// `cp` of every segment file into `to`, each fsynced, and the directory.
fn copy_files(files: &[(PathBuf, u64)], to: &Path) -> BenchResult<()> {
    std::fs::create_dir_all(to)?;
    for (f, _) in files {
        let dst = to.join(f.file_name().unwrap_or_default());
        std::fs::copy(f, &dst)?;
        std::fs::File::open(&dst)?.sync_all()?;
    }
    std::fs::File::open(to)?.sync_all()?;
    Ok(())
}

/// The same files uploaded by the object-store client scion uses, four in flight.
fn upload_files(files: &[(PathBuf, u64)], location: &str) -> BenchResult<()> {
    let StoreSpec::S3(loc) = StoreSpec::parse(location)? else {
        return Err(err(format!("{location} is not an s3:// location")));
    };
    let s3 =
        scion_store::CloudBackend::attach_s3(loc, &scion_store::S3Config::from_env().map_err(err)?)
            .map_err(err)?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::Mutex::new(None);
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| loop {
                let Some((f, _)) = files.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return;
                };
                let key = format!(
                    "copy/{}",
                    f.file_name().unwrap_or_default().to_string_lossy()
                );
                let put = std::fs::read(f)
                    .map_err(err)
                    .and_then(|data| s3.put(&key, &data, PutMode::Overwrite).map_err(err));
                if let Err(e) = put {
                    *failed.lock().unwrap() = Some(e);
                    return;
                }
            });
        }
    });
    match failed.into_inner().unwrap() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos:x}")
}

pub fn run(opts: &RemoteBenchOptions, progress: Progress<'_>) -> BenchResult<RemoteBenchReport> {
    scion_vfs::register().map_err(|rc| err(format!("registering the VFS: {rc}")))?;
    std::fs::create_dir_all(&opts.dir)?;
    let machine = describe(&opts.dir);
    let mut sizes = Vec::new();
    let mut follow = None;
    for &mib in &opts.sizes_mib {
        let dir = opts.dir.join(format!("remote-{mib}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        progress(&format!("seeding a {mib} MiB database"));
        let native = dir.join("native.db");
        let sqlite_bytes = orders_db(&native, mib, 1)?;
        Connection::open(&native)?.execute_batch("PRAGMA journal_mode=DELETE;")?;
        let rows: i64 =
            Connection::open(&native)?.query_row("SELECT max(id) FROM orders", [], |r| r.get(0))?;
        let laptop_dir = dir.join("laptop");
        let (laptop, laptop_counts) = new_store(&laptop_dir.display().to_string())?;
        laptop.engine().create(&"db".parse()?, Some(&native))?;
        let main: BranchRef = "db".parse()?;
        let files = segment_files(&laptop_dir)?;
        let branch_store_bytes = files.iter().map(|(_, n)| n).sum();

        progress(&format!(
            "{mib} MiB: first push to a directory, and cp of the segments"
        ));
        let (mut push_t, mut copy_t) = (Vec::new(), Vec::new());
        let mut sent = (0, 0);
        let mut kept_remote = None;
        for run in 0..opts.runs {
            let at = dir.join(format!("remote-{run}"));
            new_store(&at.display().to_string())?;
            let r = remote(&laptop, &at.display().to_string())?;
            crate::stats::settle_disk();
            let (took, what) = timed_push(&laptop, &r, &main)?;
            push_t.push(took);
            sent = what;
            crate::stats::settle_disk();
            let t = Instant::now();
            copy_files(&files, &dir.join(format!("cp-{run}")))?;
            copy_t.push(t.elapsed());
            let _ = std::fs::remove_dir_all(dir.join(format!("cp-{run}")));
            if run + 1 == opts.runs {
                kept_remote = Some(r);
            } else {
                let _ = std::fs::remove_dir_all(&at);
            }
        }
        let first = |push_t: &[Duration], copy_t: &[Duration], sent: (u64, u64)| {
            let (push, copy) = (Summary::of(push_t), Summary::of(copy_t));
            FirstPush {
                vs_copy: push.median_ms / copy.median_ms.max(0.001),
                push,
                copy,
                bytes_sent: sent.0,
                objects_sent: sent.1,
            }
        };
        let to_directory = first(&push_t, &copy_t, sent);

        let to_s3 = match &opts.s3 {
            None => None,
            Some(base) => {
                progress(&format!(
                    "{mib} MiB: first push to S3, and uploads of the segments"
                ));
                let (mut push_t, mut copy_t) = (Vec::new(), Vec::new());
                for _ in 0..opts.runs {
                    let at = format!("{}/bench-remote-{}", base.trim_end_matches('/'), unique());
                    new_store(&at)?;
                    let r = remote(&laptop, &at)?;
                    let (took, what) = timed_push(&laptop, &r, &main)?;
                    push_t.push(took);
                    sent = what;
                    let t = Instant::now();
                    upload_files(&files, &at)?;
                    copy_t.push(t.elapsed());
                }
                Some(first(&push_t, &copy_t, sent))
            }
        };

        progress(&format!(
            "{mib} MiB: a one-row commit pushed, and one pulled"
        ));
        let r = kept_remote.ok_or_else(|| err("no runs"))?;
        change_row(laptop.engine().location(), "db", rows / 2)?;
        let before = r.requests.counts();
        let t = Instant::now();
        let rep = scion_remote::push(
            &laptop,
            &r,
            &main,
            &PushOptions::default(),
            &*ProgressSink::default(),
        )
        .map_err(err)?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        let after = r.requests.counts();
        let push_one_row = SmallTransfer {
            objects_sent: rep.transfer.stats.objects_sent,
            bytes_sent: rep.transfer.stats.bytes_sent,
            puts: after.puts - before.puts,
            bytes_written: after.bytes_written - before.bytes_written,
            ms,
        };
        change_row(r.store.engine().location(), "db", rows / 3)?;
        let before = laptop_counts.counts();
        let t = Instant::now();
        let pull_opts = PullOptions {
            merge: scion_merge::MergeOptions {
                allow_protected: true,
                ..Default::default()
            },
            ..Default::default()
        };
        let rep = scion_remote::pull(&laptop, &r, &main, &pull_opts, &*ProgressSink::default())
            .map_err(err)?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        let after = laptop_counts.counts();
        let pull_one_row = SmallTransfer {
            objects_sent: rep.transfer.stats.objects_sent,
            bytes_sent: rep.transfer.stats.bytes_sent,
            puts: after.puts - before.puts,
            bytes_written: after.bytes_written - before.bytes_written,
            ms,
        };

        if follow.is_none() {
            progress(&format!(
                "{mib} MiB: push --follow under {} single-row commits a second for {} s",
                opts.follow_rate, opts.follow_secs
            ));
            follow = Some(measure_follow(&laptop, &r, rows, mib, opts)?);
        }
        sizes.push(RemoteAtSize {
            size_mib: mib,
            sqlite_bytes,
            branch_store_bytes,
            segments: files.len() as u64,
            to_directory,
            to_s3,
            push_one_row,
            pull_one_row,
        });
        drop(r);
        drop(laptop);
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(RemoteBenchReport {
        machine,
        runs: opts.runs,
        sizes,
        follow,
    })
}

/// A follower thread and a writer making single-row commits at `opts.follow_rate`.
fn measure_follow(
    laptop: &Scion,
    r: &Remote,
    rows: i64,
    mib: u64,
    opts: &RemoteBenchOptions,
) -> BenchResult<FollowBench> {
    let interval = Duration::from_millis(50);
    let stop = AtomicBool::new(false);
    let main: BranchRef = "db".parse()?;
    let fo = FollowOptions {
        interval,
        ..Default::default()
    };
    let (summary, commits) = std::thread::scope(|sc| -> BenchResult<_> {
        let follower =
            sc.spawn(|| scion_remote::follow(laptop, r, &main, &fo, &stop, |_| {}, |_| {}));
        let c = Connection::open(scion_vfs::uri("db", laptop.engine().location(), false))?;
        let every = Duration::from_secs_f64(1.0 / opts.follow_rate as f64);
        let started = Instant::now();
        let mut commits = 0u64;
        while started.elapsed() < Duration::from_secs(opts.follow_secs) {
            c.execute(
                "UPDATE orders SET status = 'followed' WHERE id = ?1",
                [1 + (commits as i64 * 7919) % rows],
            )?;
            commits += 1;
            let due = every * commits as u32;
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        let rate = commits as f64 / started.elapsed().as_secs_f64();
        // One more round to take the last commits, then stop.
        std::thread::sleep(interval * 4);
        stop.store(true, Ordering::Relaxed);
        let summary = follower
            .join()
            .map_err(|_| err("the follower panicked"))?
            .map_err(err)?;
        Ok((summary, (commits, rate)))
    })?;
    Ok(FollowBench {
        size_mib: mib,
        commits: commits.0,
        rate_per_sec: commits.1,
        interval_ms: interval.as_millis() as u64,
        summary,
    })
}

impl RemoteBenchReport {
    pub fn render(&self) -> String {
        let mut out = format!("{}\nruns per figure: {}\n", self.machine.line(), self.runs);
        let kib = |b: u64| b as f64 / 1024.0;
        for s in &self.sizes {
            out += &format!(
                "\n{} MiB ({:.1} MiB in the store, {} segments)\n",
                s.size_mib,
                s.branch_store_bytes as f64 / (1 << 20) as f64,
                s.segments
            );
            let mut first = |name: &str, f: &FirstPush, base: &str| {
                out += &format!(
                    "  first push to {name}: {:.0} ms (sent {} segments, {:.1} MiB), {base} {:.0} ms: {:.2}x\n",
                    f.push.median_ms,
                    f.objects_sent,
                    f.bytes_sent as f64 / (1 << 20) as f64,
                    f.copy.median_ms,
                    f.vs_copy
                );
            };
            first("a directory", &s.to_directory, "cp + fsync");
            if let Some(f) = &s.to_s3 {
                first("S3", f, "uploads");
            }
            for (name, t) in [("push", &s.push_one_row), ("pull", &s.pull_one_row)] {
                out += &format!(
                    "  {name} of a one-row commit: {} segment(s), {:.1} KiB sent; {} objects, {:.1} KiB written at the receiver; {:.0} ms\n",
                    t.objects_sent,
                    kib(t.bytes_sent),
                    t.puts,
                    kib(t.bytes_written),
                    t.ms
                );
            }
        }
        if let Some(f) = &self.follow {
            out += &format!(
                "\npush --follow at {} MiB, {:.0} single-row commits/s ({} commits, head read every {} ms): lag per version p50 {} ms, p99 {} ms, max {} ms ({} pushes)\n",
                f.size_mib, f.rate_per_sec, f.commits, f.interval_ms, f.summary.lag_p50_ms, f.summary.lag_p99_ms, f.summary.lag_max_ms, f.summary.pushes
            );
        }
        out
    }
}
