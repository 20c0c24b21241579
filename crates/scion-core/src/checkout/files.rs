//! The file set of one database scion writes (a checkout, a read-only checkout or an
//! export target): the database, SQLite's `-wal`, `-journal` and `-shm`, scion's sidecar
//! and its pending record. Every replacement and every removal of the set goes through
//! here, so none of them can leave a journal that SQLite would replay onto a new file.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tempfile::NamedTempFile;

use super::lock::{self, Among, Held};
use super::sidecar::{Fingerprint, Sidecar};
use crate::error::{CoreError, CoreResult};
use scion_engine::sqlite_io::{self, sidecar_path};

/// SQLite's files beside a database, in the order they are removed: the journals that
/// could be replayed first, the WAL index last.
const JOURNAL_SUFFIXES: [&str; 3] = ["-wal", "-journal", "-shm"];

/// What the file at the path must still be for a replacement to go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Nothing there (a new checkout or export).
    Absent,
    /// The file as it was fingerprinted when it was judged safe to replace.
    Unchanged(Fingerprint),
    /// Whatever is there (read-only checkouts, forced exports).
    Anything,
}

impl Expect {
    /// What a judgement based on `fingerprint` (None: no file) expects.
    pub(crate) fn from_seen(fingerprint: Option<Fingerprint>) -> Expect {
        match fingerprint {
            None => Expect::Absent,
            Some(f) => Expect::Unchanged(f),
        }
    }

    /// Whether the file at `db` is still what this expects (read under the caller's
    /// replace lock).
    fn holds_for(self, db: &Path) -> CoreResult<bool> {
        Ok(match (self, Fingerprint::of(db)?) {
            (Expect::Anything, _) | (Expect::Absent, None) => true,
            (Expect::Unchanged(seen), Some(now)) => seen.same_writes(&now),
            _ => false,
        })
    }
}

/// The result of a replacement.
#[derive(Debug)]
pub(crate) enum Install {
    Done,
    /// The file changed since it was judged: judge it again. The new file is handed back.
    Changed(NamedTempFile),
}

#[derive(Debug, Clone)]
pub(crate) struct DbFiles {
    db: PathBuf,
    /// A checkout: it has a sidecar and a lock file. An export target has neither.
    checkout: bool,
}

impl DbFiles {
    /// The files of a checkout (writable or read-only).
    pub(crate) fn checkout(db: PathBuf) -> Self {
        DbFiles { db, checkout: true }
    }

    /// The files of an export target: a plain SQLite file scion leaves no record beside.
    pub(crate) fn export(db: PathBuf) -> Self {
        DbFiles {
            db,
            checkout: false,
        }
    }

    pub(crate) fn db(&self) -> &Path {
        &self.db
    }

    fn dir(&self) -> CoreResult<PathBuf> {
        match self.db.parent() {
            Some(p) if !p.as_os_str().is_empty() => Ok(p.to_path_buf()),
            _ => std::env::current_dir().map_err(|e| CoreError::io(".", e)),
        }
    }

