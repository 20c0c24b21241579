//! How workers reach branches: connections opened as production code would, read-only
//! views of published heads, and removal of working files a step no longer needs.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use scion_core::{BranchRef, Scion, Target};
use serde::Serialize;

use super::options::DB;

pub fn branch(name: &str) -> BranchRef {
    format!("{DB}@{name}")
        .parse()
        .expect("generated names are valid")
}

pub fn remove_checkout(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal", ".scion", ".scion.pending"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Open a connection the way production code would: foreign keys on, default sync.
pub fn open(path: &Path) -> Result<Connection, String> {
    let c = Connection::open(path).map_err(|e| e.to_string())?;
    c.execute_batch("PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;")
        .map_err(|e| e.to_string())?;
    Ok(c)
}

/// Run a query and count its rows.
pub fn query_rows(c: &Connection, sql: &str) -> Result<usize, String> {
    let mut stmt = c.prepare(sql).map_err(|e| e.to_string())?;
    let mut rows = stmt.query([]).map_err(|e| e.to_string())?;
    let mut n = 0;
    while rows.next().map_err(|e| e.to_string())?.is_some() {
        n += 1;
    }
    Ok(n)
}

/// Connect read-only to a branch's published head (what prune and cross-branch passes read).
pub fn connect_read_only(scion: &Scion, name: &str) -> Result<(Connection, PathBuf), String> {
    let t = Target {
        branch: branch(name),
        checkpoint: None,
    };
    let path = scion
        .checkout_read_only(&t)
        .map_err(|e| e.to_string())?
        .path;
    Ok((open(&path)?, path))
}

/// How a step reaches its branch (`--connect`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectMode {
    /// A checkout file opened by SQLite; publishing checkpoints it.
    Checkout,
    /// The branch opened through the scion VFS (the store at this directory): nothing is
    /// materialized; a step runs in one transaction, and publishing commits it and names
    /// the head.
    Vfs { store: PathBuf },
    /// The baseline without scion: each branch is a plain file `<name>.db` in this
    /// directory, a fork copies its parent's, a destroy removes it.
    Copy { dir: PathBuf },
}

impl ConnectMode {
    pub fn name(&self) -> &'static str {
        match self {
            ConnectMode::Checkout => "checkout",
            ConnectMode::Vfs { .. } => "vfs",
            ConnectMode::Copy { .. } => "copy",
        }
    }

    /// Fork `parent` as `child`: a scion fork, or a file copy for the baseline.
    pub fn fork(&self, scion: &Scion, parent: &str, child: &str) -> Result<(), String> {
        match self {
            ConnectMode::Copy { dir } => {
                std::fs::copy(copy_path(dir, parent), copy_path(dir, child))
                    .map(drop)
                    .map_err(|e| format!("copying {parent}: {e}"))
            }
            _ => scion
                .engine()
                .fork(&branch(parent), &branch(child).branch, Default::default())
                .map(drop)
                .map_err(|e| e.to_string()),
        }
    }

    /// Destroy `name`'s branch (or its file, for the baseline).
    pub fn destroy(&self, scion: &Scion, name: &str, force: bool) -> Result<(), String> {
        match self {
            ConnectMode::Copy { dir } => {
                remove_checkout(&copy_path(dir, name));
                Ok(())
            }
            _ => scion
                .destroy(&branch(name), force)
                .map(drop)
                .map_err(|e| e.to_string()),
        }
    }
}

fn copy_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.db"))
}

fn open_vfs(store: &Path, name: &str, flags: OpenFlags) -> Result<Connection, String> {
    let uri = scion_vfs::uri(
        &branch(name).to_string(),
        &store.display().to_string(),
        false,
    );
    let c = Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
        .map_err(|e| format!("{e} ({})", scion_vfs::last_error().unwrap_or_default()))?;
    c.execute_batch("PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;")
        .map_err(|e| e.to_string())?;
    Ok(c)
}

/// A step's writable connection to its branch, and the working file to drop afterwards
/// (none through the VFS, where the step's statements run in one transaction).
pub fn connect_writable(
    scion: &Scion,
    mode: &ConnectMode,
    name: &str,
) -> Result<(Connection, Option<PathBuf>), String> {
    match mode {
        ConnectMode::Checkout => {
            let path = scion
                .checkout(&branch(name), false)
                .map_err(|e| e.to_string())?
                .path;
            Ok((open(&path)?, Some(path)))
        }
        ConnectMode::Vfs { store } => {
            let c = open_vfs(store, name, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
            c.execute_batch("BEGIN").map_err(|e| e.to_string())?;
            Ok((c, None))
        }
        ConnectMode::Copy { dir } => Ok((open(&copy_path(dir, name))?, None)),
    }
}

/// Read-only access to a branch's published head, and the file to drop afterwards.
pub fn connect_reader(
    scion: &Scion,
    mode: &ConnectMode,
    name: &str,
) -> Result<(Connection, Option<PathBuf>), String> {
    match mode {
        ConnectMode::Checkout => connect_read_only(scion, name).map(|(c, p)| (c, Some(p))),
        ConnectMode::Vfs { store } => Ok((
            open_vfs(store, name, OpenFlags::SQLITE_OPEN_READ_ONLY)?,
            None,
        )),
        ConnectMode::Copy { dir } => {
            let c =
                Connection::open_with_flags(copy_path(dir, name), OpenFlags::SQLITE_OPEN_READ_ONLY)
                    .map_err(|e| e.to_string())?;
            Ok((c, None))
        }
    }
}
