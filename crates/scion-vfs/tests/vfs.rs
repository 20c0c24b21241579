//! The scion VFS against plain SQLite: a differential test of random workloads (DDL,
//! inserts, updates, deletes, large blobs on overflow pages, savepoints, ROLLBACK, VACUUM,
//! page sizes 512-65536, several connections), isolation of read transactions and forks,
//! refusals (WAL, read-only targets, a second writer, a checkout with changes).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{Connection, OpenFlags};
use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::{BranchRef, Scion};

struct Env {
    dir: tempfile::TempDir,
    scion: Arc<Scion>,
}

impl Env {
    fn new() -> Env {
        scion_vfs::register().expect("register the VFS");
        let dir = tempfile::tempdir().unwrap();
        let spec = StoreSpec::parse(dir.path().join("store").to_str().unwrap()).unwrap();
        let options = AttachOptions {
            init: Some(std::time::Duration::from_secs(3600)),
            ..Default::default()
        };
        let scion = Arc::new(Scion::attach(&spec, options).unwrap().scion);
        Env { dir, scion }
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A database made from a plain file (`page_size`, with `sql` run on it first).
    fn create(&self, db: &str, page_size: u32, sql: &str) -> PathBuf {
        let plain = self.path(&format!("{db}.plain.db"));
        let c = Connection::open(&plain).unwrap();
        c.execute_batch(&format!("PRAGMA page_size={page_size}; VACUUM;"))
            .unwrap();
        c.execute_batch(sql).unwrap();
        drop(c);
        self.scion
            .create(&db.parse().unwrap(), Some(&plain))
            .unwrap();
        plain
    }

    fn open(&self, target: &str) -> Connection {
        self.open_with(target, "")
    }

    /// `target` with more URI parameters (`&name=value...`).
    fn open_with(&self, target: &str, params: &str) -> Connection {
        let uri = scion_vfs::uri(target, &self.store().display().to_string(), false) + params;
        Connection::open_with_flags(
            uri,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
        )
        .unwrap_or_else(|e| panic!("open {target}: {e} ({:?})", scion_vfs::last_error()))
    }

    fn head_version(&self, b: &str) -> u64 {
        let b: BranchRef = b.parse().unwrap();
        self.scion.read_ref(&b).unwrap().0.version
    }
}

/// Every table's rows in a stable order, and the schema: what "the same database" means.
fn dump(c: &Connection) -> String {
    let mut out = String::new();
    let mut s = c
        .prepare("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema ORDER BY name")
        .unwrap();
    let objects: Vec<(String, String, String, String)> = s
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (kind, name, _, sql) in &objects {
        out += &format!("{kind} {name}: {sql}\n");
        if kind == "table" && !name.starts_with("sqlite_") {
            let mut q = c
                .prepare(&format!("SELECT * FROM \"{name}\" ORDER BY 1, rowid"))
                .unwrap();
            let n = q.column_count();
            let mut rows = q.query([]).unwrap();
            while let Some(r) = rows.next().unwrap() {
                let vals: Vec<String> = (0..n)
                    .map(|i| match r.get_ref(i).unwrap() {
                        rusqlite::types::ValueRef::Null => "NULL".into(),
                        rusqlite::types::ValueRef::Integer(v) => v.to_string(),
                        rusqlite::types::ValueRef::Real(v) => format!("{v:?}"),
                        rusqlite::types::ValueRef::Text(t) => {
                            format!("'{}'", String::from_utf8_lossy(t))
                        }
                        rusqlite::types::ValueRef::Blob(b) => {
                            format!("x{}:{:016x}", b.len(), xxhash(b))
                        }
                    })
                    .collect();
                out += &format!("  {}\n", vals.join("|"));
            }
        }
    }
    out
}

fn xxhash(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100000001b3)
    })
}