    fn journals(&self) -> impl Iterator<Item = PathBuf> + '_ {
        JOURNAL_SUFFIXES
            .iter()
            .map(|suffix| sidecar_path(&self.db, suffix))
    }

    /// SQLite journal files present beside the database.
    pub(crate) fn leftover_journals(&self) -> Vec<PathBuf> {
        self.journals()
            .filter(|p| p.symlink_metadata().is_ok())
            .collect()
    }

    /// Hold off scion's replacements while the file is compared with its record.
    pub(crate) fn inspect_lock(&self) -> CoreResult<Option<Held>> {
        lock::among_scions(&self.db, Among::Inspect)
    }

    /// Keep other scions out while the set is replaced or removed.
    fn replace_lock(&self) -> CoreResult<Option<Held>> {
        if !self.checkout {
            return Ok(None);
        }
        let dir = self.dir()?;
        fs::create_dir_all(&dir).map_err(|e| CoreError::io(&dir, e))?;
        lock::among_scions(&self.db, Among::Replace)
    }

    /// A new, empty temp file beside the database (`.<name>.<random>.tmp`), removed if
    /// dropped before it is installed; `gc` sweeps one a crash left behind.
    /// Its mode is what a new file gets under the process's umask (as `cp` and `sqlite3`
    /// make them), not the temp file's private 0600.
    pub(crate) fn temp(&self) -> CoreResult<NamedTempFile> {
        let dir = self.dir()?;
        if self.checkout {
            fs::create_dir_all(&dir).map_err(|e| CoreError::io(&dir, e))?;
        } else if !dir.is_dir() {
            return Err(CoreError::NoSuchDirectory { path: dir });
        }
        let name = self
            .db
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(&dir)
            .map_err(|e| CoreError::io(&dir, e))?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o666 & !umask()))
            .map_err(|e| CoreError::io(tmp.path(), e))?;
        Ok(tmp)
    }

    /// Put `tmp` in place of the database, with `record` (its fingerprint filled in) as
    /// its sidecar. Alone among scions, and under a lock no SQLite connection holds and
    /// none can take meanwhile, the file is checked against `expect`; stale journals and
    /// the old record are removed, an export's data synced, the new file renamed into
    /// place and its record written before any other scion looks at it.
    pub(crate) fn install(
        &self,
        tmp: NamedTempFile,
        expect: Expect,
        record: Option<Sidecar>,
    ) -> CoreResult<Install> {
        let _scions = self.replace_lock()?;
        let old = lock::against_sqlite(&self.db)?;
        if !expect.holds_for(&self.db)? {
            return Ok(Install::Changed(tmp));
        }
        // A connection still attached to a WAL here (its database deleted under it) would
        // keep writing into files about to be removed.
        if sqlite_io::wal_index_in_use(&self.db)? {
            return Err(CoreError::CheckoutBusy {
                path: self.db.clone(),
            });
        }
        for p in self.journals() {
            remove_if_present(&p)?;
        }
        if self.checkout {
            // From here until the new record is written the file has no record: the marker
            // tells the next inspection that whatever is there is scion's, to be replaced.
            let marker = refreshing_marker(&self.db);
            fs::write(&marker, b"").map_err(|e| CoreError::io(&marker, e))?;
            Sidecar::remove(&self.db)?;
            // Something that is not a file where the checkout belongs (judged unreadable,
            // and replaced only with force) goes whole.
            if self.db.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                fs::remove_dir_all(&self.db).map_err(|e| CoreError::io(&self.db, e))?;
            }
        }
        // An export is the user's file: durable before it appears. A checkout is a cache
        // whose record names the boot it was made in, so a machine crash that loses its
        // unsynced pages makes the next look hash it again instead of trusting it.
        if !self.checkout {
            tmp.as_file()
                .sync_all()
                .map_err(|e| CoreError::io(tmp.path(), e))?;
        }
        let fingerprint = Fingerprint::of(tmp.path())?.unwrap_or_default();
        if old.is_none() && expect == Expect::Absent {
            if let Err(e) = tmp.persist_noclobber(&self.db) {
                if e.error.kind() == std::io::ErrorKind::AlreadyExists {
                    return Ok(Install::Changed(e.file));
                }
                return Err(CoreError::io(&self.db, e.error));
            }
        } else if old.is_some() && exchange(tmp.path(), &self.db) {
            // The temp name now holds the old file: dropping the guard unlinks it.
            drop(tmp);
        } else {
            tmp.persist(&self.db)
                .map_err(|e| CoreError::io(&self.db, e.error))?;
        }
        if let Some(mut record) = record {
            record.fingerprint = Fingerprint::placed(fingerprint, Fingerprint::of(&self.db)?);
            record.stamp_ns = super::sidecar::now_ns();
            record.store(&self.db)?;
        }
        if self.checkout {
            remove_if_present(&refreshing_marker(&self.db))?;
        }
        if !self.checkout {
            // The rename itself is durable too before an export is reported done.
            let dir = self.dir()?;
            fs::File::open(&dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| CoreError::io(&dir, e))?;
        }
        Ok(Install::Done)
    }

    /// Rewrite some pages of the clean checkout in place and give it `record`: the other
    /// way to refresh a checkout, for a file whose record proves it holds a version close
    /// to the new one. Under the same locks as [`DbFiles::install`] (alone among scions, no
    /// SQLite connection open or opening), the file must still be as `seen` and have no
    /// journal with content (a WAL with frames is part of the version the file holds).
    /// The refreshing marker goes down before the old record is removed and the first page
    /// is written and comes off after the new record is written, so a crash in between
    /// leaves a file the next inspection knows to be scion's, to be replaced whole.
    /// `false`: the file changed or has a journal; nothing was written.
    pub(crate) fn patch(
        &self,
        seen: Fingerprint,
        write: impl FnOnce(&fs::File) -> CoreResult<()>,
        mut record: Sidecar,
    ) -> CoreResult<bool> {
        let _scions = self.replace_lock()?;
        let _sqlite = lock::against_sqlite(&self.db)?;
        let journal_with_content = ["-wal", "-journal"].iter().any(|suffix| {
            sidecar_path(&self.db, suffix)
                .symlink_metadata()
                .is_ok_and(|m| !m.is_file() || m.len() > 0)
        });
        if !seen.still_at(&self.db)? || journal_with_content {
            return Ok(false);
        }
        if sqlite_io::wal_index_in_use(&self.db)? {
            return Err(CoreError::CheckoutBusy {
                path: self.db.clone(),
            });
        }
        let marker = refreshing_marker(&self.db);
        fs::write(&marker, b"").map_err(|e| CoreError::io(&marker, e))?;
        Sidecar::remove(&self.db)?;
        for p in self.journals() {
            remove_if_present(&p)?;
        }
        let file = fs::OpenOptions::new()
            .write(true)
            .open(&self.db)
            .map_err(|e| CoreError::io(&self.db, e))?;
        write(&file)?;
        // Back-dated as a fresh checkout is, so any later write moves the mtime.
        file.set_modified(SystemTime::now() - Duration::from_secs(2))
            .map_err(|e| CoreError::io(&self.db, e))?;
        drop(file);
        record.fingerprint = Fingerprint::of(&self.db)?.unwrap_or_default();
        record.stamp_ns = super::sidecar::now_ns();
        record.store(&self.db)?;
        remove_if_present(&marker)?;
        Ok(true)
    }

    /// Remove the whole set: journals before the database (a journal left without its
    /// database would be replayed onto the next file there), the records last. Other
    /// scions' replacements and inspections are waited for; a SQLite connection that still
    /// has the file open does not stop the removal (callers refuse busy files before they
    /// commit to removing them). Returns how many files were removed.
    pub(crate) fn remove_all(&self) -> CoreResult<usize> {
        if self.db.parent().is_some_and(|d| !d.exists()) {
            return Ok(0);
        }
        let _scions = self.replace_lock()?;
        let _sqlite = match lock::against_sqlite(&self.db) {
            Err(CoreError::CheckoutBusy { .. }) => None,
            other => other?,
        };
        self.remove_locked()
    }

    /// Remove the whole set as [`Self::remove_all`] does, but only if no SQLite connection
    /// has the file open (else [`CoreError::CheckoutBusy`]) and it is still as `expect`
    /// says (else `Ok(None)`: written to since it was judged).
    pub(crate) fn remove_if_unused(&self, expect: Expect) -> CoreResult<Option<usize>> {
        if self.db.parent().is_some_and(|d| !d.exists()) {
            return Ok(Some(0));
        }
        let _scions = self.replace_lock()?;
        let _sqlite = lock::against_sqlite(&self.db)?;
        if !expect.holds_for(&self.db)? {
            return Ok(None);
        }
        if sqlite_io::wal_index_in_use(&self.db)? {
            return Err(CoreError::CheckoutBusy {
                path: self.db.clone(),
            });
        }
        self.remove_locked().map(Some)
    }

    /// The removal itself, under the caller's locks.
    fn remove_locked(&self) -> CoreResult<usize> {
        let mut removed = 0;
        // The journals that could be replayed go before the database; the WAL index after
        // it, then the records.
        let paths = [
            sidecar_path(&self.db, "-wal"),
            sidecar_path(&self.db, "-journal"),
            self.db.clone(),
            sidecar_path(&self.db, "-shm"),
            Sidecar::path_for(&self.db),
            Sidecar::pending_path_for(&self.db),
            refreshing_marker(&self.db),
        ];
        for p in paths {
            if remove_if_present(&p)? {
                removed += 1;
            }
        }
        // scion's own bookkeeping, not counted as a checkout file.
        if self.checkout {
            remove_if_present(&crate::turns::lock_file(&self.db))?;
        }
        Ok(removed)
    }
}

