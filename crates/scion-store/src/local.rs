//! A store in a local directory.
//!
//! Create-only puts publish with `link(2)`, which never replaces an existing file.
//! Compare-and-swap holds an advisory `flock` on a per-key lock file while it compares the
//! current content's etag and renames the new content into place; the kernel drops the lock
//! when the process dies, so a `kill -9` can never wedge a key. Every write is
//! temp + fsync + link/rename + fsync of the directory, so a published object is durable.
//!
//! Deleting a key leaves nothing behind: its lock file is unlinked while the lock is held
//! (a locker checks after locking that its file is still the one at the path, and starts
//! over if not), and directories left empty are removed (a writer whose directory vanished
//! under it recreates it and tries again).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::backend::{content_etag, read_file_range};
use crate::changes::{ChangeBoard, Writing};
use crate::key::validate_prefix;
use crate::powerloss::{FsLog, FsOp};
use crate::{validate_key, Backend, ETag, ObjectMeta, PutMode, StoreError, StoreResult};

/// Where a local store writes objects before it publishes them (`{random}.tmp`); a crash
/// in between leaves the file, which `gc` sweeps.
pub const TMP_DIR: &str = ".scion-tmp";
const LOCK_DIR: &str = ".scion-locks";
/// The change board (see `changes.rs`): local to this host, never an object.
const CHANGES_FILE: &str = ".scion-changes";
/// Attempts at a step whose directory or lock file a concurrent delete may remove under it.
const VANISHED_RETRIES: usize = 64;