/// SplitMix64: the workloads are reproducible from their seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One transaction of a random workload: the statements, and whether it ends in COMMIT.
fn transaction(rng: &mut Rng, step: usize) -> (Vec<String>, bool) {
    let mut stmts = Vec::new();
    let t = format!("t{}", rng.below(3));
    stmts.push(format!(
        "CREATE TABLE IF NOT EXISTS {t}(id INTEGER PRIMARY KEY, k TEXT, v BLOB, n INTEGER)"
    ));
    for _ in 0..1 + rng.below(6) {
        let stmt = match rng.below(10) {
            0..=3 => {
                // Small rows, and sometimes a blob that spills onto overflow pages.
                // Small rows, and sometimes a blob that spills onto overflow pages; the
                // same bytes on both sides (the RNG's, not SQLite's randomblob).
                let len = if rng.below(5) == 0 {
                    3000 + rng.below(70_000)
                } else {
                    rng.below(200)
                };
                let tag: String = (0..8).map(|_| format!("{:02x}", rng.below(256))).collect();
                format!(
                    "INSERT INTO {t}(k, v, n) VALUES ('k{}', X'{tag}' || CAST(printf('%.*c', {len}, char(65 + {})) AS BLOB), {})",
                    rng.below(1000),
                    rng.below(26),
                    rng.below(1_000_000)
                )
            }
            4 => format!(
                "INSERT INTO {t}(k, v, n) SELECT k || 'x', v, n + 1 FROM {t} LIMIT {}",
                1 + rng.below(20)
            ),
            5 | 6 => format!(
                "UPDATE {t} SET n = n + {}, k = k || 'u' WHERE id % {} = 0",
                rng.below(9),
                2 + rng.below(5)
            ),
            7 => format!("DELETE FROM {t} WHERE id % {} = 1", 2 + rng.below(6)),
            8 => format!("CREATE INDEX IF NOT EXISTS {t}_k ON {t}(k)"),
            _ => {
                format!("SAVEPOINT s{step}; DELETE FROM {t}; ROLLBACK TO s{step}; RELEASE s{step}")
            }
        };
        stmts.push(stmt);
    }
    (stmts, rng.below(6) != 0)
}

/// How the branch side of the differential test writes.
enum Writers {
    /// One connection in this process (with `?spill_kib=` when given).
    OneProcess { spill_kib: Option<u64> },
    /// Every other transaction from a second process (this test binary run again).
    TwoProcesses,
}

/// The same random workload on a branch through the VFS and on a plain file: after every
/// transaction both agree, and at the end every committed version, re-read through a fresh
/// connection, agrees too.
fn differential(seed: u64, page_size: u32, steps: usize, writers: Writers) -> usize {
    let e = Env::new();
    let plain = e.create(
        "diff",
        page_size,
        "CREATE TABLE base(x); INSERT INTO base VALUES (1);",
    );
    let reference = Connection::open(&plain).unwrap();
    let scion_conn = match writers {
        Writers::OneProcess {
            spill_kib: Some(kib),
        } => e.open_with("diff@main", &format!("&spill_kib={kib}")),
        _ => e.open("diff@main"),
    };
    if matches!(writers, Writers::OneProcess { spill_kib: Some(_) }) {
        // A tiny page cache makes SQLite write pages out mid-transaction and read them
        // back: from the spill file, once they were set aside.
        scion_conn.execute_batch("PRAGMA cache_size=5").unwrap();
    }
    let mut child = matches!(writers, Writers::TwoProcesses).then(|| ChildWriter::spawn(&e));
    // A second connection on the branch, which must see every commit at its next read.
    let other = e.open("diff@main");
    let mut rng = Rng(seed);
    let b: BranchRef = "diff@main".parse().unwrap();
    let first = e.head_version("diff@main");
    e.scion
        .checkpoint(&b, &format!("v{first}").parse().unwrap())
        .unwrap();
    let mut committed = vec![(first, dump(&reference))];
    for step in 0..steps {
        let (stmts, commit) = transaction(&mut rng, step);
        let vacuum = rng.below(25) == 0;
        let script = {
            let mut all = vec!["BEGIN".to_string()];
            all.extend(stmts.iter().cloned());
            all.push(if commit { "COMMIT" } else { "ROLLBACK" }.to_string());
            if vacuum {
                all.push("VACUUM".to_string());
            }
            all
        };
        for s in &script {
            reference.execute_batch(s).unwrap();
        }
        match child.as_mut().filter(|_| step % 2 == 1) {
            Some(child) => child.run(&script),
            None => {
                for s in &script {
                    scion_conn.execute_batch(s).unwrap();
                }
            }
        }
        let want = dump(&reference);
        assert_eq!(
            dump(&scion_conn),
            want,
            "seed {seed}, page size {page_size}, step {step}"
        );
        assert_eq!(dump(&other), want, "a second connection, step {step}");
        let v = e.head_version("diff@main");
        if committed.last().map(|(last, _)| *last) != Some(v) {
            // Named, to read this version again at the end.
            e.scion
                .checkpoint(&b, &format!("v{v}").parse().unwrap())
                .unwrap();
            committed.push((v, want));
        }
    }
    // Every version committed is still there, whole: through the VFS (in a fresh process
    // too, when a second one wrote), and exported to a plain file SQLite reads without scion.
    drop(child);
    let mut fresh = matches!(writers, Writers::TwoProcesses).then(|| ChildWriter::spawn(&e));
    for (v, want) in &committed {
        if let Some(fresh) = fresh.as_mut() {
            assert_eq!(
                fresh.dump_hash(&format!("diff@main@v{v}")),
                xxhash(want.as_bytes()),
                "version {v} read by a fresh process"
            );
        }
        let c = e.open(&format!("diff@main@v{v}"));
        assert_eq!(&dump(&c), want, "version {v} through the VFS");
        let out = e.path(&format!("v{v}.db"));
        e.scion
            .export(&format!("diff@main@v{v}").parse().unwrap(), &out, true)
            .unwrap();
        let plain = Connection::open(&out).unwrap();
        assert_eq!(&dump(&plain), want, "version {v} exported");
        let ok: String = plain
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok", "version {v}");
    }
    let report = e.scion.verify().unwrap();
    assert!(report.ok(), "{report:?}");
    committed.len()
}

