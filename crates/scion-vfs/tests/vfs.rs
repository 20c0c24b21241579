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
        let uri = scion_vfs::uri(target, &self.store().display().to_string(), false);
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

/// The same random workload on a branch through the VFS and on a plain file: after every
/// transaction both agree, and at the end every committed version, re-read through a fresh
/// connection, agrees too.
fn differential(seed: u64, page_size: u32, steps: usize) -> usize {
    let e = Env::new();
    let plain = e.create(
        "diff",
        page_size,
        "CREATE TABLE base(x); INSERT INTO base VALUES (1);",
    );
    let reference = Connection::open(&plain).unwrap();
    let scion_conn = e.open("diff@main");
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
        for c in [&reference, &scion_conn] {
            c.execute_batch("BEGIN").unwrap();
            for s in &stmts {
                c.execute_batch(s).unwrap();
            }
            c.execute_batch(if commit { "COMMIT" } else { "ROLLBACK" })
                .unwrap();
            if vacuum {
                c.execute_batch("VACUUM").unwrap();
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
    // Every version committed is still there, whole: through the VFS, and exported to a
    // plain file SQLite reads without scion.
    for (v, want) in &committed {
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

#[test]
fn differential_random_workloads_across_page_sizes() {
    let mut transactions = 0;
    for (i, page_size) in [512u32, 1024, 4096, 8192, 65536].into_iter().enumerate() {
        transactions += differential(0x5c10_0000 + i as u64, page_size, 40);
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
    // A VFS write transaction holds the branch's lease: the checkout's checkpoint is refused.
    let path: PathBuf = e.scion.checkout(&main, false).unwrap().path;
    let c = e.open("both@main");
    c.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")
        .unwrap();
    exec(&path, "INSERT INTO t VALUES (99)");
    let err = e
        .scion
        .checkpoint(&main, &"file".parse().unwrap())
        .unwrap_err();
    assert!(
        matches!(err, scion_core::CoreError::LeaseHeld { .. }),
        "{err}"
    );
    c.execute_batch("COMMIT").unwrap();
    // The checkout holds changes never checkpointed: a VFS writer is refused, clearly.
    let err = c.execute_batch("INSERT INTO t VALUES (2)").unwrap_err();
    assert!(
        err.to_string().contains("locked") || err.to_string().contains("busy"),
        "{err}"
    );
    let why = scion_vfs::last_error().unwrap();
    assert!(why.contains("checkout file with changes"), "{why}");
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
