//! How workers reach branches: connections opened as production code would, read-only
//! views of published heads, and removal of working files a step no longer needs.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use scion_core::{BranchRef, Scion, Target};

use super::DB;

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
