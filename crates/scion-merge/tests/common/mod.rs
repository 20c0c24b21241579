//! What the merge tests share: a store in a temporary directory, databases made from plain
//! SQLite files, branches written through the scion VFS, and rows read back as text.
#![allow(dead_code)]

use std::path::PathBuf;

use rusqlite::{Connection, OpenFlags};
use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::{BranchRef, Scion, Target};
use scion_merge::{MergeOptions, MergeReport};

pub struct Env {
    pub dir: tempfile::TempDir,
    pub scion: Scion,
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
        let scion = Scion::attach(&spec, options).unwrap().scion;
        Env { dir, scion }
    }

    /// Database `db` made from a plain file on which `sql` ran; returns that file.
    pub fn create(&self, db: &str, sql: &str) -> PathBuf {
        let plain = self.dir.path().join(format!("{db}.plain.db"));
        let c = Connection::open(&plain).unwrap();
        c.execute_batch(sql).unwrap();
        drop(c);
        self.scion
            .engine()
            .create(&db.parse().unwrap(), Some(&plain))
            .unwrap();
        plain
    }

    pub fn fork(&self, from: &str, name: &str) {
        let b: BranchRef = from.parse().unwrap();
        self.scion
            .engine()
            .fork(&b, &name.parse().unwrap(), Default::default())
            .unwrap();
    }

    /// A connection to `target` through the VFS.
    pub fn open(&self, target: &str) -> Connection {
        let uri = scion_vfs::uri(target, self.scion.engine().location(), false);
        Connection::open_with_flags(
            uri,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
        )
        .unwrap_or_else(|e| panic!("open {target}: {e}"))
    }

    /// Run `sql` on branch `target` (one commit).
    pub fn write(&self, target: &str, sql: &str) {
        let c = self.open(target);
        c.execute_batch(&format!("BEGIN; {sql}; COMMIT;"))
            .unwrap_or_else(|e| panic!("{target}: {sql}: {e}"));
    }

    pub fn merge(&self, src: &str, dst: &str, opts: &MergeOptions) -> MergeReport {
        self.try_merge(src, dst, opts).unwrap()
    }

    pub fn try_merge(
        &self,
        src: &str,
        dst: &str,
        opts: &MergeOptions,
    ) -> scion_merge::MergeResult<MergeReport> {
        let src: Target = src.parse().unwrap();
        let dst: BranchRef = dst.parse().unwrap();
        let s = &self.scion;
        scion_merge::merge(s.engine(), &mut s.working_files(), &src, &dst, opts)
    }

    /// Rows of `query` on `target`, one line each, values separated by `|`.
    pub fn rows(&self, target: &str, query: &str) -> Vec<String> {
        rows(&self.open(target), query)
    }

    pub fn version(&self, b: &str) -> u64 {
        self.scion
            .engine()
            .read_ref(&b.parse().unwrap())
            .unwrap()
            .0
            .version
    }
}

pub fn rows(c: &Connection, query: &str) -> Vec<String> {
    let mut s = c.prepare(query).unwrap();
    let n = s.column_count();
    s.query_map([], |r| {
        Ok((0..n)
            .map(|i| match r.get_ref(i).unwrap() {
                rusqlite::types::ValueRef::Null => "NULL".to_string(),
                rusqlite::types::ValueRef::Integer(i) => i.to_string(),
                rusqlite::types::ValueRef::Real(f) => format!("{f:?}"),
                rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                rusqlite::types::ValueRef::Blob(b) => format!(
                    "x'{}'",
                    b.iter().map(|x| format!("{x:02x}")).collect::<String>()
                ),
            })
            .collect::<Vec<_>>()
            .join("|"))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}