fn vanished(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

#[derive(Debug, Clone)]
pub struct LocalBackend {
    root: PathBuf,
    /// Open segment files: segments never change once written, so ranged reads (every page
    /// a VFS connection misses) reuse a descriptor instead of opening the file each time.
    segments: std::sync::Arc<std::sync::Mutex<OpenSegments>>,
    /// Writes of refs and checkpoints announced to this host's readers (`change_stamp`).
    board: Option<std::sync::Arc<ChangeBoard>>,
    /// Where the operations that decide durability are recorded, for the power-loss model.
    fs_log: Option<FsLog>,
}

type OpenSegments = std::collections::HashMap<String, std::sync::Arc<File>>;

/// Open segment files kept at most; past it the cache starts over.
const OPEN_SEGMENTS: usize = 256;

impl LocalBackend {
    /// Open (and create if needed) a store directory.
    pub fn open(root: impl Into<PathBuf>) -> StoreResult<Self> {
        let root = root.into();
        // A directory that cannot be made is said to be so, by its path: never "object not
        // found" (a store that lacks data).
        for dir in [root.join(TMP_DIR), root.join(LOCK_DIR)] {
            fs::create_dir_all(&dir).map_err(|source| StoreError::Io {
                key: dir.display().to_string(),
                source,
            })?;
        }
        let board = ChangeBoard::open(&root.join(CHANGES_FILE)).map(Into::into);
        Ok(Self {
            root,
            segments: Default::default(),
            board,
            fs_log: None,
        })
    }

    /// Record every operation that decides what a power loss keeps into `log`
    /// ([`crate::powerloss`]).
    pub fn with_fs_log(mut self, log: FsLog) -> Self {
        self.fs_log = Some(log);
        self
    }

    fn record(&self, op: impl FnOnce(&dyn Fn(&Path) -> String) -> FsOp) {
        if let Some(log) = &self.fs_log {
            let rel = |p: &Path| {
                p.strip_prefix(&self.root)
                    .unwrap_or(p)
                    .to_string_lossy()
                    .into_owned()
            };
            log.push(op(&rel));
        }
    }

    /// Create `dir` and its parents, each level's entry made durable in its parent (an
    /// object renamed into a directory whose own entry a power loss drops is lost with it).
    /// False (try again) when a concurrent delete removed a directory half way.
    fn make_dirs(&self, dir: &Path) -> io::Result<bool> {
        let mut missing = Vec::new();
        let mut level = dir;
        while !level.is_dir() {
            missing.push(level);
            match level.parent() {
                Some(p) => level = p,
                None => break,
            }
        }
        for level in missing.into_iter().rev() {
            match fs::create_dir(level) {
                Ok(()) => self.record(|rel| FsOp::Mkdir(rel(level))),
                // Made by another writer meanwhile: its entry is synced all the same, since
                // that writer may not have got so far yet.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) if vanished(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
            self.sync_parent(level)?;
        }
        Ok(true)
    }

    /// Make a directory entry durable. A directory already removed again (its object deleted
    /// by someone else since) has nothing left to make durable.
    fn sync_parent(&self, path: &Path) -> io::Result<()> {
        let parent = path.parent().unwrap_or(Path::new("."));
        match File::open(parent) {
            Ok(d) => {
                d.sync_all()?;
                self.record(|rel| FsOp::FsyncDir(rel(parent)));
                Ok(())
            }
            Err(e) if vanished(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn remove_recorded(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)?;
        self.record(|rel| FsOp::Unlink(rel(path)));
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Announce a write of `key` on the change board until the guard drops (segments are
    /// written once and never announced).
    fn announce(&self, key: &str) -> Option<Writing<'_>> {
        match &self.board {
            Some(b) if !key.starts_with("segments/") => Some(b.writing(key)),
            _ => None,
        }
    }

    /// Announce a write of `key` on the change board that this process never ends: a
    /// writer stopped between its two announcements, for tests that then kill it.
    #[cfg(feature = "conformance")]
    #[doc(hidden)]
    pub fn announce_without_end(&self, key: &str) {
        std::mem::forget(self.announce(key));
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    /// The kept descriptor of a segment, opened (and kept) on first use.
    fn segment_file(&self, key: &str) -> StoreResult<std::sync::Arc<File>> {
        let cached = self
            .segments
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned();
        if let Some(f) = cached {
            return Ok(f);
        }
        let f =
            std::sync::Arc::new(File::open(self.path(key)).map_err(|e| StoreError::io(key, e))?);
        let mut open = self.segments.lock().unwrap_or_else(|p| p.into_inner());
        if open.len() >= OPEN_SEGMENTS {
            open.clear();
        }
        open.insert(key.to_string(), f.clone());
        Ok(f)
    }

    /// A ranged read of a segment through a kept descriptor, into `out`. A file deleted
    /// (or replaced) since it was opened reads as gone, as a fresh open would.
    fn segment_range(&self, key: &str, range: Range<u64>, out: &mut Vec<u8>) -> StoreResult<()> {
        use std::os::unix::fs::FileExt;
        let file = self.segment_file(key)?;
        let meta = file.metadata().map_err(|e| StoreError::io(key, e))?;
        if meta.nlink() == 0 {
            self.forget_segment(key);
            let mut f = File::open(self.path(key)).map_err(|e| StoreError::io(key, e))?;
            *out = read_file_range(&mut f, key, range)?;
            return Ok(());
        }
        crate::backend::check_range(key, &range, meta.len())?;
        // Resizing a kept buffer zeroes only what it grows by: the read overwrites it all.
        out.resize((range.end - range.start) as usize, 0);
        file.read_exact_at(out, range.start)
            .map_err(|e| StoreError::io(key, e))
    }

    fn forget_segment(&self, key: &str) {
        self.segments
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    fn lock_path(&self, key: &str) -> PathBuf {
        self.root.join(LOCK_DIR).join(key)
    }

    /// Hold the advisory lock for `key` until the returned file is dropped.
    fn lock(&self, key: &str) -> StoreResult<File> {
        let path = self.lock_path(key);
        for _ in 0..VANISHED_RETRIES {
            let parent = path.parent().expect("lock paths have a parent");
            if !self.make_dirs(parent).map_err(|e| StoreError::io(key, e))? {
                continue;
            }
            let file = match OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
            {
                Ok(f) => f,
                Err(e) if vanished(&e) => continue,
                Err(e) => return Err(StoreError::io(key, e)),
            };
            file.lock().map_err(|e| StoreError::io(key, e))?;
            // A delete unlinks the lock file while holding it: a lock on a file no longer
            // at the path guards nothing.
            let held = file.metadata().map_err(|e| StoreError::io(key, e))?.ino();
            match fs::metadata(&path) {
                Ok(m) if m.ino() == held => return Ok(file),
                Ok(_) => continue,
                Err(e) if vanished(&e) => continue,
                Err(e) => return Err(StoreError::io(key, e)),
            }
        }
        Err(StoreError::io(
            key,
            io::Error::other("its lock file kept being removed"),
        ))
    }

    /// After `key`'s object is gone: unlink its lock file (the lock is still held) and
    /// remove the directories this left empty.
    fn forget(&self, key: &str, guard: File) {
        let _ = fs::remove_file(self.lock_path(key));
        drop(guard);
        self.remove_empty_dirs(&self.root.join(LOCK_DIR), key);
        self.remove_empty_dirs(&self.root, key);
    }

    /// Remove the directories of `key` under `base`, deepest first, while they are empty.
    fn remove_empty_dirs(&self, base: &Path, key: &str) {
        let mut dir = base.join(key);
        while dir.pop() && dir != base {
            if fs::remove_dir(&dir).is_err() {
                break;
            }
            self.record(|rel| FsOp::Rmdir(rel(&dir)));
        }
    }

    /// Write `data` to a fresh temp file and fsync it.
    fn write_temp(&self, key: &str, data: &[u8]) -> StoreResult<PathBuf> {
        let tmp = self
            .root
            .join(TMP_DIR)
            .join(format!("{}.tmp", random_hex()));
        let result = (|| {
            let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(data)?;
            self.record(|rel| FsOp::WriteFile(rel(&tmp), data.to_vec()));
            f.sync_all()?;
            self.record(|rel| FsOp::FsyncFile(rel(&tmp)));
            Ok(())
        })();
        if let Err(e) = result {
            let _ = self.remove_recorded(&tmp);
            return Err(StoreError::io(key, e));
        }
        Ok(tmp)
    }

    fn read_current(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        match fs::read(self.path(key)) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::io(key, e)),
        }
    }

    /// Move the temp file `tmp` to `key`'s path with `place` (rename or link), recreating
    /// the directory if a concurrent delete removed it.
    fn place(
        &self,
        key: &str,
        tmp: &Path,
        place: fn(&Path, &Path) -> io::Result<()>,
    ) -> io::Result<PathBuf> {
        for _ in 0..VANISHED_RETRIES {
            let path = self.path(key);
            if !self.make_dirs(path.parent().expect("validated keys have a parent"))? {
                continue;
            }
            match place(tmp, &path) {
                Ok(()) => return Ok(path),
                Err(e) if vanished(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other(
            "its directory kept being removed by concurrent deletes",
        ))
    }

    fn publish_replace(&self, key: &str, data: &[u8]) -> StoreResult<ETag> {
        let tmp = self.write_temp(key, data)?;
        let path = match self.place(key, &tmp, |a, b| fs::rename(a, b)) {
            Ok(p) => p,
            Err(e) => {
                let _ = self.remove_recorded(&tmp);
                return Err(StoreError::io(key, e));
            }
        };
        self.record(|rel| FsOp::Rename(rel(&tmp), rel(&path)));
        self.sync_parent(&path)
            .map_err(|e| StoreError::io(key, e))?;
        Ok(content_etag(data))
    }

    fn publish_create(&self, key: &str, data: &[u8]) -> StoreResult<ETag> {
        let tmp = self.write_temp(key, data)?;
        let linked = self.place(key, &tmp, |a, b| fs::hard_link(a, b));
        if let Ok(path) = &linked {
            self.record(|rel| FsOp::Link(rel(&tmp), rel(path)));
        }
        let _ = self.remove_recorded(&tmp);
        let path = match linked {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(StoreError::AlreadyExists {
                    key: key.to_string(),
                })
            }
            Err(e) => return Err(StoreError::io(key, e)),
        };
        self.sync_parent(&path)
            .map_err(|e| StoreError::io(key, e))?;
        Ok(content_etag(data))
    }
}

fn random_hex() -> String {
    let mut b = [0u8; 12];
    getrandom::fill(&mut b).expect("the OS random source is available");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn meta_of(key: &str, path: &Path, etag: ETag) -> StoreResult<ObjectMeta> {
    let md = fs::metadata(path).map_err(|e| StoreError::io(key, e))?;
    Ok(ObjectMeta {
        key: key.to_string(),
        size: md.len(),
        etag,
        last_modified: md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
    })
}

impl Backend for LocalBackend {
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)> {
        validate_key(key)?;
        let data = fs::read(self.path(key)).map_err(|e| StoreError::io(key, e))?;
        let etag = content_etag(&data);
        Ok((data, etag))
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> StoreResult<Vec<u8>> {
        validate_key(key)?;
        if key.starts_with("segments/") {
            let mut out = Vec::new();
            self.segment_range(key, range, &mut out)?;
            return Ok(out);
        }
        let mut f = File::open(self.path(key)).map_err(|e| StoreError::io(key, e))?;
        read_file_range(&mut f, key, range)
    }

    fn get_range_into(&self, key: &str, range: Range<u64>, out: &mut Vec<u8>) -> StoreResult<()> {
        validate_key(key)?;
        if key.starts_with("segments/") {
            return self.segment_range(key, range, out);
        }
        *out = self.get_range(key, range)?;
        Ok(())
    }

    fn head(&self, key: &str) -> StoreResult<ObjectMeta> {
        validate_key(key)?;
        let (data, etag) = self.get(key)?;
        drop(data);
        meta_of(key, &self.path(key), etag)
    }

    fn exists(&self, key: &str) -> StoreResult<bool> {
        validate_key(key)?;
        match fs::metadata(self.path(key)) {
            Ok(m) => Ok(m.is_file()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StoreError::io(key, e)),
        }
    }

    fn put(&self, key: &str, data: &[u8], mode: PutMode) -> StoreResult<ETag> {
        validate_key(key)?;
        let _announced = self.announce(key);
        match mode {
            PutMode::Create => self.publish_create(key, data),
            PutMode::Overwrite => {
                let _guard = self.lock(key)?;
                self.publish_replace(key, data)
            }
            PutMode::Update(want) => {
                let _guard = self.lock(key)?;
                match self.read_current(key)? {
                    Some(cur) if content_etag(&cur) == want => self.publish_replace(key, data),
                    _ => Err(StoreError::Conflict {
                        key: key.to_string(),
                    }),
                }
            }
        }
    }

    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        validate_prefix(prefix)?;
        // Walk only the deepest directory the prefix names completely.
        let dir_part = match prefix.rfind('/') {
            Some(i) => &prefix[..i],
            None => "",
        };
        let mut out = Vec::new();
        walk(&self.root, dir_part, prefix, &mut out)?;
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &str) -> StoreResult<()> {
        validate_key(key)?;
        let _announced = self.announce(key);
        self.forget_segment(key);
        let guard = self.lock(key)?;
        let path = self.path(key);
        match self.remove_recorded(&path) {
            Ok(()) => self
                .sync_parent(&path)
                .map_err(|e| StoreError::io(key, e))?,
            Err(e) if vanished(&e) => {}
            Err(e) => return Err(StoreError::io(key, e)),
        }
        self.forget(key, guard);
        Ok(())
    }

    fn delete_if(&self, key: &str, etag: &ETag) -> StoreResult<()> {
        validate_key(key)?;
        let _announced = self.announce(key);
        self.forget_segment(key);
        let guard = self.lock(key)?;
        match self.read_current(key)? {
            Some(cur) if &content_etag(&cur) == etag => {
                let path = self.path(key);
                self.remove_recorded(&path)
                    .map_err(|e| StoreError::io(key, e))?;
                self.sync_parent(&path)
                    .map_err(|e| StoreError::io(key, e))?;
                self.forget(key, guard);
                Ok(())
            }
            _ => Err(StoreError::Conflict {
                key: key.to_string(),
            }),
        }
    }

    fn delete_many(&self, keys: &[String]) -> StoreResult<()> {
        crate::backend::delete_each(self, keys)
    }

    fn evict(&self, _key: &str) -> StoreResult<()> {
        // Every read goes to the store itself: there is no local copy to drop.
        Ok(())
    }

    fn prefetch(&self, ranges: &[(String, Range<u64>)]) {
        use std::os::fd::AsRawFd;
        for (key, range) in ranges {
            if !key.starts_with("segments/") || validate_key(key).is_err() {
                continue;
            }
            // A hint only: a segment that cannot be opened fails its read, not this.
            let Ok(file) = self.segment_file(key) else {
                continue;
            };
            let len = range.end.saturating_sub(range.start);
            // SAFETY: the descriptor is open for as long as `file` lives; WILLNEED only
            // starts reads into the kernel's page cache and touches no memory of ours.
            unsafe {
                libc::posix_fadvise(
                    file.as_raw_fd(),
                    range.start as libc::off_t,
                    len as libc::off_t,
                    libc::POSIX_FADV_WILLNEED,
                );
            }
        }
    }
    fn change_stamp(&self, key: &str) -> Option<u64> {
        self.board.as_ref()?.stamp(key)
    }

    fn describe(&self) -> String {
        format!("local directory {}", self.root.display())
    }

    /// The local clock: file mtimes, which GC ages are measured by, come from it too.
    fn now(&self) -> StoreResult<SystemTime> {
        Ok(SystemTime::now())
    }
}

/// Collect objects under `root/dir` whose keys start with `prefix`. Entries whose name
/// starts with '.' are the backend's own (temp files, locks) and never objects.
fn walk(root: &Path, dir: &str, prefix: &str, out: &mut Vec<ObjectMeta>) -> StoreResult<()> {
    let full = if dir.is_empty() {
        root.to_path_buf()
    } else {
        root.join(dir)
    };
    let entries = match fs::read_dir(&full) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotADirectory => return Ok(()),
        Err(e) => return Err(StoreError::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') {
            continue;
        }
        let key = if dir.is_empty() {
            name.to_string()
        } else {
            format!("{dir}/{name}")
        };
        // An entry deleted between read_dir and here is simply not listed.
        let ft = match entry.file_type() {
            Ok(ft) => ft,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(StoreError::io(&key, e)),
        };
        if ft.is_dir() {
            let child_prefix = format!("{key}/");
            if child_prefix.starts_with(prefix) || prefix.starts_with(&child_prefix) {
                walk(root, &key, prefix, out)?;
            }
        } else if ft.is_file() && key.starts_with(prefix) {
            // Etag is a content hash; listing does not read content, so it reports the
            // file identity instead. Callers that need a CAS etag use `get` or `head`.
            let md = match entry.metadata() {
                Ok(md) => md,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io(&key, e)),
            };
            out.push(ObjectMeta {
                size: md.len(),
                etag: ETag(String::new()),
                last_modified: md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                key,
            });
        }
    }
    Ok(())
}