/// Set in the second process of the two-process differential: the store's directory.
const DIFF_CHILD: &str = "SCION_VFS_DIFF_CHILD";

/// The second process: this test binary, running `a_second_process_writes_in_turn` as the
/// child, which runs each script it reads (statements separated by a unit separator, one
/// script a line) through its own VFS connection and answers `@@ok`; `@dump <target>` is
/// answered with the hash of that target's dump, read by that process.
struct ChildWriter {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl ChildWriter {
    fn spawn(e: &Env) -> ChildWriter {
        use std::process::{Command, Stdio};
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "differential_with_a_second_writer_process",
                "--nocapture",
                "-q",
            ])
            .env(DIFF_CHILD, e.store())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        ChildWriter {
            child,
            stdin,
            stdout,
        }
    }

    fn run(&mut self, script: &[String]) {
        let line = script.join("\u{1f}").replace('\n', " ");
        assert_eq!(self.ask(&line), "ok", "the second process");
    }

    /// The hash of `target`'s dump, as the second process reads it.
    fn dump_hash(&mut self, target: &str) -> u64 {
        let answer = self.ask(&format!("@dump {target}"));
        answer
            .parse()
            .unwrap_or_else(|_| panic!("the second process: {answer}"))
    }

    fn ask(&mut self, line: &str) -> String {
        use std::io::{BufRead, Write};
        writeln!(self.stdin, "{line}").unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the second process ended"
            );
            if let Some(answer) = line.split("@@").nth(1) {
                return answer.trim().to_string();
            }
        }
    }
}

impl Drop for ChildWriter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child's side: scripts from stdin, answers on stdout (written directly, not through
/// the test harness's captured output).
fn serve_scripts(store: &str) {
    use std::io::{BufRead, Write};
    scion_vfs::register().unwrap();
    let uri = scion_vfs::uri("diff@main", store, false);
    let c = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    let mut out = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        if let Some(target) = line.strip_prefix("@dump ") {
            let v = Connection::open_with_flags(
                scion_vfs::uri(target, store, true),
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
            )
            .unwrap();
            writeln!(out, "@@{}", xxhash(dump(&v).as_bytes())).unwrap();
            out.flush().unwrap();
            continue;
        }
        let mut answer = "ok".to_string();
        for s in line.split('\u{1f}') {
            if let Err(e) = c.execute_batch(s) {
                answer = format!("{s}: {e}");
                break;
            }
        }
        writeln!(out, "@@{answer}").unwrap();
        out.flush().unwrap();
    }
}

