//! `scion bench live`: what live capture costs. A session's flush of a single-row commit
//! (bytes written and latency, at each size) beside `scion checkpoint` of the same change
//! at rest; a writer's throughput with and without a session on its file; and the durable
//! age under a steady writer.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use scion_capture::LiveBranch;
use scion_core::{BranchRef, CheckpointName, ClonePolicy, Scion, ScionOptions};
use scion_daemon::client::DaemonClient;
use scion_store::LocalBackend;
use serde::Serialize;
use serde_json::Value;

use crate::datagen::orders_db;
use crate::machine::{describe, Machine};
use crate::stats::Summary;
use crate::{BenchError, BenchResult, Progress};

#[derive(Debug, Clone)]
pub struct LiveOptions {
    pub dir: PathBuf,
    pub scion: PathBuf,
    pub sizes_mib: Vec<u64>,
    pub runs: usize,
    pub throughput_secs: u64,
    pub durable_age_secs: u64,
}

impl LiveOptions {
    pub fn full(dir: PathBuf, scion: PathBuf) -> Self {
        LiveOptions {
            dir,
            scion,
            sizes_mib: vec![100, 1024],
            runs: 7,
            throughput_secs: 5,
            durable_age_secs: 15,
        }
    }

    pub fn quick(dir: PathBuf, scion: PathBuf) -> Self {
        LiveOptions {
            dir,
            scion,
            sizes_mib: vec![4],
            runs: 3,
            throughput_secs: 2,
            durable_age_secs: 4,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct FlushRow {
    pub size_mib: u64,
    pub flush: Summary,
    pub flush_store_bytes: u64,
    pub checkpoint: Summary,
    pub checkpoint_store_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    pub seconds: u64,
    pub without_session: Vec<f64>,
    pub with_session: Vec<f64>,
    /// Median with over median without (goal: at least 0.95).
    pub ratio: f64,
    /// A writer paced at this many commits a second (below saturation, as applications
    /// and agents write): what it achieved, and its p99 commit latency (ms).
    pub paced_rate: u64,
    pub paced_without: (f64, f64),
    pub paced_with: (f64, f64),
    /// The same back-to-back writer with the daemon's opt-in second tier
    /// (`--barrier-frames`): its commits a second per run, the median over the median
    /// without a session, and the largest WAL file seen at the end of a run (bytes).
    pub barrier_frames: u32,
    pub with_barrier: Vec<f64>,
    pub barrier_ratio: f64,
    /// Each round's second-tier rate over the same round's rate alone (the two run side
    /// by side), which cancels what drifts between rounds.
    pub barrier_round_ratios: Vec<f64>,
    pub barrier_wal_bytes: u64,
    /// Over all second-tier runs: barriers held, and barriers skipped because the writer
    /// held the write lock through the barrier's whole wait.
    pub barriers: u64,
    pub barriers_skipped: u64,
    /// The same back-to-back writer with `PRAGMA synchronous=NORMAL` (SQLite's advice for
    /// WAL mode: no fsync per commit), without a session and with one (first tier only),
    /// and the ratio of their medians. It shows where the first tier's cost lies: in the
    /// fsync each commit makes of a WAL that cannot restart and so grows.
    pub normal_without: Vec<f64>,
    pub normal_with: Vec<f64>,
    pub normal_ratio: f64,
}

/// One writer run of a throughput round.
#[derive(Debug, Clone, Copy)]
enum Run {
    Alone,
    FirstTier,
    SecondTier,
    NormalAlone,
    NormalSession,
}

#[derive(Debug, Clone, Serialize)]
pub struct DurableAge {
    pub flush_every_ms: u64,
    pub writer_txn_per_sec: f64,
    pub samples: usize,
    pub p50_ms: u64,
    pub p99_ms: u64,
    pub max_ms: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LiveReport {
    pub machine: Machine,
    pub runs: usize,
    pub flush: Vec<FlushRow>,
    pub throughput: Throughput,
    pub durable_age: DurableAge,
}

impl LiveReport {
    pub fn render(&self) -> String {
        let mut s = format!(
            "live capture ({} runs each; medians)\n{}\n\nsingle-row commit made durable:\n  size      session flush (ms)   bytes   |  scion checkpoint at rest (ms)   bytes\n",
            self.runs, self.machine.line()
        );
        for r in &self.flush {
            s.push_str(&format!(
                "  {:>5} MiB  {:>8.2} [{:.2}-{:.2}]  {:>7}   |  {:>8.2} [{:.2}-{:.2}]  {:>7}\n",
                r.size_mib,
                r.flush.median_ms,
                r.flush.min_ms,
                r.flush.max_ms,
                r.flush_store_bytes,
                r.checkpoint.median_ms,
                r.checkpoint.min_ms,
                r.checkpoint.max_ms,
                r.checkpoint_store_bytes
            ));
        }
        let t = &self.throughput;
        s.push_str(&format!(
            "\nwriter throughput (Python, autocommit inserts, {} s a run): without a session {:.0} txn/s, with one {:.0} txn/s: {:.1} %\n",
            t.seconds,
            median(&t.without_session),
            median(&t.with_session),
            t.ratio * 100.0
        ));
        s.push_str(&format!(
            "the same writer, the session with the second tier (--barrier-frames {}): {:.0} txn/s: {:.1} % (round by round: median {:.1} %, {:.1}-{:.1} %; WAL at most {} KiB at the end of a run; {} barriers, {} skipped)\n",
            t.barrier_frames,
            median(&t.with_barrier),
            t.barrier_ratio * 100.0,
            median(&t.barrier_round_ratios) * 100.0,
            t.barrier_round_ratios.iter().copied().fold(f64::INFINITY, f64::min) * 100.0,
            t.barrier_round_ratios.iter().copied().fold(0.0, f64::max) * 100.0,
            t.barrier_wal_bytes / 1024,
            t.barriers,
            t.barriers_skipped
        ));
        s.push_str(&format!(
            "the same writer with PRAGMA synchronous=NORMAL (no fsync per commit): without a session {:.0} txn/s, with one {:.0} txn/s: {:.1} %\n",
            median(&t.normal_without),
            median(&t.normal_with),
            t.normal_ratio * 100.0
        ));
        s.push_str(&format!(
            "a writer paced at {} txn/s: without a session {:.0} txn/s (p99 commit {:.2} ms), with one {:.0} txn/s (p99 {:.2} ms)\n",
            t.paced_rate, t.paced_without.0, t.paced_without.1, t.paced_with.0, t.paced_with.1
        ));
        let d = &self.durable_age;
        s.push_str(&format!(
            "durable age under a steady writer ({:.0} txn/s, --flush-every {} ms, {} samples): p50 {} ms, p99 {} ms, max {} ms\n",
            d.writer_txn_per_sec, d.flush_every_ms, d.samples, d.p50_ms, d.p99_ms, d.max_ms
        ));
        s
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn other(e: impl std::fmt::Display) -> BenchError {
    BenchError::Other(e.to_string())
}

fn store(dir: &Path) -> BenchResult<Arc<Scion>> {
    let backend = LocalBackend::open(dir.join("store")).map_err(other)?;
    let mut o = ScionOptions::new(dir.join("store/checkouts"), ClonePolicy::Auto);
    o.store_dir = Some(dir.join("store"));
    Ok(Arc::new(Scion::init(
        Arc::new(backend),
        "live",
        o,
        Default::default(),
    )?))
}

fn flush_row(dir: &Path, mib: u64, runs: usize) -> BenchResult<FlushRow> {
    let dir = dir.join(format!("flush-{mib}"));
    std::fs::create_dir_all(&dir)?;
    let seed = dir.join("seed.db");
    orders_db(&seed, mib, 1)?;
    let scion = store(&dir)?;
    scion.engine().create(&"orders".parse()?, Some(&seed))?;
    std::fs::remove_file(&seed)?;
    let b: BranchRef = "orders".parse()?;
    let rows: i64 = {
        let path = scion.checkout(&b, false)?.path;
        Connection::open(&path)?.query_row("SELECT max(id) FROM orders", [], |r| r.get(0))?
    };
    let update = |c: &Connection, i: usize| -> BenchResult<()> {
        let id = (i as i64 * 7919) % rows + 1;
        c.execute("UPDATE orders SET amount = amount + 1 WHERE id = ?1", [id])?;
        Ok(())
    };
    // A session's flush: the connection stays open, as an application's does.
    let mut live = LiveBranch::open(
        scion.clone(),
        &b,
        "bench#s-bench",
        Duration::from_secs(600),
        false,
    )
    .map_err(other)?;
    let conn = Connection::open(live.path())?;
    let (mut flush, mut flush_bytes) = (Vec::new(), Vec::new());
    for i in 0..=runs {
        update(&conn, i)?;
        let start = Instant::now();
        let r = live.flush(None).map_err(other)?;
        if i > 0 {
            flush.push(start.elapsed());
            flush_bytes.push(r.store.bytes as f64);
        }
    }
    drop(conn);
    live.close().map_err(other)?;
    // The same change at rest: write, then `scion checkpoint`.
    let path = scion.checkout_path(&b);
    let (mut ckpt, mut ckpt_bytes) = (Vec::new(), Vec::new());
    for i in 0..=runs {
        {
            let c = Connection::open(&path)?;
            update(&c, runs + 1 + i)?;
        }
        let name = CheckpointName::new(&format!("c{i}"))?;
        let start = Instant::now();
        let r = scion.checkpoint(&b, &name, Default::default())?;
        if i > 0 {
            ckpt.push(start.elapsed());
            ckpt_bytes.push(r.store.bytes as f64);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(FlushRow {
        size_mib: mib,
        flush: Summary::of(&flush),
        flush_store_bytes: median(&flush_bytes) as u64,
        checkpoint: Summary::of(&ckpt),
        checkpoint_store_bytes: median(&ckpt_bytes) as u64,
    })
}

/// How the bench's writer syncs its commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Synchronous {
    /// Python's and SQLite's default (FULL): the WAL is fsynced at every commit.
    Default,
    /// `PRAGMA synchronous=NORMAL`: the WAL is fsynced only at checkpoints.
    Normal,
}

/// A Python writer at SQLite's default sync: autocommit inserts for `secs` seconds (paced
/// to `rate` a second when given); prints how many it committed.
fn python_writer(path: &Path, secs: u64, rate: Option<u64>) -> BenchResult<Child> {
    python_writer_with(path, secs, rate, Synchronous::Default)
}

/// [`python_writer`] with the writer's `PRAGMA synchronous` chosen.
fn python_writer_with(
    path: &Path,
    secs: u64,
    rate: Option<u64>,
    synchronous: Synchronous,
) -> BenchResult<Child> {
    const SCRIPT: &str = r#"
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
if sys.argv[4] == "normal":
    c.execute("PRAGMA synchronous=NORMAL")
end = time.monotonic() + float(sys.argv[2])
gap = 1.0 / float(sys.argv[3]) if float(sys.argv[3]) > 0 else 0.0
n = 0
lat = []
nxt = time.monotonic()
while time.monotonic() < end:
    t0 = time.monotonic()
    c.execute("INSERT INTO orders(customer, amount, note) VALUES (?, ?, ?)", ("c%d" % (n % 1000), n * 0.5, "w"))
    lat.append(time.monotonic() - t0)
    n += 1
    if gap:
        nxt += gap
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
lat.sort()
print(n, 1000.0 * lat[int((len(lat) - 1) * 0.99)] if lat else 0.0)
"#;
    Ok(Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(path)
        .arg(secs.to_string())
        .arg(rate.unwrap_or(0).to_string())
        .arg(match synchronous {
            Synchronous::Default => "default",
            Synchronous::Normal => "normal",
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?)
}

/// The writer's commits a second, and its 99th-percentile commit latency in ms.
fn finish_writer_timed(child: Child, secs: u64) -> BenchResult<(f64, f64)> {
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut it = text.split_whitespace().map(|x| x.parse::<f64>());
    match (it.next(), it.next()) {
        (Some(Ok(n)), Some(Ok(p99))) => Ok((n / secs as f64, p99)),
        _ => Err(other(format!("the writer printed no count: {text:?}"))),
    }
}

fn finish_writer(child: Child, secs: u64) -> BenchResult<f64> {
    finish_writer_timed(child, secs).map(|(rate, _)| rate)
}

struct Daemon {
    child: Child,
    client: DaemonClient,
}

impl Daemon {
    fn start(
        scion: &Path,
        store: &Path,
        socket: &Path,
        flush_every: &str,
        extra: &[&str],
    ) -> BenchResult<Daemon> {
        let child = Command::new(scion)
            .args(["serve", "--flush-every", flush_every, "--gc-every", "never"])
            .args(extra)
            .env("SCION_STORE", store)
            .env("SCION_SOCKET", socket)
            .env("SCION_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let client = DaemonClient::new(socket);
        let started = Instant::now();
        while client.raw("GET", "/healthz", None, &[]).is_err() {
            if started.elapsed() > Duration::from_secs(30) {
                return Err(other("the daemon did not start"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(Daemon { child, client })
    }

    fn open(&self, db: &str) -> BenchResult<(String, PathBuf)> {
        let r = self
            .client
            .request(
                "POST",
                "/v1/sessions",
                Some(&serde_json::json!({"db": db})),
                &[],
            )
            .map_err(other)?;
        Ok((
            r.body["id"].as_str().unwrap_or_default().to_string(),
            PathBuf::from(r.body["path"].as_str().unwrap_or_default()),
        ))
    }

    fn close(&self, id: &str) -> BenchResult<()> {
        self.client
            .request("DELETE", &format!("/v1/sessions/{id}"), None, &[])
            .map(drop)
            .map_err(other)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

fn throughput(opts: &LiveOptions) -> BenchResult<(Throughput, DurableAge)> {
    let dir = opts.dir.join("writer");
    std::fs::create_dir_all(&dir)?;
    let seed = dir.join("seed.db");
    orders_db(&seed, 8, 1)?;
    let scion = store(&dir)?;
    scion.engine().create(&"orders".parse()?, Some(&seed))?;
    let b: BranchRef = "orders".parse()?;
    let path = scion.checkout(&b, false)?.path;
    let socket = dir.join("run/scion.sock");
    let (mut without, mut with, mut with_barrier) = (Vec::new(), Vec::new(), Vec::new());
    // Below SQLite's own autocheckpoint threshold (1,000 frames), so the daemon recycles the
    // WAL before the writer would checkpoint in its commit path (measured beside 1,000 in
    // one run of 8 interleaved rounds: 95.1 % of the writer's throughput against 92 %).
    let barrier_frames = 250u32;
    let barrier_arg = barrier_frames.to_string();
    let mut barrier_wal_bytes = 0u64;
    let (mut barriers, mut barriers_skipped) = (0u64, 0u64);
    let (mut normal_without, mut normal_with) = (Vec::new(), Vec::new());
    let store_dir = dir.join("store");
    let with_daemon = |extra: &[&str], sync: Synchronous| -> BenchResult<(f64, Value, u64)> {
        let daemon = Daemon::start(&opts.scion, &store_dir, &socket, "1s", extra)?;
        let (id, live_path) = daemon.open("orders")?;
        let rate = finish_writer(
            python_writer_with(&live_path, opts.throughput_secs, None, sync)?,
            opts.throughput_secs,
        )?;
        let session = daemon
            .client
            .request("GET", &format!("/v1/sessions/{id}"), None, &[])
            .map_err(other)?;
        // Measured before the close, whose last connection may checkpoint the WAL away.
        let mut wal = live_path.into_os_string();
        wal.push("-wal");
        let wal_bytes = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        daemon.close(&id)?;
        Ok((rate, session.body, wal_bytes))
    };
    let alone = |sync: Synchronous| -> BenchResult<f64> {
        let writer = python_writer_with(&path, opts.throughput_secs, None, sync)?;
        finish_writer(writer, opts.throughput_secs)
    };
    // Interleaved, so that all see the same disk and page cache conditions, and in an
    // order reversed every other round (the second tier right beside the writer alone
    // either way), so that neither side of a ratio always runs after the same neighbour.
    for round in 0..opts.runs.min(7) {
        let mut order = [
            Run::Alone,
            Run::SecondTier,
            Run::FirstTier,
            Run::NormalAlone,
            Run::NormalSession,
        ];
        if round % 2 == 1 {
            order.reverse();
        }
        for run in order {
            match run {
                Run::Alone => without.push(alone(Synchronous::Default)?),
                Run::FirstTier => with.push(with_daemon(&[], Synchronous::Default)?.0),
                Run::SecondTier => {
                    let (rate, session, wal_bytes) =
                        with_daemon(&["--barrier-frames", &barrier_arg], Synchronous::Default)?;
                    with_barrier.push(rate);
                    barrier_wal_bytes = barrier_wal_bytes.max(wal_bytes);
                    let count = |k: &str| session["recycling"][k].as_u64().unwrap_or(0);
                    barriers += count("barriers");
                    barriers_skipped += count("barriers_skipped");
                }
                Run::NormalAlone => normal_without.push(alone(Synchronous::Normal)?),
                Run::NormalSession => normal_with.push(with_daemon(&[], Synchronous::Normal)?.0),
            }
        }
    }
    let ratio = median(&with) / median(&without).max(1.0);
    let barrier_ratio = median(&with_barrier) / median(&without).max(1.0);
    let barrier_round_ratios: Vec<f64> = with_barrier
        .iter()
        .zip(&without)
        .map(|(w, a)| w / a.max(1.0))
        .collect();
    let normal_ratio = median(&normal_with) / median(&normal_without).max(1.0);
    // A paced writer: the same inserts at a steady rate below what the disk allows.
    let paced_rate = 500;
    let paced_without = finish_writer_timed(
        python_writer(&path, opts.throughput_secs, Some(paced_rate))?,
        opts.throughput_secs,
    )?;
    let paced_with = {
        let daemon = Daemon::start(&opts.scion, &dir.join("store"), &socket, "1s", &[])?;
        let (id, live_path) = daemon.open("orders")?;
        let r = finish_writer_timed(
            python_writer(&live_path, opts.throughput_secs, Some(paced_rate))?,
            opts.throughput_secs,
        )?;
        daemon.close(&id)?;
        r
    };
    // Durable age: a steady writer, the session flushing every second.
    let daemon = Daemon::start(&opts.scion, &dir.join("store"), &socket, "1s", &[])?;
    let (id, live_path) = daemon.open("orders")?;
    let rate = 200;
    let writer = python_writer(&live_path, opts.durable_age_secs, Some(rate))?;
    let mut ages = Vec::new();
    let end = Instant::now() + Duration::from_secs(opts.durable_age_secs);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
        let r = daemon
            .client
            .request("GET", &format!("/v1/sessions/{id}"), None, &[])
            .map_err(other)?;
        ages.push(r.body["durable_age_ms"].as_u64().unwrap_or(0));
    }
    let written = finish_writer(writer, opts.durable_age_secs)?;
    daemon.close(&id)?;
    drop(daemon);
    ages.sort_unstable();
    let pick = |q: f64| {
        ages.get(((ages.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    let _ = std::fs::remove_dir_all(&dir);
    Ok((
        Throughput {
            seconds: opts.throughput_secs,
            without_session: without,
            with_session: with,
            ratio,
            paced_rate,
            paced_without,
            paced_with,
            barrier_frames,
            with_barrier,
            barrier_ratio,
            barrier_round_ratios,
            barrier_wal_bytes,
            barriers,
            barriers_skipped,
            normal_without,
            normal_with,
            normal_ratio,
        },
        DurableAge {
            flush_every_ms: 1000,
            writer_txn_per_sec: written,
            samples: ages.len(),
            p50_ms: pick(0.5),
            p99_ms: pick(0.99),
            max_ms: ages.last().copied().unwrap_or(0),
        },
    ))
}

pub fn run(opts: &LiveOptions, progress: Progress<'_>) -> BenchResult<LiveReport> {
    std::fs::create_dir_all(&opts.dir)?;
    let machine = describe(&opts.dir);
    let mut flush = Vec::new();
    for &mib in &opts.sizes_mib {
        progress(&format!(
            "{mib} MiB: session flush and checkpoint of a single-row commit"
        ));
        flush.push(flush_row(&opts.dir, mib, opts.runs)?);
    }
    progress("writer throughput with and without a session; durable age");
    let (throughput, durable_age) = throughput(opts)?;
    Ok(LiveReport {
        machine,
        runs: opts.runs,
        flush,
        throughput,
        durable_age,
    })
}
