//! Fixtures for capture tests: a local store in a temp directory with one database, real
//! writers (the `sqlite3` CLI, Python's `sqlite3`), and row-level dumps to compare states.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{types::Value, Connection};
use scion_capture::LiveBranch;
use scion_core::{BranchRef, ClonePolicy, DbName, Scion, ScionOptions, Target};
use scion_store::LocalBackend;

pub struct Env {
    pub dir: tempfile::TempDir,
    pub scion: Arc<Scion>,
}

pub const HOLDER: &str = "test-holder#s1";

pub fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let backend = Arc::new(LocalBackend::open(&store).unwrap());
    let mut o = ScionOptions::new(store.join("checkouts"), ClonePolicy::Auto);
    o.store_dir = Some(store.clone());
    let scion = Arc::new(Scion::init(backend, "test", o, Default::default()).unwrap());
    Env { dir, scion }
}

impl Env {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A database `shop` with a table of `rows` rows, and its `main` branch.
    pub fn shop(&self, rows: usize) -> BranchRef {
        let seed = self.path("seed.db");
        let c = Connection::open(&seed).unwrap();
        c.execute_batch(
            "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, qty INTEGER, blob BLOB);",
        )
        .unwrap();
        c.execute_batch("BEGIN").unwrap();
        for i in 0..rows {
            c.execute(
                "INSERT INTO items(name, qty, blob) VALUES (?1, ?2, randomblob(100))",
                (format!("item-{i}"), i as i64),
            )
            .unwrap();
        }
        c.execute_batch("COMMIT").unwrap();
        drop(c);
        let db: DbName = "shop".parse().unwrap();
        self.scion.engine().create(&db, Some(&seed)).unwrap();
        "shop@main".parse().unwrap()
    }

    pub fn open(&self, b: &BranchRef) -> LiveBranch {
        LiveBranch::open(
            self.scion.clone(),
            b,
            HOLDER,
            Duration::from_secs(60),
            false,
        )
        .unwrap()
    }

    /// The durable head of `b`, exported to a fresh file and dumped.
    pub fn dump_head(&self, b: &BranchRef) -> String {
        let t: Target = b.to_string().parse().unwrap();
        let out = self.path(&format!("export-{}.db", unique()));
        self.scion.export(&t, &out, false).unwrap();
        let d = dump(&out);
        let c = Connection::open(&out).unwrap();
        let ok: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok", "the durable version is a sound database");
        drop(c);
        std::fs::remove_file(&out).unwrap();
        d
    }
}

pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

/// Every table's rows in a stable order, as text.
pub fn dump(path: &Path) -> String {
    let c = Connection::open(path).unwrap();
    dump_conn(&c)
}

pub fn dump_conn(c: &Connection) -> String {
    let mut out = String::new();
    let tables: Vec<(String, String)> = c
        .prepare("SELECT name, sql FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (name, sql) in tables {
        out.push_str(&format!("{sql}\n"));
        let mut stmt = c
            .prepare(&format!("SELECT * FROM \"{name}\" ORDER BY 1"))
            .unwrap();
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                (0..n)
                    .map(|i| r.get::<_, Value>(i))
                    .collect::<Result<Vec<_>, _>>()
            })
            .unwrap();
        for row in rows {
            out.push_str(&format!("{:?}\n", row.unwrap()));
        }
    }
    out
}

/// Run `script` through the stock `sqlite3` CLI (no busy timeout unless the script sets
/// one); returns its stderr.
pub fn sqlite3(db: &Path, script: &str) -> String {
    let out = Command::new("sqlite3")
        .arg(db)
        .arg(script)
        .output()
        .expect("the sqlite3 CLI is installed (./scripts/test installs it)");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "sqlite3 failed: {err}");
    err
}

/// A Python process holding a connection to `db` that has read it (so it holds SQLite's
/// shared lock), until killed.
pub fn hold_open(db: &Path) -> std::process::Child {
    use std::io::BufRead;
    let mut child = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\nc.execute('SELECT count(*) FROM sqlite_schema').fetchall()\nprint('ready', flush=True)\nsys.stdin.read()")
        .arg(db)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    child
}