/// Two processes write the branch in turn through the VFS while this one checks every
/// state against plain SQLite: each sees the other's commits at its next transaction.
#[test]
fn differential_with_a_second_writer_process() {
    if let Ok(store) = std::env::var(DIFF_CHILD) {
        serve_scripts(&store);
        return;
    }
    let versions = differential(0x5c10_2000, 4096, 40, Writers::TwoProcesses);
    eprintln!("differential, two processes: {versions} committed versions agreed");
    assert!(versions > 20, "{versions}");
}

/// A transaction whose pages pass the memory bound sets them aside in a temporary file:
/// the same workload, with a bound of 8 KiB, agrees with plain SQLite all the same.
#[test]
fn differential_with_dirty_pages_spilled() {
    let versions = differential(
        0x5c10_3000,
        1024,
        40,
        Writers::OneProcess { spill_kib: Some(8) },
    );
    assert!(versions > 20, "{versions}");
}

#[test]
fn differential_random_workloads_across_page_sizes() {
    let mut transactions = 0;
    for (i, page_size) in [512u32, 1024, 4096, 8192, 65536].into_iter().enumerate() {
        transactions += differential(
            0x5c10_0000 + i as u64,
            page_size,
            40,
            Writers::OneProcess { spill_kib: None },
        );
    }
    // Printed for the record: how much the differential test exercised.
    eprintln!("differential: {transactions} committed versions agreed across 5 page sizes");
    assert!(transactions > 100, "{transactions}");
}

#[test]
fn a_read_transaction_keeps_its_snapshot_while_another_connection_commits() {
    let e = Env::new();
    e.create("iso", 4096, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    let reader = e.open("iso@main");
    let writer = e.open("iso@main");
    reader.execute_batch("BEGIN").unwrap();
    let count = |c: &Connection| -> i64 {
        c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&reader), 1);
    writer
        .execute_batch("INSERT INTO t VALUES (2); INSERT INTO t VALUES (3);")
        .unwrap();
    assert_eq!(count(&writer), 3);
    assert_eq!(count(&reader), 1, "the reader's snapshot moved under it");
    reader.execute_batch("COMMIT").unwrap();
    assert_eq!(count(&reader), 3, "a new read transaction sees the commit");
}

#[test]
fn a_writer_whose_snapshot_is_stale_gets_busy_snapshot() {
    let e = Env::new();
    e.create("stale", 4096, "CREATE TABLE t(x);");
    let a = e.open("stale@main");
    let b = e.open("stale@main");
    a.execute_batch("BEGIN").unwrap();
    a.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
        .unwrap();
    b.execute_batch("INSERT INTO t VALUES (1)").unwrap();
    let err = a.execute_batch("INSERT INTO t VALUES (2)").unwrap_err();
    assert_eq!(
        err.sqlite_error().map(|e| e.extended_code),
        Some(rusqlite::ffi::SQLITE_BUSY_SNAPSHOT),
        "{err}"
    );
    a.execute_batch("ROLLBACK").unwrap();
    a.execute_batch("INSERT INTO t VALUES (2)").unwrap();
    assert_eq!(
        a.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .unwrap(),
        2
    );
}

#[test]
fn a_forks_writes_never_show_on_its_parent() {
    let e = Env::new();
    e.create("fam", 4096, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    e.scion
        .fork(
            &"fam@main".parse().unwrap(),
            &"child".parse().unwrap(),
            None,
        )
        .unwrap();
    let parent = e.open("fam@main");
    let child = e.open("fam@child");
    child.execute_batch("INSERT INTO t VALUES (2)").unwrap();
    let count = |c: &Connection| -> i64 {
        c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&child), 2);
    assert_eq!(count(&parent), 1);
    // A fork is O(1) and its first read needs no materialized file.
    assert!(!e
        .scion
        .checkout_path(&"fam@child".parse().unwrap())
        .exists());
}

