//! `create`: a new database, empty or imported from an existing SQLite file.

use std::path::Path;

use serde::Serialize;

use crate::commit::{Commit, Sealed};
use crate::error::{EngineError, EngineResult};
use crate::format::{page_contribution, page_hash, FrameKind, Locator, Parents, RootRecord};
use crate::names::{BranchName, BranchRef, DbName};
use crate::pagemap::{self, DEFAULT_FANOUT_BITS};
use crate::refs::{refs_prefix, Ref, REF_SCHEMA};
use crate::sqlite_io::{self, change_counter};
use crate::Engine;

/// What `create` made.
#[derive(Debug, Clone, Serialize)]
pub struct CreateReport {
    /// The new database.
    pub db: DbName,
    /// Its first version's number.
    pub version: u64,
    /// Its page size in bytes.
    pub page_size: u32,
    /// Its number of pages.
    pub page_count: u32,
    /// Objects written to the store.
    pub store_objects: u64,
    /// Their bytes.
    pub store_bytes: u64,
}

/// Say what is wrong with a source SQLite could not read, where scion can tell.
fn source_error(path: &Path, e: EngineError) -> EngineError {
    let journal = crate::sqlite_io::sidecar_path(path, "-journal");
    // A journal is hot only when no connection is still in the transaction it belongs to.
    let hot = std::fs::metadata(&journal).is_ok_and(|m| m.len() > 0)
        && !crate::sqlite_io::in_use(path).unwrap_or(true);
    if hot
        && matches!(
            e,
            EngineError::Sqlite { .. } | EngineError::NotSqlite { .. }
        )
    {
        return EngineError::HotJournal {
            path: path.to_path_buf(),
        };
    }
    if e.is_sqlite_busy() {
        return EngineError::SourceBusy {
            path: path.to_path_buf(),
        };
    }
    e
}

/// Read `path`'s committed state (through SQLite, in one read transaction) and write it
/// to the store as a complete version, sealed but not yet published.
pub(crate) fn import_file(scion: &Engine, path: &Path, read_only: bool) -> EngineResult<Sealed> {
    let mut commit = Commit::begin(scion)?;
    let writer = &mut commit.writer;
    let mut pages: Vec<Option<Locator>> = Vec::new();
    let mut checksum = 0u64;
    let mut zero_hash = None;
    let mut counter = 0;
    let info = sqlite_io::read_snapshot(path, read_only, &*scion.progress, |pgno, page| {
        let zero = *zero_hash.get_or_insert_with(|| page_hash(&vec![0u8; page.len()]));
        if pgno == 1 {
            counter = change_counter(page);
        }
        let hash = page_hash(page);
        if hash == zero {
            pages.push(None);
            return Ok(());
        }
        let (loc, _) = writer.add(FrameKind::Page, pgno as u64, page)?;
        checksum = checksum.wrapping_add(page_contribution(pgno, hash, zero));
        pages.push(Some(loc));
        Ok(())
    })
    .map_err(|e| source_error(path, e))?;
    let (node, depth) = pagemap::build(writer, &pages, DEFAULT_FANOUT_BITS)?;
    let ancestry = commit.ancestry(scion, Parents::None)?;
    let record = RootRecord {
        fanout_bits: DEFAULT_FANOUT_BITS,
        depth: if node.is_some() { depth } else { 0 },
        page_size: info.page_size,
        page_count: if node.is_some() { info.page_count } else { 0 },
        change_counter: counter,
        db_checksum: checksum,
        node,
        ancestry: Some(ancestry),
    };
    if node.is_none() && info.page_count > 0 {
        return Err(EngineError::NotSqlite {
            path: path.to_path_buf(),
            reason: "every page is zero".to_string(),
        });
    }
    commit.seal(record)
}

impl Engine {
    /// Create database `db` with a protected `main` branch at version 1: empty, or the
    /// committed state of the SQLite file `from` (which is only read, never modified,
    /// even while other connections write to it).
    pub fn create(&self, db: &DbName, from: Option<&Path>) -> EngineResult<CreateReport> {
        if !self.backend.list(&refs_prefix(db))?.is_empty() {
            return Err(EngineError::DatabaseExists { db: db.clone() });
        }
        let scratch = tempfile::tempdir().map_err(|e| EngineError::io(std::env::temp_dir(), e))?;
        let (source, read_only) = match from {
            Some(path) if sqlite_io::check_database_file(path)?.is_some() => {
                (path.to_path_buf(), true)
            }
            _ => {
                let p = scratch.path().join("empty.db");
                sqlite_io::create_empty(&p)?;
                (p, false)
            }
        };
        let imported = crate::retry::with_fresh_ids(|| import_file(self, &source, read_only))?;
        let now = self.store_time()?;
        let main = BranchRef::new(db.clone(), BranchName::main());
        let mut r = Ref {
            schema: REF_SCHEMA,
            root: imported.root,
            version: 1,
            page_size: imported.record.page_size,
            page_count: imported.record.page_count,
            fork_root: imported.root,
            fork_version: 1,
            init_root: imported.root,
            parent: None,
            protected: true,
            created_at: now,
            touched_at: now,
            epoch: 0,
            lease: None,
            ttl_secs: None,
            destroying_since: None,
            safety: None,
            meta: Default::default(),
            history: Vec::new(),
            history_before: None,
            checkouts: Vec::new(),
            nonce: Default::default(),
        };
        match self.publish_new_ref(&main, &imported, &mut r) {
            Ok(_) => {}
            Err(EngineError::BranchExists { .. }) => {
                return Err(EngineError::DatabaseExists { db: db.clone() })
            }
            Err(e) => return Err(e),
        }
        Ok(CreateReport {
            db: db.clone(),
            version: 1,
            page_size: r.page_size,
            page_count: r.page_count,
            store_objects: imported.stats.objects + 1,
            store_bytes: imported.stats.bytes,
        })
    }
}
