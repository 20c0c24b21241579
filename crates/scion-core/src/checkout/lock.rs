//! Locks that keep scions out of each other's way on one checkout, and SQLite
//! connections out of a file while scion replaces it.
//!
//! - **Among scions**: a `flock` on the checkout's lock file (`<branch>.db.scion.lock`),
//!   shared while a file is compared with its record, exclusive while it is replaced or
//!   removed. SQLite never opens that file, so taking and dropping it never touches the
//!   POSIX locks this process's own SQLite connections hold on the database (closing any
//!   descriptor of a file drops them all).
//! - **Against SQLite**: while the file is replaced, a write lock on SQLite's shared byte
//!   range of the database. Every WAL-mode connection holds a read lock there for as long
//!   as it is open, so the lock is granted only when no connection has the file open, and
//!   while held no new connection can open it (SQLite gets `SQLITE_BUSY`). On Linux it is
//!   an open-file-description lock, which this process's own connections conflict with
//!   too.

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{CoreError, CoreResult};
use crate::turns::{lock_file, open_lock_file};
use scion_engine::sqlite_io::{SHARED_FIRST, SHARED_SIZE};
use scion_store::range_lock::{lock_range, Locked, RangeLock, Wait};

/// How long scion waits for another scion's replacement or inspection of one checkout.
const WAIT_FOR_SCION: Duration = Duration::from_secs(120);

/// A held lock; released when dropped (its descriptor closes).
#[derive(Debug)]
pub(crate) struct Held {
    _file: File,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Among {
    /// Comparing a file with its record: any number at once.
    Inspect,
    /// Replacing or removing the file: alone.
    Replace,
}

/// Take the scions' lock on the checkout at `db`, waiting for other scions. `Ok(None)`:
/// the lock file cannot be made (a read-only directory); the caller goes ahead unlocked,
/// as no other scion can replace anything there either.
pub(crate) fn among_scions(db: &Path, how: Among) -> CoreResult<Option<Held>> {
    let lock_path = lock_file(db);
    let Some(file) = open_lock_file(&lock_path)? else {
        return Ok(None);
    };
    let op = match how {
        Among::Inspect => libc::LOCK_SH,
        Among::Replace => libc::LOCK_EX,
    } | libc::LOCK_NB;
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        // SAFETY: flock on a descriptor open for the call.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(Some(Held { _file: file }));
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(CoreError::io(&lock_path, err));
        }
        if started.elapsed() >= WAIT_FOR_SCION {
            return Err(CoreError::CheckoutBusy {
                path: db.to_path_buf(),
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Keep SQLite connections out of the database at `path` until the returned lock drops.
/// `Ok(None)`: no file there. A file some connection has open is `CheckoutBusy`.
///
/// Opens (and later closes) a descriptor of the file: never call it on a file this
/// process has its own SQLite connection on.
pub(crate) fn against_sqlite(path: &Path) -> CoreResult<Option<Held>> {
    if scion_engine::live::is_live(path) {
        return Err(CoreError::CheckoutBusy {
            path: path.to_path_buf(),
        });
    }
    let read_only = match std::fs::metadata(path) {
        // Not a database SQLite could have open (a directory in its place, say).
        Ok(m) if !m.is_file() => return Ok(None),
        Ok(m) => m.permissions().readonly(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CoreError::io(path, e)),
    };
    // A file this process may not write (a read-only checkout, mode 0444) cannot carry a
    // write lock; a read lock still proves that no SQLite writer is committing to it,
    // which is all a read-only file needs.
    let opened = if read_only {
        File::open(path).map(|f| (f, RangeLock::Shared))
    } else {
        match OpenOptions::new().read(true).write(true).open(path) {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                File::open(path).map(|f| (f, RangeLock::Shared))
            }
            other => other.map(|f| (f, RangeLock::Exclusive)),
        }
    };
    let (file, kind) = match opened {
        Ok(x) => x,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CoreError::io(path, e)),
    };
    match lock_range(
        &file,
        SHARED_FIRST as u64,
        SHARED_SIZE as u64,
        kind,
        Wait::No,
    ) {
        Ok(Locked::Granted) => Ok(Some(Held { _file: file })),
        Ok(Locked::Contended) => Err(CoreError::CheckoutBusy {
            path: path.to_path_buf(),
        }),
        Err(e) => Err(CoreError::io(path, e)),
    }
}
