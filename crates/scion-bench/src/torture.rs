//! Capture torture: a real `scion serve` captures a checkout while real writers (the stock
//! `sqlite3` CLI, with no busy timeout, and Python's `sqlite3`) commit to it, and SIGKILL
//! lands on the writer, the daemon or both at random points. Every transaction inserts a
//! numbered mark, in commit order; after every round the durable version must hold exactly
//! a prefix of the committed marks (never a phantom, never a torn transaction), and after
//! a flush all of them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use scion_daemon::client::DaemonClient;
use serde::Serialize;

use crate::datagen::SplitMix64;
use crate::{BenchError, BenchResult, Progress};

#[derive(Debug, Clone)]
pub struct TortureOptions {
    pub dir: PathBuf,
    /// The `scion` binary to run the daemon and commands with.
    pub scion: PathBuf,
    pub rounds: usize,
    pub seed: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TortureReport {
    pub rounds: usize,
    pub seed: u64,
    pub seconds: f64,
    pub transactions_started: u64,
    pub transactions_committed: u64,
    pub writer_kills: u64,
    pub daemon_kills: u64,
    pub dead_daemon_writes: u64,
    pub foreign_checkpoints: u64,
    pub vacuums: u64,
    pub spills: u64,
    pub resumes: u64,
    pub reconciles: u64,
    pub flush_checks: u64,
    /// "database is locked" seen by writers without a busy timeout (no other writer or
    /// maintenance ran at the same time, so the daemon would be the cause). Must be 0.
    pub locked_errors: u64,
    pub failures: Vec<String>,
    /// After the final flush, the durable version equals the checkout row for row.
    pub final_equal: bool,
    /// `scion verify` finds nothing wrong with the store after the run.
    pub verify_ok: bool,
}

impl TortureReport {
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.final_equal && self.verify_ok && self.locked_errors == 0
    }

    pub fn render(&self) -> String {
        format!(
            "capture torture: {} rounds in {:.0} s (seed {})\n\
             transactions: {} committed of {} started; {} spilled, {} vacuums\n\
             kills: {} writers, {} daemons ({} with writes while it was down)\n\
             foreign checkpoints: {}; restarts resumed {}, reconciled {}\n\
             checks: durable = a prefix of the committed after every round, = all of them after {} flushes\n\
             writers refused with \"database is locked\": {}\n\
             final flush equals the checkout: {}; `scion verify` clean: {}\n\
             {}\n",
            self.rounds,
            self.seconds,
            self.seed,
            self.transactions_committed,
            self.transactions_started,
            self.spills,
            self.vacuums,
            self.writer_kills,
            self.daemon_kills,
            self.dead_daemon_writes,
            self.foreign_checkpoints,
            self.resumes,
            self.reconciles,
            self.flush_checks,
            self.locked_errors,
            self.final_equal,
            self.verify_ok,
            if self.passed() {
                "PASSED".to_string()
            } else {
                format!("FAILED:\n  {}", self.failures.join("\n  "))
            }
        )
    }
}

struct Rig {
    dir: PathBuf,
    scion: PathBuf,
    socket: PathBuf,
    daemon: Option<Child>,
    session: String,
    checkout: PathBuf,
}

fn other(e: impl std::fmt::Display) -> BenchError {
    BenchError::Other(e.to_string())
}