#[test]
fn rollback_discards_and_commit_costs_the_changed_pages() {
    let e = Env::new();
    e.create(
        "cost",
        4096,
        "CREATE TABLE t(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) INSERT INTO t SELECT randomblob(1000) FROM n;",
    );
    let c = e.open("cost@main");
    let before = e.head_version("cost@main");
    c.execute_batch("BEGIN; DELETE FROM t; ROLLBACK;").unwrap();
    assert_eq!(
        e.head_version("cost@main"),
        before,
        "a rollback publishes nothing"
    );
    c.execute_batch("UPDATE t SET x = zeroblob(1000) WHERE rowid = 7")
        .unwrap();
    assert_eq!(e.head_version("cost@main"), before + 1);
    let v: String = c
        .pragma_query_value(None, "scion_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v.parse::<u64>().unwrap(), before + 1);
}

#[test]
fn wal_is_refused_with_a_message_that_says_why() {
    let e = Env::new();
    e.create("wal", 4096, "CREATE TABLE t(x);");
    let c = e.open("wal@main");
    let err = c.pragma_update(None, "journal_mode", "wal").unwrap_err();
    assert!(err.to_string().contains("journal_mode=WAL"), "{err}");
    c.execute_batch("INSERT INTO t VALUES (1)").unwrap();
}

#[test]
fn a_checkpoint_opens_read_only_and_unknown_names_fail_to_open() {
    let e = Env::new();
    e.create("ro", 4096, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    let main: BranchRef = "ro@main".parse().unwrap();
    e.scion.checkpoint(&main, &"one".parse().unwrap()).unwrap();
    let w = e.open("ro@main");
    w.execute_batch("INSERT INTO t VALUES (2)").unwrap();
    let cp = e.open("ro@main@one");
    assert_eq!(
        cp.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .unwrap(),
        1
    );
    let err = cp.execute_batch("INSERT INTO t VALUES (3)").unwrap_err();
    assert!(
        err.to_string().contains("readonly") || err.to_string().contains("read-only"),
        "{err}"
    );
    let uri = scion_vfs::uri("ro@nope", &e.store().display().to_string(), false);
    let err = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
    )
    .and_then(|c| c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0)))
    .unwrap_err();
    assert!(err.to_string().contains("unable to open"), "{err}");
    let why = scion_vfs::last_error().unwrap();
    assert!(why.contains("ro@nope"), "{why}");
}

#[test]
fn a_vfs_writer_and_a_file_checkout_writer_exclude_each_other() {
    let e = Env::new();
    e.create("both", 4096, "CREATE TABLE t(x);");
    let main: BranchRef = "both@main".parse().unwrap();
    // The checkout is checkpointed while a VFS write transaction is open: the first to
    // publish wins, and the VFS commit is refused as a stale snapshot, not merged.
    let path: PathBuf = e.scion.checkout(&main, false).unwrap().path;
    let c = e.open("both@main");
    c.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")
        .unwrap();
    exec(&path, "INSERT INTO t VALUES (99)");
    e.scion.checkpoint(&main, &"file".parse().unwrap()).unwrap();
    let err = c.execute_batch("COMMIT").unwrap_err();
    assert_eq!(
        err.sqlite_error().map(|e| e.extended_code),
        Some(rusqlite::ffi::SQLITE_BUSY_SNAPSHOT),
        "{err}"
    );
    let why = scion_vfs::last_error().unwrap();
    assert!(why.contains("it was not committed"), "{why}");
    // The refused transaction's pages are gone from the connection's cache too: it reads
    // the checkout's row, not its own (both versions are number 2).
    let rows: Vec<i64> = c
        .prepare("SELECT x FROM t ORDER BY x")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows, vec![99]);
    // The checkout holds changes never checkpointed: a VFS writer is refused, clearly.
    exec(&path, "INSERT INTO t VALUES (100)");
    let err = c.execute_batch("INSERT INTO t VALUES (2)").unwrap_err();
    assert!(
        err.to_string().contains("locked") || err.to_string().contains("busy"),
        "{err}"
    );
    let why = scion_vfs::last_error().unwrap();
    assert!(why.contains("checkout file with changes"), "{why}");
}

/// A session's (or any holder's) lease keeps VFS writers out for as long as it lives.
#[test]
fn a_lease_on_the_branch_refuses_vfs_writers() {
    let e = Env::new();
    e.create("leased", 4096, "CREATE TABLE t(x);");
    let main: BranchRef = "leased@main".parse().unwrap();
    e.scion
        .lease_acquire(&main, std::time::Duration::from_secs(60))
        .unwrap();
    let c = e.open("leased@main");
    let err = c.execute_batch("INSERT INTO t VALUES (1)").unwrap_err();
    assert!(err.to_string().contains("locked"), "{err}");
    let why = scion_vfs::last_error().unwrap();
    assert!(why.contains("is leased by"), "{why}");
    e.scion.lease_release(&main, false).unwrap();
    c.execute_batch("INSERT INTO t VALUES (1)").unwrap();
}

