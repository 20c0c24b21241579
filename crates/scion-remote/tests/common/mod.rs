//! What the remote tests share: stores in temporary directories (or a prefix of the test
//! S3 bucket, or the test Azurite container), databases from plain SQLite files, commits
//! through the scion VFS, dumps by the real `sqlite3` CLI.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::progress::ProgressSink;
use scion_core::{BranchRef, RemoteName, Scion, Target};
use scion_remote::Remote;

pub struct Store {
    pub scion: Scion,
    pub location: String,
}

/// A fresh store at `location` (a directory path, `s3://…`, `az://…`).
pub fn store_at(location: &str) -> Store {
    scion_vfs::register().expect("register the VFS");
    let spec = StoreSpec::parse(location).unwrap();
    let options = AttachOptions {
        init: Some(Default::default()),
        ..Default::default()
    };
    let scion = Scion::attach(&spec, options).unwrap().scion;
    let location = scion.engine().location().to_string();
    Store { scion, location }
}

/// A prefix of the test bucket no other test uses.
pub fn s3_location(tag: &str) -> String {
    let bucket = std::env::var("SCION_S3_TEST_BUCKET")
        .expect("S3 tests need ./scripts/test (it starts moto and sets SCION_S3_TEST_BUCKET)");
    format!("s3://{bucket}/remote-{tag}-{}", unique())
}

/// A prefix of the test Azurite container no other test uses.
pub fn azure_location(tag: &str) -> String {
    let container = std::env::var("SCION_AZURE_TEST_CONTAINER").expect(
        "Azure tests need ./scripts/test (it starts Azurite and sets SCION_AZURE_TEST_CONTAINER)",
    );
    format!("az://{container}/remote-{tag}-{}", unique())
}

fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{nanos:x}-{}", std::process::id())
}

impl Store {
    /// Database `db` made from a plain file on which `sql` ran.
    pub fn create(&self, dir: &Path, db: &str, sql: &str) {
        let plain = dir.join(format!("{db}-{}.plain.db", unique()));
        let c = Connection::open(&plain).unwrap();
        c.execute_batch(sql).unwrap();
        drop(c);
        self.scion
            .engine()
            .create(&db.parse().unwrap(), Some(&plain))
            .unwrap();
    }

    pub fn fork(&self, from: &str, name: &str) {
        let b: BranchRef = from.parse().unwrap();
        self.scion
            .engine()
            .fork(&b, &name.parse().unwrap(), Default::default())
            .unwrap();
    }

    pub fn open(&self, target: &str) -> Connection {
        let uri = scion_vfs::uri(target, &self.location, false);
        Connection::open_with_flags(
            uri,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
        )
        .unwrap_or_else(|e| panic!("open {target}: {e}"))
    }

    /// Run `sql` on branch `target` as one commit.
    pub fn write(&self, target: &str, sql: &str) {
        self.try_write(target, sql)
            .unwrap_or_else(|e| panic!("{target}: {sql}: {e}"));
    }

    pub fn try_write(&self, target: &str, sql: &str) -> rusqlite::Result<()> {
        self.open(target)
            .execute_batch(&format!("BEGIN; {sql}; COMMIT;"))
    }

    pub fn count(&self, target: &str, table: &str) -> i64 {
        self.open(target)
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }

    pub fn version(&self, b: &str) -> u64 {
        self.scion
            .engine()
            .read_ref(&b.parse().unwrap())
            .unwrap()
            .0
            .version
    }

    pub fn root(&self, b: &str) -> String {
        self.scion
            .engine()
            .read_ref(&b.parse().unwrap())
            .unwrap()
            .0
            .root
            .to_string()
    }

    /// `.dump` of `target` by the sqlite3 CLI, from an export.
    pub fn dump(&self, dir: &Path, target: &str) -> String {
        let out: PathBuf = dir.join(format!("dump-{}.db", unique()));
        let t: Target = target.parse().unwrap();
        self.scion.export(&t, &out, false).unwrap();
        let o = std::process::Command::new("sqlite3")
            .arg(&out)
            .arg(".dump")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::remove_file(&out).unwrap();
        String::from_utf8(o.stdout).unwrap()
    }

    /// `scion verify` finds nothing wrong.
    pub fn assert_verifies(&self) {
        let v = self.scion.verify().unwrap();
        assert!(v.ok(), "{}: {:?}", self.location, v.problems);
    }

    /// This store's view of `other` as remote `name`.
    pub fn remote(&self, name: &str, other: &Store) -> Remote {
        let name = RemoteName::new(name).unwrap();
        self.scion
            .engine()
            .add_remote(&name, &other.location)
            .unwrap();
        Remote::open(&self.scion, &name, ProgressSink::default()).unwrap()
    }
}

/// A table of `rows` rows of about 200 bytes each.
pub fn items(rows: usize) -> String {
    format!(
        "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, body TEXT);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
         INSERT INTO items SELECT i, 'item ' || i, printf('%.200c', 'x') FROM n;"
    )
}

pub fn silent() -> ProgressSink {
    ProgressSink::default()
}