impl Rig {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.scion);
        c.args(args)
            .env("SCION_STORE", self.dir.join("store"))
            .env("SCION_SOCKET", &self.socket)
            .env("SCION_LOG", "warn")
            .env_remove("SCION_CLONE");
        c
    }

    fn run(&self, args: &[&str]) -> BenchResult<()> {
        let out = self.command(args).output()?;
        if !out.status.success() {
            return Err(other(format!(
                "scion {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    }

    fn client(&self) -> DaemonClient {
        DaemonClient::new(&self.socket)
    }

    fn start_daemon(&mut self) -> BenchResult<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("serve.log"))?;
        let child = self
            .command(&[
                "serve",
                "--flush-every",
                "100ms",
                "--janitor-every",
                "1h",
                "--gc-every",
                "never",
            ])
            .env("SCION_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()?;
        self.daemon = Some(child);
        let started = Instant::now();
        while self.client().raw("GET", "/healthz", None, &[]).is_err() {
            if started.elapsed() > Duration::from_secs(30) {
                return Err(other("the daemon did not answer within 30 s"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Open the session on `shop@main`; returns how capture attached.
    fn open_session(&mut self) -> BenchResult<String> {
        let r = self
            .client()
            .request(
                "POST",
                "/v1/sessions",
                Some(&serde_json::json!({"db": "shop"})),
                &[],
            )
            .map_err(other)?;
        self.session = r.body["id"].as_str().unwrap_or_default().to_string();
        self.checkout = PathBuf::from(r.body["path"].as_str().unwrap_or_default());
        Ok(r.body["attach"]["kind"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    fn kill_daemon(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn flush(&self) -> BenchResult<()> {
        self.client()
            .request(
                "POST",
                &format!("/v1/sessions/{}/flush", self.session),
                None,
                &[],
            )
            .map(drop)
            .map_err(other)
    }

    /// The marks of the durable head (exported through the daemon).
    fn durable_marks(&self, round: usize) -> BenchResult<(BTreeSet<i64>, String)> {
        let out = self.dir.join(format!("durable-{round}.db"));
        self.client()
            .request(
                "POST",
                "/v1/export",
                Some(&serde_json::json!({"target": "shop", "path": out, "force": true})),
                &[],
            )
            .map_err(other)?;
        let c = Connection::open_with_flags(&out, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
        let marks = marks(&c)?;
        let dump = dump(&c)?;
        drop(c);
        std::fs::remove_file(&out)?;
        if ok != "ok" {
            return Err(other(format!(
                "round {round}: durable version fails integrity_check: {ok}"
            )));
        }
        Ok((marks, dump))
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.kill_daemon();
    }
}

fn marks(c: &Connection) -> BenchResult<BTreeSet<i64>> {
    let mut st = c.prepare("SELECT seq FROM marks")?;
    let v = st
        .query_map([], |r| r.get::<_, i64>(0))?
        .collect::<Result<BTreeSet<_>, _>>()?;
    Ok(v)
}

fn dump(c: &Connection) -> BenchResult<String> {
    let mut out = String::new();
    for (t, cols) in [("items", "id, name, qty, length(blob)"), ("marks", "seq")] {
        let mut st = c.prepare(&format!("SELECT {cols} FROM {t} ORDER BY 1"))?;
        let n = st.column_count();
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            for i in 0..n {
                out.push_str(&format!("{:?},", r.get::<_, rusqlite::types::Value>(i)?));
            }
            out.push('\n');
        }
    }
    Ok(out)
}

/// What the checkout holds now, read by a fresh connection of this process.
fn committed(path: &Path) -> BenchResult<(BTreeSet<i64>, String)> {
    let c = Connection::open(path)?;
    c.busy_timeout(Duration::from_secs(5))?;
    let m = marks(&c)?;
    let d = dump(&c)?;
    Ok((m, d))
}

enum Writer {
    Cli,
    Python { busy_timeout_ms: u32 },
}

/// One writer process committing transactions `seqs` in order.
fn spawn_writer(
    path: &Path,
    w: &Writer,
    seqs: std::ops::Range<i64>,
    spill: bool,
    vacuum: bool,
) -> BenchResult<Child> {
    let mut sql = String::new();
    for seq in seqs.clone() {
        let bulk = if spill && seq == seqs.start {
            "INSERT INTO items(name, qty, blob) SELECT 'bulk', value, randomblob(1000) FROM generate_series(1, 2000);"
        } else {
            ""
        };
        sql.push_str(&format!(
            "BEGIN; INSERT INTO marks(seq) VALUES ({seq}); UPDATE items SET qty = qty + 1 WHERE id = {}; INSERT INTO items(name, qty, blob) VALUES ('w', {seq}, randomblob(150)); {bulk} COMMIT;\n",
            seq % 500 + 1
        ));
    }
    if vacuum {
        sql.push_str("DELETE FROM items WHERE name = 'bulk'; VACUUM;\n");
    }
    let child = match w {
        Writer::Cli => Command::new("sqlite3")
            .arg(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map(|mut c| {
                use std::io::Write;
                let mut stdin = c.stdin.take().expect("piped");
                let _ = stdin.write_all(sql.as_bytes());
                c
            })?,
        Writer::Python { busy_timeout_ms } => Command::new("python3")
            .arg("-c")
            .arg(PY_WRITER)
            .arg(path)
            .arg(format!("{}", *busy_timeout_ms as f64 / 1000.0))
            .arg(sql)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?,
    };
    Ok(child)
}

/// Python's `sqlite3` with its default (or a zero) busy timeout: one statement group per
/// line, each its own transaction; a refused transaction is reported, not retried.
const PY_WRITER: &str = r#"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], timeout=float(sys.argv[2]), isolation_level=None)
c.enable_load_extension(False) if hasattr(c, "enable_load_extension") else None
for line in sys.argv[3].splitlines():
    try:
        c.executescript(line.replace("generate_series(1, 2000)", "(WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 2000) SELECT value FROM s)"))
    except sqlite3.OperationalError as e:
        try:
            c.execute("ROLLBACK")
        except sqlite3.OperationalError:
            pass
        print(e, file=sys.stderr)
"#;

fn locked_in(stderr: &str) -> u64 {
    stderr.matches("database is locked").count() as u64
}

/// Run the torture; a failed check is recorded (with its round) and the run stops there.
pub fn run(opts: &TortureOptions, progress: Progress) -> BenchResult<TortureReport> {
    let started = Instant::now();
    let mut report = TortureReport {
        seed: opts.seed,
        ..Default::default()
    };
    std::fs::create_dir_all(&opts.dir)?;
    let mut rig = Rig {
        dir: opts.dir.clone(),
        scion: opts.scion.clone(),
        socket: opts.dir.join("run").join("scion.sock"),
        daemon: None,
        session: String::new(),
        checkout: PathBuf::new(),
    };
    rig.run(&["init"])?;
    let seed_db = opts.dir.join("seed.db");
    {
        let c = Connection::open(&seed_db)?;
        c.execute_batch(
            "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, qty INTEGER, blob BLOB);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
             INSERT INTO items(name, qty, blob) SELECT 'item-' || i, i, randomblob(100) FROM n;
             CREATE TABLE marks(seq INTEGER PRIMARY KEY);",
        )?;
    }
    rig.run(&[
        "create",
        "shop",
        "--from",
        seed_db.to_str().unwrap_or_default(),
    ])?;
    rig.start_daemon()?;
    rig.open_session()?;
    let mut rng = SplitMix64(opts.seed);
    let mut next_seq: i64 = 1;
    for round in 1..=opts.rounds {
        report.rounds = round;
        let n = 1 + rng.below(6) as i64;
        let seqs = next_seq..next_seq + n;
        next_seq += n;
        report.transactions_started += n as u64;
        let writer = match rng.below(4) {
            0 | 1 => Writer::Cli,
            2 => Writer::Python {
                busy_timeout_ms: 5000,
            },
            _ => Writer::Python { busy_timeout_ms: 0 },
        };
        let no_timeout = matches!(writer, Writer::Cli | Writer::Python { busy_timeout_ms: 0 });
        let spill = rng.below(20) == 0;
        let vacuum = rng.below(25) == 0;
        report.spills += spill as u64;
        report.vacuums += vacuum as u64;
        let mut child = spawn_writer(&rig.checkout, &writer, seqs, spill, vacuum)?;
        let kill_daemon = rng.below(12) == 0;
        let kill_writer = rng.below(5) < 2;
        let delay = Duration::from_millis(rng.below(60));
        if kill_daemon || kill_writer {
            std::thread::sleep(delay);
        }
        if kill_daemon {
            rig.kill_daemon();
            report.daemon_kills += 1;
        }
        if kill_writer {
            let _ = child.kill();
            report.writer_kills += 1;
        }
        let out = child.wait_with_output()?;
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        if no_timeout && !kill_daemon {
            report.locked_errors += locked_in(&stderr);
        }
        if kill_daemon {
            if rng.below(2) == 0 {
                // Writes while the daemon is down: the writer's last close checkpoints
                // and deletes the WAL, so capture cannot resume and must reconcile.
                let more = next_seq..next_seq + 2;
                next_seq += 2;
                report.transactions_started += 2;
                report.dead_daemon_writes += 1;
                let w = spawn_writer(&rig.checkout, &Writer::Cli, more, false, false)?;
                w.wait_with_output()?;
            }
            rig.start_daemon()?;
            match rig.open_session()?.as_str() {
                "resumed" => report.resumes += 1,
                "reconciled" => report.reconciles += 1,
                _ => {}
            }
        }
        if rng.below(10) == 0 {
            let mode = ["PASSIVE", "FULL", "RESTART", "TRUNCATE"][rng.below(4) as usize];
            report.foreign_checkpoints += 1;
            Command::new("sqlite3")
                .arg(&rig.checkout)
                .arg(format!(".timeout 100\nPRAGMA wal_checkpoint({mode});"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()?;
        }
        let flush_now = round % 10 == 0;
        if flush_now {
            rig.flush()?;
            report.flush_checks += 1;
        }
        let (durable, _) = rig.durable_marks(round)?;
        let (all, _) = committed(&rig.checkout)?;
        let top = durable.last().copied().unwrap_or(0);
        let prefix: BTreeSet<i64> = all.iter().copied().filter(|m| *m <= top).collect();
        if durable != prefix {
            let phantom: Vec<_> = durable.difference(&all).take(5).collect();
            let missing: Vec<_> = prefix.difference(&durable).take(5).collect();
            report.failures.push(format!(
                "round {round}: durable marks are not a prefix of the committed ones (phantom {phantom:?}, missing {missing:?})"
            ));
            break;
        }
        if flush_now && durable != all {
            report.failures.push(format!(
                "round {round}: after a flush the durable version lacks {} committed transactions",
                all.difference(&durable).count()
            ));
            break;
        }
        if round % 50 == 0 {
            progress(&format!(
                "torture: round {round}/{}: {} committed, {} daemon kills",
                opts.rounds,
                all.len(),
                report.daemon_kills
            ));
        }
    }
    rig.flush()?;
    let (durable, durable_dump) = rig.durable_marks(opts.rounds + 1)?;
    let (all, checkout_dump) = committed(&rig.checkout)?;
    report.transactions_committed = all.len() as u64;
    report.final_equal = durable == all && durable_dump == checkout_dump;
    let closed = rig.client().request(
        "DELETE",
        &format!("/v1/sessions/{}", rig.session),
        None,
        &[],
    );
    if let Err(e) = closed {
        report.failures.push(format!("closing the session: {e}"));
    }
    let verified = rig.command(&["verify", "--json"]).output()?;
    report.verify_ok = verified.status.success();
    if !report.verify_ok {
        report.failures.push(format!(
            "scion verify: {}",
            String::from_utf8_lossy(&verified.stdout)
        ));
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}
