//! A real `scion serve` process on a fresh store, and a client of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use scion_daemon::client::{ClientError, DaemonClient, Reply};

pub struct Served {
    pub dir: PathBuf,
    pub store: PathBuf,
    pub socket: PathBuf,
    pub child: Option<Child>,
    pub extra: Vec<String>,
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_scion"))
}

impl Served {
    /// A store in `dir` (made if missing) with database `shop` from a seed of `rows` rows,
    /// and no daemon yet.
    pub fn prepare(dir: &Path, rows: usize) -> Served {
        let store = dir.join("store");
        let socket = dir.join("run").join("scion.sock");
        let s = Served {
            dir: dir.to_path_buf(),
            store,
            socket,
            child: None,
            extra: Vec::new(),
        };
        s.scion(&["init"]);
        let seed = dir.join("seed.db");
        let c = rusqlite::Connection::open(&seed).unwrap();
        c.execute_batch(&format!(
            "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, qty INTEGER);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
             INSERT INTO items(name, qty) SELECT 'item-' || i, i FROM n;
             CREATE TABLE marks(writer TEXT, seq INTEGER, PRIMARY KEY (writer, seq));"
        ))
        .unwrap();
        drop(c);
        s.scion(&["create", "shop", "--from", seed.to_str().unwrap()]);
        s
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(&self.dir)
            .env("HOME", &self.dir)
            .env("SCION_STORE", &self.store)
            .env("SCION_SOCKET", &self.socket)
            .env_remove("SCION_CLONE")
            .env("SCION_LOG", "warn");
        c
    }

    /// Run a CLI command to success; its stdout.
    pub fn scion(&self, args: &[&str]) -> String {
        let out = self.cmd(args).output().unwrap();
        assert!(
            out.status.success(),
            "scion {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Start `scion serve` with `args` and wait until it answers.
    pub fn start(&mut self, args: &[&str]) {
        let mut all = vec!["serve"];
        all.extend_from_slice(args);
        let child = self
            .cmd(&all)
            .env("SCION_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.dir.join("serve.log"))
                    .unwrap(),
            ))
            .spawn()
            .unwrap();
        self.child = Some(child);
        let started = Instant::now();
        loop {
            if self.client().raw("GET", "/healthz", None, &[]).is_ok() {
                return;
            }
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("scion serve exited with {st}: {}", self.log());
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "daemon never answered"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("serve.log")).unwrap_or_default()
    }

    pub fn client(&self) -> DaemonClient {
        DaemonClient::new(&self.socket)
    }

    pub fn get(&self, path: &str) -> serde_json::Value {
        self.client().request("GET", path, None, &[]).unwrap().body
    }

    pub fn post(&self, path: &str, body: serde_json::Value) -> Result<Reply, ClientError> {
        self.client().request("POST", path, Some(&body), &[])
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGKILL the daemon and reap it.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM the daemon and wait for it to exit; its exit code.
    pub fn terminate(&mut self) -> i32 {
        let mut c = self.child.take().unwrap();
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(c.id() as i32, libc::SIGTERM);
        }
        c.wait().unwrap().code().unwrap_or(-1)
    }

    /// The head of `target`, exported to a fresh file.
    pub fn export(&self, target: &str) -> PathBuf {
        let out = self
            .dir
            .join(format!("export-{}.db", crate::served::unique()));
        self.scion(&["export", target, out.to_str().unwrap()]);
        out
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

/// The API error code of a failed request.
pub fn code(r: Result<Reply, ClientError>) -> (u16, String) {
    match r {
        Err(ClientError::Api { status, body }) => (status, body.code),
        Ok(r) => panic!("expected a refusal, got {}: {}", r.status, r.body),
        Err(e) => panic!("expected an API error, got {e}"),
    }
}

/// A store with database `shop` of `rows` rows and a daemon started with `args`; keep the
/// directory alive as long as the daemon.
pub fn served(rows: usize, args: &[&str]) -> (tempfile::TempDir, Served) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Served::prepare(dir.path(), rows);
    s.start(args);
    (dir, s)
}

/// One integer from a query on a SQLite file.
pub fn rows(path: &Path, sql: &str) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

/// Run SQL on a file with the stock `sqlite3` CLI, as a user's writer would.
pub fn sqlite3(path: &Path, sql: &str) {
    let out = std::process::Command::new("sqlite3")
        .arg(path)
        .arg(sql)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sqlite3 {sql:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
