//! `scion bench isolation`: what an eval harness pays per test for a fresh, isolated
//! database seeded once. scion (fork + checkout + open + first query + close + destroy;
//! with the seed checked out once, and with nothing local) runs
//! side by side with a plain file copy, SQLite's backup API into a fresh file and, when a
//! server is reachable, PostgreSQL's `CREATE DATABASE ... TEMPLATE`; with a Python that has
//! the `scion` package, pytest's `scion_db` fixture beside a fixture copying the file.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, MAIN_DB};
use scion_core::{BranchRef, ClonePolicy, Scion, ScionOptions};
use scion_store::LocalBackend;
use serde::Serialize;

use crate::datagen::orders_db;
pub(crate) use crate::isolation_phases::FIRST_QUERY;
use crate::isolation_phases::{MethodRow, PhaseTimer};
use crate::machine::{describe, Machine};
use crate::postgres::PgBaseline;
use crate::{BenchError, BenchResult, Progress};

#[derive(Debug, Clone)]
pub struct IsolationOptions {
    pub dir: PathBuf,
    pub sizes_mib: Vec<u64>,
    pub runs: usize,
    /// A libpq-style connection string for the PostgreSQL row (None: the row says why).
    pub postgres: Option<String>,
    /// The `scion` binary, for the row that goes through a daemon's sessions (None: the
    /// row says why).
    pub scion_bin: Option<PathBuf>,
    /// A Python interpreter with the `scion` package and pytest installed, for the rows
    /// measured through the pytest plugin (None: the rows say why).
    pub python: Option<PathBuf>,
}

