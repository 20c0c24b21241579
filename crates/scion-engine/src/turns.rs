//! Writing turns among this host's page writers (the VFS's write transactions on one
//! branch): a lock on a file beside where the branch's checkout would be, free again when
//! the turn is dropped or its process dies. Writers on other hosts meet at the head's
//! compare-and-swap; the turn only spares writers here a lost race.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use scion_store::range_lock::{lock_range, Locked, RangeLock, Wait};

use crate::error::{EngineError, EngineResult};
use crate::names::BranchRef;
use crate::sqlite_io::sidecar_path;
use crate::Engine;

/// The lock file of the checkout at `db`.
pub fn lock_file(db: &Path) -> PathBuf {
    sidecar_path(db, ".scion.lock")
}

/// Open (making it if missing) a checkout's lock file; `Ok(None)` where it cannot be made
/// (a read-only or missing directory).
pub fn open_lock_file(lock_path: &Path) -> EngineResult<Option<std::fs::File>> {
    match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(lock_path)
    {
        Ok(f) => Ok(Some(f)),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::PermissionDenied
                    | std::io::ErrorKind::ReadOnlyFilesystem
                    | std::io::ErrorKind::NotFound
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(EngineError::io(lock_path, e)),
    }
}

/// Byte of the checkout's lock file whose write lock is a branch's writing turn on this
/// host (the `flock` above guards the file; this range lock is independent of it).
const TURN_BYTE: u64 = 0;

/// A branch's writing turn among this host's page writers (VFS connections): held until
/// dropped, released by the kernel when its process dies.
#[derive(Debug)]
pub struct WriteTurn {
    _file: File,
}

/// What asking for a branch's writing turn found.
#[derive(Debug)]
#[non_exhaustive]
pub enum TurnAnswer {
    /// This caller writes next.
    Mine(WriteTurn),
    /// Another connection on this host holds the turn.
    Taken,
    /// No lock can be made here (a read-only directory): writers on this host meet only at
    /// the store's compare-and-swap.
    Unavailable,
}

/// Try to take the writing turn of the branch whose checkout is (or would be) `db`.
fn write_turn(db: &Path) -> EngineResult<TurnAnswer> {
    let lock_path = lock_file(db);
    if let Some(dir) = lock_path.parent() {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return match e.kind() {
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
                    Ok(TurnAnswer::Unavailable)
                }
                _ => Err(EngineError::io(dir, e)),
            };
        }
    }
    let Some(file) = open_lock_file(&lock_path)? else {
        return Ok(TurnAnswer::Unavailable);
    };
    match lock_range(&file, TURN_BYTE, 1, RangeLock::Exclusive, Wait::No) {
        Ok(Locked::Granted) => Ok(TurnAnswer::Mine(WriteTurn { _file: file })),
        Ok(Locked::Contended) => Ok(TurnAnswer::Taken),
        Err(e) => Err(EngineError::io(&lock_path, e)),
    }
}

impl Engine {
    /// Try to take `b`'s writing turn among this host's page writers.
    pub fn try_write_turn(&self, b: &BranchRef) -> EngineResult<TurnAnswer> {
        write_turn(&self.turn_lock_path(b))
    }
}