/// Swap `new` and `target` atomically (`renameat2(RENAME_EXCHANGE)`). A plain rename over
/// an existing file makes ext4 write the new file's data out at once (its
/// replace-via-rename heuristic, `auto_da_alloc`): seconds for a 1 GiB checkout that is
/// only a cache. Swapping replaces the file just as atomically without that. `false`: not
/// supported here, or the target is gone; the caller renames instead.
fn exchange(new: &Path, target: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let (Ok(a), Ok(b)) = (
            CString::new(new.as_os_str().as_bytes()),
            CString::new(target.as_os_str().as_bytes()),
        ) else {
            return false;
        };
        // SAFETY: both are valid NUL-terminated paths for the duration of the call.
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                a.as_ptr(),
                libc::AT_FDCWD,
                b.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        rc == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (new, target);
        false
    }
}

/// The process's file mode creation mask, read without changing it (`umask(2)` can only
/// be read by setting it, which would race with other threads creating files).
fn umask() -> u32 {
    static MASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *MASK.get_or_init(|| {
        fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("Umask:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            })
            .unwrap_or(0o022)
    })
}

/// Present while scion replaces a checkout or rewrites its pages in place, from before its
/// old record is removed until its new one is written.
pub(crate) fn refreshing_marker(db: &Path) -> PathBuf {
    sidecar_path(db, ".scion.refreshing")
}

/// Drop a marker found beside a record. Inspections run only while no replacement does,
/// and a replacement writes the new record before it removes the marker, so such a marker
/// was left by a crash between the two: the record describes the file. Left in place, it
/// would make the file look like scion's own half-written pages (replaced without
/// `--force`) if the record were lost later.
pub(crate) fn drop_marker_beside_record(db: &Path) -> CoreResult<()> {
    // Looked at first: the usual answer is "none", and asking a read-only filesystem to
    // unlink even a missing file is an error.
    let marker = refreshing_marker(db);
    if marker.symlink_metadata().is_err() {
        return Ok(());
    }
    remove_if_present(&marker).map(drop)
}

fn remove_if_present(p: &Path) -> CoreResult<bool> {
    match fs::remove_file(p) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(CoreError::io(p, e)),
    }
}