/// Two connections on one host take turns: the second waits (SQLite's busy handler) or is
/// told the branch is being written, and never both write at once.
#[test]
fn connections_on_one_host_take_turns_writing() {
    let e = Env::new();
    e.create("turns", 4096, "CREATE TABLE t(x);");
    let a = e.open("turns@main");
    let b = e.open("turns@main");
    a.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")
        .unwrap();
    let err = b.execute_batch("BEGIN IMMEDIATE").unwrap_err();
    assert!(err.to_string().contains("locked"), "{err}");
    let why = scion_vfs::last_error().unwrap();
    assert!(
        why.contains("another connection on this host is writing"),
        "{why}"
    );
    a.execute_batch("COMMIT").unwrap();
    b.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (2); COMMIT;")
        .unwrap();
    let n: i64 = a
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2);
}

fn exec(path: &Path, sql: &str) {
    Connection::open(path).unwrap().execute_batch(sql).unwrap();
}

#[test]
fn exclusive_locking_mode_commits_each_transaction() {
    // SQLite never unlocks between transactions in this mode: each commit is still
    // published on its commit signal, and the next one takes the lease again.
    let e = Env::new();
    e.create("ex", 4096, "CREATE TABLE t(x);");
    let a = e.open("ex@main");
    a.pragma_update(None, "locking_mode", "EXCLUSIVE").unwrap();
    let before = e.head_version("ex@main");
    a.execute_batch("INSERT INTO t VALUES (1)").unwrap();
    a.execute_batch("INSERT INTO t VALUES (2)").unwrap();
    assert_eq!(e.head_version("ex@main"), before + 2);
    let b = e.open("ex@main");
    assert_eq!(
        b.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .unwrap(),
        2
    );
    // Between its transactions, the branch is not leased: others may checkpoint it.
    let main: BranchRef = "ex@main".parse().unwrap();
    assert!(e.scion.read_ref(&main).unwrap().0.lease.is_none());
}

/// `?version=N` opens a version the head or a checkpoint holds, read-only; any other
/// number fails to open with what the branch does keep.
#[test]
fn a_version_number_opens_read_only_while_something_keeps_it() {
    let e = Env::new();
    e.create("ver", 4096, "CREATE TABLE t(x);");
    let main: BranchRef = "ver@main".parse().unwrap();
    let c = e.open("ver@main");
    c.execute_batch("INSERT INTO t VALUES (1)").unwrap();
    e.scion.checkpoint(&main, &"two".parse().unwrap()).unwrap();
    c.execute_batch("INSERT INTO t VALUES (2)").unwrap();
    assert_eq!(e.head_version("ver@main"), 3);
    let at = |n: &str| {
        let uri = format!(
            "{}&version={n}",
            scion_vfs::uri("ver@main", &e.store().display().to_string(), false)
        );
        Connection::open_with_flags(
            uri,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
        )
    };
    let count = |c: &Connection| -> i64 {
        c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    };
    let two = at("2").unwrap();
    assert_eq!(count(&two), 1);
    let err = two.execute_batch("INSERT INTO t VALUES (9)").unwrap_err();
    assert!(err.to_string().contains("readonly"), "{err}");
    assert_eq!(count(&at("3").unwrap()), 2);
    // A later commit does not move a connection fixed at a version.
    c.execute_batch("INSERT INTO t VALUES (3)").unwrap();
    assert_eq!(count(&two), 1);
    assert!(at("1").is_err());
    let why = scion_vfs::last_error().unwrap();
    assert!(
        why.contains("version 1 of ver@main is not kept")
            && why.contains("4 (the head)")
            && why.contains("2 (checkpoint two)"),
        "{why}"
    );
    assert!(at("latest").is_err());
    let why = scion_vfs::last_error().unwrap();
    assert!(why.contains("is not a version number"), "{why}");
}
