//! What the VFS tests share: a store in a temporary directory with the VFS registered,
//! databases made from plain files, connections through the VFS, and a row-level dump.
#![allow(dead_code)]

mod workload;
// Only the test binaries that run the random workload use it.
#[allow(unused_imports)]
pub use workload::*;

use std::path::PathBuf;
use std::sync::Arc;

use rusqlite::{Connection, OpenFlags};
use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::{BranchRef, Scion};

pub struct Env {
    pub dir: tempfile::TempDir,
    pub scion: Arc<Scion>,
}

impl Env {
    pub fn new() -> Env {
        scion_vfs::register().expect("register the VFS");
        let dir = tempfile::tempdir().unwrap();
        let spec = StoreSpec::parse(dir.path().join("store").to_str().unwrap()).unwrap();
        let options = AttachOptions {
            init: Some(Default::default()),
            ..Default::default()
        };
        let scion = Arc::new(Scion::attach(&spec, options).unwrap().scion);
        Env { dir, scion }
    }

    pub fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A database made from a plain file (`page_size`, with `sql` run on it first).
    pub fn create(&self, db: &str, page_size: u32, sql: &str) -> PathBuf {
        let plain = self.path(&format!("{db}.plain.db"));
        let c = Connection::open(&plain).unwrap();
        c.execute_batch(&format!("PRAGMA page_size={page_size}; VACUUM;"))
            .unwrap();
        c.execute_batch(sql).unwrap();
        drop(c);
        self.scion
            .engine()
            .create(&db.parse().unwrap(), Some(&plain))
            .unwrap();
        plain
    }

    pub fn open(&self, target: &str) -> Connection {
        self.open_with(target, "")
    }

    /// `target` with more URI parameters (`&name=value...`).
    pub fn open_with(&self, target: &str, params: &str) -> Connection {
        let uri = scion_vfs::uri(target, &self.store().display().to_string(), false) + params;
        Connection::open_with_flags(
            uri,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
        )
        .unwrap_or_else(|e| panic!("open {target}: {e} ({:?})", scion_vfs::last_error()))
    }

    pub fn head_version(&self, b: &str) -> u64 {
        let b: BranchRef = b.parse().unwrap();
        self.scion.engine().read_ref(&b).unwrap().0.version
    }
}

/// Every table's rows in a stable order, and the schema: what "the same database" means.
pub fn dump(c: &Connection) -> String {
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
                            format!("x{}:{:016x}", b.len(), fnv1a(b))
                        }
                    })
                    .collect();
                out += &format!("  {}\n", vals.join("|"));
            }
        }
    }
    out
}

/// FNV-1a: a short, stable digest of a dump or a blob.
pub fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100000001b3)
    })
}