impl IsolationOptions {
    pub fn full(dir: PathBuf, postgres: Option<String>) -> Self {
        Self {
            dir,
            sizes_mib: vec![10, 100],
            runs: 7,
            postgres,
            scion_bin: None,
            python: None,
        }
    }
    pub fn quick(dir: PathBuf, postgres: Option<String>) -> Self {
        Self {
            dir,
            sizes_mib: vec![2],
            runs: 3,
            postgres,
            scion_bin: None,
            python: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct AtSize {
    pub size_mib: u64,
    pub sqlite_bytes: u64,
    pub rows: u64,
    pub postgres_bytes: Option<u64>,
    pub methods: Vec<MethodRow>,
    /// scion (seed checked out) over a plain file copy: the budget in docs/benchmarks.md is <= 1.2.
    pub scion_over_copy: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct IsolationReport {
    pub machine: Machine,
    pub first_query: &'static str,
    pub runs: usize,
    pub postgres_server: Option<String>,
    pub sizes: Vec<AtSize>,
}

fn first_query(conn: &Connection, id: i64) -> BenchResult<f64> {
    Ok(conn.query_row(&FIRST_QUERY.replace("$1", "?1"), [id], |r| r.get(0))?)
}

fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// How the scion row finds the seed's bytes for a new checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SeedCopy {
    /// The seed is checked out once, clean: a new checkout copies (or clones) that file.
    CheckedOut,
    /// Nothing local: every checkout decodes the version from the store.
    StoreOnly,
}

fn scion_row(
    dir: &Path,
    seed: &Path,
    runs: usize,
    probe_id: i64,
    how: SeedCopy,
) -> BenchResult<MethodRow> {
    let dir = &dir.join(match how {
        SeedCopy::CheckedOut => "scion-checked-out",
        SeedCopy::StoreOnly => "scion-store-only",
    });
    let store =
        LocalBackend::open(dir.join("store")).map_err(|e| BenchError::Other(e.to_string()))?;
    let scion = Scion::init(
        std::sync::Arc::new(store),
        "isolation",
        ScionOptions::new(dir.join("store/checkouts"), ClonePolicy::Auto),
        Default::default(),
    )?;
    scion.engine().create(&"seed".parse()?, Some(seed))?;
    let main: BranchRef = "seed".parse()?;
    if how == SeedCopy::CheckedOut {
        scion.checkout(&main, false)?;
    }
    crate::stats::settle_disk();
    let mut timer = PhaseTimer::new(&["fork", "checkout", "open + query + close", "destroy"]);
    timer.run(runs, |run, lap| {
        let test: BranchRef = format!("seed@test-{run}").parse()?;
        scion
            .engine()
            .fork(&main, &test.branch, Default::default())?;
        lap(0);
        let path = scion.checkout(&test, false)?.path;
        lap(1);
        let conn = Connection::open(&path)?;
        first_query(&conn, probe_id)?;
        drop(conn);
        lap(2);
        scion.destroy(&test, false)?;
        lap(3);
        Ok(())
    })?;
    Ok(timer.row(match how {
        SeedCopy::CheckedOut => "scion (seed checked out once)",
        SeedCopy::StoreOnly => "scion (nothing local: decode from the store)",
    }))
}

/// Through a running `scion serve`: per test, one request opens an ephemeral session on a
/// fresh fork (fork + checkout + lease + capture), the test opens the file, queries and
/// closes it, and one request closes the session (flush + destroy).
fn session_row(
    dir: &Path,
    seed: &Path,
    runs: usize,
    probe_id: i64,
    scion_bin: &Path,
) -> BenchResult<MethodRow> {
    let dir = &dir.join("scion-session");
    let store = dir.join("store");
    let run = |args: &[&str]| -> BenchResult<()> {
        let out = std::process::Command::new(scion_bin)
            .args(args)
            .env("SCION_STORE", &store)
            .output()?;
        if !out.status.success() {
            return Err(BenchError::Other(
                String::from_utf8_lossy(&out.stderr).into(),
            ));
        }
        Ok(())
    };
    run(&["init"])?;
    run(&["create", "seed", "--from", &seed.display().to_string()])?;
    run(&["checkout", "seed"])?;
    let socket = dir.join("run/scion.sock");
    let mut daemon = std::process::Command::new(scion_bin)
        .args(["serve", "--gc-every", "never"])
        .env("SCION_STORE", &store)
        .env("SCION_SOCKET", &socket)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let client = scion_daemon::client::DaemonClient::new(&socket);
    let started = Instant::now();
    while client.raw("GET", "/healthz", None, &[]).is_err() {
        if started.elapsed() > Duration::from_secs(30) {
            let _ = daemon.kill();
            return Err(BenchError::Other("the daemon did not start".into()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    crate::stats::settle_disk();
    let mut timer = PhaseTimer::new(&["session open", "open + query + close", "session close"]);
    let measured = timer.run(runs, |run, lap| {
        let body = serde_json::json!({"db": "seed", "branch": format!("test-{run}"), "fork_from": "main", "ephemeral": true});
        let r = client
            .request("POST", "/v1/sessions", Some(&body), &[])
            .map_err(|e| BenchError::Other(e.to_string()))?;
        lap(0);
        let conn = Connection::open(r.body["path"].as_str().unwrap_or_default())?;
        first_query(&conn, probe_id)?;
        drop(conn);
        lap(1);
        let id = r.body["id"].as_str().unwrap_or_default();
        client
            .request("DELETE", &format!("/v1/sessions/{id}"), None, &[])
            .map_err(|e| BenchError::Other(e.to_string()))?;
        lap(2);
        Ok(())
    });
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(daemon.id() as i32, libc::SIGTERM);
    }
    let _ = daemon.wait();
    measured?;
    Ok(timer.row("scion serve session (ephemeral fork)"))
}

/// A plain-SQLite baseline: `copy` makes the test's file from the seed, then the same open,
/// query, close and delete as every method.
fn sqlite_row(
    dir: &Path,
    label: &str,
    copy_phase: &'static str,
    runs: usize,
    probe_id: i64,
    mut copy: impl FnMut(&Path) -> BenchResult<()>,
) -> BenchResult<MethodRow> {
    crate::stats::settle_disk();
    let mut timer = PhaseTimer::new(&[copy_phase, "open + query + close", "delete"]);
    timer.run(runs, |run, lap| {
        let path = dir.join(format!("{copy_phase}-{run}.db"));
        copy(&path)?;
        lap(0);
        let conn = Connection::open(&path)?;
        first_query(&conn, probe_id)?;
        drop(conn);
        lap(1);
        remove_db(&path);
        lap(2);
        Ok(())
    })?;
    Ok(timer.row(label))
}

fn copy_row(dir: &Path, seed: &Path, runs: usize, probe_id: i64) -> BenchResult<MethodRow> {
    sqlite_row(dir, "file copy", "copy", runs, probe_id, |path| {
        std::fs::copy(seed, path)?;
        Ok(())
    })
}

fn backup_row(dir: &Path, seed: &Path, runs: usize, probe_id: i64) -> BenchResult<MethodRow> {
    // Seeded once: the harness keeps its source connection open across tests.
    let source = Connection::open(seed)?;
    sqlite_row(dir, "SQLite backup API", "backup", runs, probe_id, |path| {
        Ok(source.backup(MAIN_DB, path, rusqlite::backup::NO_PROGRESS)?)
    })
}

fn postgres_rows(
    pg: &mut PgBaseline,
    mib: u64,
    rows: u64,
    runs: usize,
    probe_id: i64,
) -> BenchResult<(u64, Vec<MethodRow>)> {
    let template = format!("scion_bench_seed_{mib}");
    let seed_bytes = pg.seed(&template, rows)?;
    let mut out = Vec::new();
    for strategy in pg.strategies() {
        crate::stats::settle_disk();
        let mut timer = PhaseTimer::new(&["create database", "connect + query + close", "drop"]);
        timer.run(runs, |run, lap| {
            let name = format!("scion_bench_test_{run}");
            pg.create_from_template(&name, &template, strategy)?;
            lap(0);
            pg.connect_and_query(&name, FIRST_QUERY, probe_id)?;
            lap(1);
            pg.drop_database(&name)?;
            lap(2);
            Ok(())
        })?;
        out.push(timer.row(&strategy.label()));
    }
    pg.drop_database(&template)?;
    Ok((seed_bytes, out))
}

pub fn run(opts: &IsolationOptions, progress: Progress<'_>) -> BenchResult<IsolationReport> {
    std::fs::create_dir_all(&opts.dir)?;
    let machine = describe(&opts.dir);
    let mut pg = match &opts.postgres {
        None => Err("no server given (--postgres or SCION_BENCH_PG; scripts/bench-postgres starts a throwaway one)".to_string()),
        Some(conn) => PgBaseline::connect(conn).map_err(|e| format!("cannot connect: {e}")),
    };
    let postgres_server = pg.as_ref().ok().map(|p| p.version.clone());
    let mut sizes = Vec::new();
    for &mib in &opts.sizes_mib {
        let dir = opts.dir.join(format!("size-{mib}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        progress(&format!("seeding a {mib} MiB database"));
        let seed = dir.join("seed.db");
        let sqlite_bytes = orders_db(&seed, mib, 1)?;
        let rows: u64 =
            Connection::open(&seed)?
                .query_row("SELECT count(*) FROM orders", [], |r| r.get::<_, i64>(0))?
                as u64;
        let probe_id = (rows / 2) as i64;
        progress(&format!("{mib} MiB: scion, {} tests", opts.runs));
        let mut methods = vec![scion_row(
            &dir,
            &seed,
            opts.runs,
            probe_id,
            SeedCopy::CheckedOut,
        )?];
        methods.push(scion_row(
            &dir,
            &seed,
            opts.runs,
            probe_id,
            SeedCopy::StoreOnly,
        )?);
        progress(&format!("{mib} MiB: scion VFS"));
        methods.push(crate::isolation_vfs::row(&dir, &seed, opts.runs, probe_id)?);
        methods.push(match &opts.scion_bin {
            Some(bin) => {
                progress(&format!("{mib} MiB: scion serve sessions"));
                session_row(&dir, &seed, opts.runs, probe_id, bin)?
            }
            None => MethodRow {
                method: "scion serve session (ephemeral fork)".into(),
                per_test: None,
                times_scion: None,
                phases: Vec::new(),
                missing: Some("no scion binary given".into()),
            },
        });
        if opts.python.is_some() {
            progress(&format!("{mib} MiB: Python, pytest fixtures"));
        }
        methods.extend(crate::isolation_python::rows(
            &dir,
            &seed,
            opts.runs,
            probe_id,
            opts.python.as_deref(),
        )?);
        progress(&format!("{mib} MiB: file copy"));
        methods.push(copy_row(&dir, &seed, opts.runs, probe_id)?);
        progress(&format!("{mib} MiB: SQLite backup API"));
        methods.push(backup_row(&dir, &seed, opts.runs, probe_id)?);
        let mut postgres_bytes = None;
        match pg.as_mut() {
            Ok(pg) => {
                progress(&format!(
                    "{mib} MiB: PostgreSQL CREATE DATABASE ... TEMPLATE"
                ));
                let (bytes, rows) = postgres_rows(pg, mib, rows, opts.runs, probe_id)?;
                postgres_bytes = Some(bytes);
                methods.extend(rows);
            }
            Err(why) => methods.push(MethodRow {
                method: "PostgreSQL CREATE DATABASE ... TEMPLATE".into(),
                per_test: None,
                times_scion: None,
                phases: Vec::new(),
                missing: Some(why.clone()),
            }),
        }
        let scion_ms = methods[0].per_test.map(|s| s.median_ms).unwrap_or(0.0);
        for m in &mut methods {
            m.times_scion = m.per_test.map(|s| s.median_ms / scion_ms);
        }
        let copy_ms = methods
            .iter()
            .find(|m| m.method == "file copy")
            .and_then(|m| m.per_test)
            .map(|t| t.median_ms)
            .unwrap_or(f64::NAN);
        let _ = std::fs::remove_dir_all(&dir);
        sizes.push(AtSize {
            scion_over_copy: scion_ms / copy_ms,
            size_mib: mib,
            sqlite_bytes,
            rows,
            postgres_bytes,
            methods,
        });
    }
    Ok(IsolationReport {
        machine,
        first_query: FIRST_QUERY,
        runs: opts.runs,
        postgres_server,
        sizes,
    })
}

impl IsolationReport {
    /// The human table.
    pub fn render(&self) -> String {
        let mut s = format!("{}\n", self.machine.line());
        s += &format!(
            "per test: a fresh isolated database, opened, one query ({}), closed, removed; median of {} runs after a warm-up\n",
            self.first_query, self.runs
        );
        if let Some(v) = &self.postgres_server {
            s += &format!("PostgreSQL server: {v} (local, unix socket)\n");
        }
        for size in &self.sizes {
            s += &format!(
                "\n{} MiB seed ({} rows; SQLite file {} B{})\n",
                size.size_mib,
                size.rows,
                size.sqlite_bytes,
                size.postgres_bytes
                    .map(|b| format!(", PostgreSQL database {b} B"))
                    .unwrap_or_default()
            );
            s += &format!(
                "  scion (seed checked out) / file copy: {:.2}x (budget <= 1.2x)\n",
                size.scion_over_copy
            );
            s += &format!(
                "  {:<46} {:>10} {:>16} {:>10}  breakdown (medians, ms)\n",
                "method", "median ms", "min-max ms", "x scion"
            );
            for m in &size.methods {
                match (&m.per_test, &m.missing) {
                    (Some(t), _) => {
                        let phases: Vec<String> = m
                            .phases
                            .iter()
                            .map(|(n, ms)| format!("{n} {ms:.2}"))
                            .collect();
                        s += &format!(
                            "  {:<46} {:>10.2} {:>16} {:>10}  {}\n",
                            m.method,
                            t.median_ms,
                            format!("{:.2}-{:.2}", t.min_ms, t.max_ms),
                            format!("{:.1}x", m.times_scion.unwrap_or(0.0)),
                            phases.join(", ")
                        );
                    }
                    (None, why) => {
                        s += &format!(
                            "  {:<46} {:>10}  not measured: {}\n",
                            m.method,
                            "-",
                            why.as_deref().unwrap_or("unknown")
                        );
                    }
                }
            }
        }
        s
    }
}
