//! Fixtures shared by the engine's integration tests: stores in temp directories and a
//! row-level dump of SQLite files (never raw bytes) to compare states.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{types::Value, Connection};
use scion_core::{BranchRef, ClonePolicy, Scion, ScionOptions, Target};
use scion_store::{Backend, LocalBackend};

pub struct Env {
    pub dir: tempfile::TempDir,
    pub scion: Scion,
}

impl Env {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn store_dir(&self) -> PathBuf {
        self.dir.path().join("store")
    }
    /// The same store opened again through another backend (for example a faulty one).
    pub fn reopen_with(&self, backend: Arc<dyn Backend>) -> Scion {
        Scion::open(backend, "test", self.options()).unwrap()
    }
    pub fn reopen(&self) -> Scion {
        self.reopen_with(Arc::new(LocalBackend::open(self.store_dir()).unwrap()))
    }
    pub fn options(&self) -> ScionOptions {
        local_options(&self.store_dir())
    }
    /// Export a target to a fresh file and dump it.
    pub fn dump_target(&self, scion: &Scion, target: &str) -> String {
        let t: Target = target.parse().unwrap();
        let out = self.path(&format!("export-{}.db", unique()));
        scion.export(&t, &out, false).unwrap();
        let d = dump(&out);
        std::fs::remove_file(&out).unwrap();
        d
    }
}

pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

pub fn env() -> Env {
    env_with(Default::default())
}

/// A local store made with `settings`.
pub fn env_with(settings: scion_core::StoreSettings) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(LocalBackend::open(dir.path().join("store")).unwrap());
    let options = local_options(&dir.path().join("store"));
    let scion = Scion::init(backend, "test", options, settings).unwrap();
    Env { dir, scion }
}

/// Options of a local store at `store`: checkouts inside it, exports kept out of it.
pub fn local_options(store: &Path) -> ScionOptions {
    let mut o = ScionOptions::new(store.join("checkouts"), ClonePolicy::Auto);
    o.store_dir = Some(store.to_path_buf());
    o
}

/// A store on the S3 test server (moto, started by `./scripts/test`), in a fresh prefix.
pub fn env_s3() -> Env {
    let Ok(bucket) = std::env::var("SCION_S3_TEST_BUCKET") else {
        panic!("S3 tests need ./scripts/test (it starts moto and sets SCION_S3_TEST_BUCKET)");
    };
    let dir = tempfile::tempdir().unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let loc =
        scion_store::S3Location::parse(&format!("s3://{bucket}/model-{nanos:x}-{}", unique()))
            .unwrap();
    let s3 = Arc::new(
        scion_store::CloudBackend::attach_s3(loc, &scion_store::S3Config::from_env().unwrap())
            .unwrap(),
    );
    let cached = Arc::new(
        scion_store::SegmentCache::new(s3, dir.path().join("segments"), "segments/").unwrap(),
    );
    let scion = Scion::init(
        cached,
        "s3-test",
        ScionOptions::new(
            dir.path().join("store").join("checkouts"),
            ClonePolicy::Auto,
        ),
        Default::default(),
    )
    .unwrap();
    Env { dir, scion }
}

pub fn br(s: &str) -> BranchRef {
    s.parse().unwrap()
}

pub fn exec(path: &Path, sql: &str) {
    let c = Connection::open(path).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    c.execute_batch(sql).unwrap();
}

/// A small database with one table and `rows` rows, in WAL mode.
pub fn seed(path: &Path, rows: usize) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=WAL; CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL);",
    )
    .unwrap();
    let tx = c.unchecked_transaction().unwrap();
    for i in 0..rows {
        tx.execute(
            "INSERT INTO items(name, price) VALUES (?1, ?2)",
            (format!("item-{i}-{}", "x".repeat(i % 50)), i as f64 * 1.5),
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

/// Schema and every row of every table, in a stable order.
pub fn dump(path: &Path) -> String {
    let c = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    dump_conn(&c)
}

pub fn dump_conn(c: &Connection) -> String {
    let mut out = String::new();
    let mut stmt = c
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name")
        .unwrap();
    let objects: Vec<(String, String, String, Option<String>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    for (ty, name, _tbl, sql) in &objects {
        out.push_str(&format!("{ty} {name}: {}\n", sql.as_deref().unwrap_or("")));
        if ty != "table" || name.starts_with("sqlite_") {
            continue;
        }
        let ncols: i64 = c
            .query_row(
                &format!("SELECT count(*) FROM pragma_table_info('{name}')"),
                [],
                |r| r.get(0),
            )
            .unwrap();
        let ncols = ncols as usize;
        let order: Vec<String> = (1..=ncols).map(|i| i.to_string()).collect();
        let mut q = c
            .prepare(&format!(
                "SELECT * FROM \"{name}\" ORDER BY {}",
                order.join(",")
            ))
            .unwrap();
        let mut rows = q.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            let vals: Vec<String> = (0..ncols)
                .map(|i| match row.get::<_, Value>(i).unwrap() {
                    Value::Blob(b) => format!("blob:{}:{:x}", b.len(), xxh(&b)),
                    v => format!("{v:?}"),
                })
                .collect();
            out.push_str(&format!("  {}\n", vals.join(" | ")));
        }
    }
    out
}

fn xxh(b: &[u8]) -> u64 {
    // FNV-1a is enough to tell blobs apart in a dump.
    b.iter().fold(0xcbf29ce484222325u64, |h, x| {
        (h ^ *x as u64).wrapping_mul(0x100000001b3)
    })
}

/// Every branch head and checkpoint of the store exports (every frame verified, and the
/// whole-database checksum of each version).
pub fn export_every_version(e: &Env) {
    let s = e.reopen();
    for db in s.engine().list_databases().unwrap() {
        for (branch, _) in s.engine().list_branches(&db).unwrap() {
            let b = format!("{db}@{branch}");
            e.dump_target(&s, &b);
            for (cp, _) in s.engine().list_checkpoints(&b.parse().unwrap()).unwrap() {
                e.dump_target(&s, &format!("{b}@{cp}"));
            }
        }
    }
}

/// A fork `shop@work` of `shop` holding checkpoints `c1` (every price 1) and `c2` (every
/// price 2), its head at `c2`.
pub fn fork_work_with_two_checkpoints(e: &Env) {
    e.scion
        .engine()
        .fork(&br("shop"), &"work".parse().unwrap(), Default::default())
        .unwrap();
    let p = e.scion.checkout(&br("shop@work"), false).unwrap().path;
    for price in [1, 2] {
        exec(&p, &format!("UPDATE items SET price = {price};"));
        e.scion
            .checkpoint(
                &br("shop@work"),
                &format!("c{price}").parse().unwrap(),
                Default::default(),
            )
            .unwrap();
    }
}

/// Database `shop`, imported from a seeded file of `rows` rows.
pub fn create_shop(e: &Env, rows: usize) {
    let src = e.path("shop.db");
    seed(&src, rows);
    e.scion
        .engine()
        .create(&scion_core::DbName::new("shop").unwrap(), Some(&src))
        .unwrap();
}

/// A file's bytes with the journal-mode bytes (18, 19) masked: a checkout is in WAL mode,
/// an export of the same version in rollback mode.
pub fn bytes_without_journal_mode(path: &Path) -> Vec<u8> {
    let mut b = std::fs::read(path).unwrap();
    b[18] = 0;
    b[19] = 0;
    b
}
