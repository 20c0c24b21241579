//! The sidecar beside each checkout (`<branch>.db.scion`): which version the file was
//! materialized from, a fingerprint of the file, and the hash of every page.
//!
//! ```text
//! "SCIONSCR" | version u16 | reserved u16 | page_size u32 | page_count u32
//! root: segment u64 | offset u64 | len u32 | branch version u64
//! fingerprint: size u64 | mtime_ns i64 | inode u64 | boot u32
//!              | wal size u64 | wal mtime_ns i64 | ctime_ns i64 (version 3)
//! stamp_ns i64 | xxh3 of the header so far u64 (versions 2 and 3)
//! page hashes (page_count x u64) | xxh3 of all bytes before u64
//! ```
//!
//! Version 2's header checksum lets an inspection trust the header (and answer "clean" in
//! O(1)) without reading the page hashes, 2 MiB of them at 1 GiB. Version 3 adds the file's
//! ctime: an mtime can be set back (`touch -d`, `os.utime`) after an edit, a ctime cannot,
//! so a file edited and put back is never taken for the version it was made from. Versions
//! 1 and 2 are still read; their files prove nothing until hashed once again.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{CoreError, CoreResult};
use crate::format::{Cursor, DecodeError, Locator, SegmentId};
use scion_engine::sqlite_io::sidecar_path;

const MAGIC: &[u8; 8] = b"SCIONSCR";
pub(crate) const SIDECAR_FORMAT_VERSION: u16 = 3;
/// Bytes before the header checksum (version 3; version 2's are 100).
const HEADER_LEN: usize = 108;
/// The ctime a record older than version 3 stands for: matches no file's.
const CTIME_UNKNOWN: i64 = i64::MIN;
/// Filesystem timestamps are trusted only for changes older than this (git's
/// racily-clean rule).
const RACY_WINDOW_NS: i64 = 1_000_000_000;

/// What `stat` (and the header's change counter) says about a checkout file and its WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fingerprint {
    /// The file's size in bytes.
    pub size: u64,
    /// Its modification time, in nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Its inode number.
    pub inode: u64,
    /// The boot the fingerprint was taken in (32 bits of a hash of the kernel's boot id). A
    /// record from an earlier boot proves nothing: a crash of the machine may have lost
    /// writes the file's metadata still claims, so the file is hashed again once.
    pub boot: u32,
    /// The size of its `-wal` file (0 when there is none).
    pub wal_size: u64,
    /// The `-wal` file's modification time.
    pub wal_mtime_ns: i64,
    /// The file's status-change time, in nanoseconds since the Unix epoch: every write,
    /// rename, chmod or `utime` sets it to now, and nothing sets it back.
    pub ctime_ns: i64,
}

fn mtime_ns(md: &fs::Metadata) -> i64 {
    md.mtime() * 1_000_000_000 + md.mtime_nsec()
}

fn ctime_ns(md: &fs::Metadata) -> i64 {
    md.ctime() * 1_000_000_000 + md.ctime_nsec()
}

impl Fingerprint {
    /// Fingerprint `path`, or `None` if it does not exist. Only `stat`s: opening and
    /// closing the file would drop the POSIX locks of any SQLite connection this process
    /// holds on it.
    pub fn of(path: &Path) -> CoreResult<Option<Fingerprint>> {
        let md = match fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(CoreError::io(path, e)),
        };
        let wal = sidecar_path(path, "-wal");
        let (wal_size, wal_mtime_ns) = match fs::metadata(&wal) {
            Ok(m) => (m.len(), mtime_ns(&m)),
            Err(_) => (0, 0),
        };
        Ok(Some(Fingerprint {
            size: md.len(),
            mtime_ns: mtime_ns(&md),
            inode: md.ino(),
            boot: boot_tag(),
            wal_size,
            wal_mtime_ns,
            ctime_ns: ctime_ns(&md),
        }))
    }
}

impl Fingerprint {
    /// Whether no write can have reached the file (or its WAL) between the two looks. An
    /// empty WAL that appeared or vanished (a connection opening or closing) is no write.
    pub(crate) fn same_writes(&self, now: &Fingerprint) -> bool {
        let wal_same = (self.wal_size == 0 && now.wal_size == 0)
            || (self.wal_size == now.wal_size && self.wal_mtime_ns == now.wal_mtime_ns);
        self.size == now.size
            && self.mtime_ns == now.mtime_ns
            && self.ctime_ns == now.ctime_ns
            && self.inode == now.inode
            && wal_same
    }

    /// The fingerprint of a file just put in place (a rename or a link, which move its
    /// ctime), from `before` (taken before) and `after` (taken after): `after` when the
    /// file is otherwise as `before` saw it, else `before`, which then proves nothing and
    /// the file is hashed at its next look. A write in between moved the mtime (a fresh
    /// file's is set into the past), so it is never taken into the record.
    pub(crate) fn placed(before: Fingerprint, after: Option<Fingerprint>) -> Fingerprint {
        match after {
            Some(a)
                if Fingerprint {
                    ctime_ns: before.ctime_ns,
                    ..a
                } == before =>
            {
                a
            }
            _ => before,
        }
    }

    /// Whether the file at `path` is still as this fingerprint saw it: present, and no
    /// write since.
    pub(crate) fn still_at(&self, path: &Path) -> CoreResult<bool> {
        Ok(Fingerprint::of(path)?.is_some_and(|now| self.same_writes(&now)))
    }
}

/// An empty WAL holds no frames, so only the database file's own fingerprint matters: a
/// read-only connection that leaves an empty `-wal` behind (it may not delete it) changes
/// nothing. A WAL whose frames were checkpointed into the file moved the file's mtime. A
/// WAL with frames (a live session's file keeps its WAL when the session closes) proves
/// nothing new was written when it is as recorded, by the same racily-clean rule as the
/// file: the same size and mtime, that mtime older than the stamp by the window.
fn proves_unmodified(recorded: &Fingerprint, stamp_ns: i64, now: &Fingerprint) -> bool {
    let wal_unmodified = now.wal_size == recorded.wal_size
        && (recorded.wal_size == 0
            || (now.wal_mtime_ns == recorded.wal_mtime_ns
                && recorded.wal_mtime_ns + RACY_WINDOW_NS < stamp_ns));
    now.size == recorded.size
        && now.mtime_ns == recorded.mtime_ns
        && now.ctime_ns == recorded.ctime_ns
        && now.inode == recorded.inode
        && now.boot == recorded.boot
        && wal_unmodified
        && recorded.mtime_ns + RACY_WINDOW_NS < stamp_ns
}

/// 32 bits of a hash of this boot's id (`/proc/sys/kernel/random/boot_id`; 0 where there
/// is none).
fn boot_tag() -> u32 {
    static TAG: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *TAG.get_or_init(|| {
        scion_store::clock::boot_id()
            .map(|id| xxhash_rust::xxh3::xxh3_64(id.as_bytes()) as u32)
            .unwrap_or(0)
    })
}

/// The time now, in nanoseconds since the Unix epoch.
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// The record kept beside a checkout file: the version it was made from and the hash of
/// every page, so a checkpoint reads only what changed and a clean file is proved clean
/// from `stat` alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sidecar {
    /// The version's page size in bytes.
    pub page_size: u32,
    /// The version's root record.
    pub root: Locator,
    /// The version's number.
    pub version: u64,
    /// What `stat` said of the file when the record was written.
    pub fingerprint: Fingerprint,
    /// When the fingerprint was taken.
    pub stamp_ns: i64,
    /// Hash of every page (page 1 normalized) of the version the file was made from.
    pub hashes: Vec<u64>,
}

impl Sidecar {
    /// The version's number of pages.
    pub fn page_count(&self) -> u32 {
        self.hashes.len() as u32
    }

    /// True when the fingerprint alone proves the file still holds exactly the recorded
    /// version: same stat and WAL, no WAL content, and no change racily close to the stamp.
    pub fn proves_unmodified(&self, now: &Fingerprint) -> bool {
        proves_unmodified(&self.fingerprint, self.stamp_ns, now)
    }

    /// Everything but the page hashes.
    pub fn header(&self) -> RecordHeader {
        RecordHeader {
            page_size: self.page_size,
            page_count: self.page_count(),
            root: self.root,
            version: self.version,
            fingerprint: self.fingerprint,
            stamp_ns: self.stamp_ns,
        }
    }

    /// The record's bytes (see docs/format.md).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(120 + self.hashes.len() * 8);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&SIDECAR_FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&self.page_size.to_le_bytes());
        out.extend_from_slice(&self.page_count().to_le_bytes());
        out.extend_from_slice(&self.root.segment.0.to_le_bytes());
        out.extend_from_slice(&self.root.offset.to_le_bytes());
        out.extend_from_slice(&self.root.len.to_le_bytes());
        out.extend_from_slice(&self.version.to_le_bytes());
        let f = &self.fingerprint;
        out.extend_from_slice(&f.size.to_le_bytes());
        out.extend_from_slice(&f.mtime_ns.to_le_bytes());
        out.extend_from_slice(&f.inode.to_le_bytes());
        out.extend_from_slice(&f.boot.to_le_bytes());
        out.extend_from_slice(&f.wal_size.to_le_bytes());
        out.extend_from_slice(&f.wal_mtime_ns.to_le_bytes());
        out.extend_from_slice(&f.ctime_ns.to_le_bytes());
        out.extend_from_slice(&self.stamp_ns.to_le_bytes());
        debug_assert_eq!(out.len(), HEADER_LEN);
        let header_sum = xxhash_rust::xxh3::xxh3_64(&out);
        out.extend_from_slice(&header_sum.to_le_bytes());
        for h in &self.hashes {
            out.extend_from_slice(&h.to_le_bytes());
        }
        let sum = xxhash_rust::xxh3::xxh3_64(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// Read a record, or say why it is not one.
    pub fn decode(bytes: &[u8]) -> Result<Sidecar, DecodeError> {
        use crate::format::DecodeError as E;
        if bytes.len() < 8 + 8 {
            return Err(E("sidecar too short".into()));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 8);
        if xxhash_rust::xxh3::xxh3_64(body) != u64::from_le_bytes(sum.try_into().unwrap()) {
            return Err(E("sidecar checksum mismatch".into()));
        }
        let mut c = Cursor::new(body);
        let header = RecordHeader::decode(&mut c)?;
        if c.remaining() as u64 != header.page_count as u64 * 8 {
            return Err(E("sidecar hash table length mismatch".into()));
        }
        let mut hashes = Vec::with_capacity(header.page_count as usize);
        for _ in 0..header.page_count {
            hashes.push(c.u64()?);
        }
        Ok(Sidecar {
            page_size: header.page_size,
            root: header.root,
            version: header.version,
            fingerprint: header.fingerprint,
            stamp_ns: header.stamp_ns,
            hashes,
        })
    }

    /// The record of a file holding the head `r`, with the hash of every page; its
    /// fingerprint and stamp are filled in when the file is in place.
    pub(crate) fn unstamped(r: &crate::refs::Ref, hashes: Vec<u64>) -> Sidecar {
        Sidecar {
            page_size: r.page_size,
            root: r.root,
            version: r.version,
            fingerprint: Fingerprint::default(),
            stamp_ns: 0,
            hashes,
        }
    }

    pub(crate) fn path_for(checkout: &Path) -> PathBuf {
        sidecar_path(checkout, ".scion")
    }

    pub(crate) fn pending_path_for(checkout: &Path) -> PathBuf {
        sidecar_path(checkout, ".scion.pending")
    }

    /// Load the sidecar of `checkout`. A pending sidecar (written just before a commit
    /// was published) is adopted if the branch head is the version it names, and
    /// dropped otherwise. A missing or damaged sidecar is `None`.
    pub fn load(checkout: &Path, head: &Locator) -> CoreResult<Option<Sidecar>> {
        let pending = Self::pending_path_for(checkout);
        if let Ok(bytes) = fs::read(&pending) {
            match Sidecar::decode(&bytes) {
                Ok(s) if s.root == *head => match fs::rename(&pending, Self::path_for(checkout)) {
                    Ok(()) => return Ok(Some(s)),
                    // Another process loading the same checkout adopted (or dropped) it
                    // between the read and the rename: the record is whatever is there now.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(CoreError::io(&pending, e)),
                },
                _ => {
                    let _ = fs::remove_file(&pending);
                }
            }
        }
        match fs::read(Self::path_for(checkout)) {
            Ok(bytes) => Ok(Sidecar::decode(&bytes).ok()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CoreError::io(Self::path_for(checkout), e)),
        }
    }

    /// Write atomically (temp + rename). A cache, so not fsynced.
    pub fn store(&self, checkout: &Path) -> CoreResult<()> {
        write_atomic(&Self::path_for(checkout), &self.encode())
    }

    /// Write as pending: adopted by the next `load` only if its version got published.
    pub fn store_pending(&self, checkout: &Path) -> CoreResult<()> {
        write_atomic(&Self::pending_path_for(checkout), &self.encode())
    }

    /// Remove the record of the checkout at `checkout`, and any pending one.
    pub fn remove(checkout: &Path) -> CoreResult<()> {
        for p in [Self::path_for(checkout), Self::pending_path_for(checkout)] {
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(CoreError::io(p, e)),
            }
        }
        Ok(())
    }
}

/// A sidecar without its page hashes: what an inspection needs when the fingerprint
/// proves the file unmodified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    /// The version's page size in bytes.
    pub page_size: u32,
    /// The version's number of pages.
    pub page_count: u32,
    /// The version's root record.
    pub root: Locator,
    /// The version's number.
    pub version: u64,
    /// What `stat` said of the file when the record was written.
    pub fingerprint: Fingerprint,
    /// When the fingerprint was taken.
    pub stamp_ns: i64,
}

impl RecordHeader {
    /// As `Sidecar::proves_unmodified`.
    pub fn proves_unmodified(&self, now: &Fingerprint) -> bool {
        proves_unmodified(&self.fingerprint, self.stamp_ns, now)
    }

    /// The header at the start of `c` (version 1, 2 or 3; a version 2 or 3 header checksum
    /// is checked and consumed).
    fn decode(c: &mut Cursor<'_>) -> Result<RecordHeader, DecodeError> {
        use crate::format::DecodeError as E;
        let start = c.remaining();
        let all = c.peek_rest();
        if c.take(8)? != MAGIC {
            return Err(E("not a scion sidecar".into()));
        }
        let format = c.u16()?;
        if !(1..=SIDECAR_FORMAT_VERSION).contains(&format) {
            return Err(E(format!("unknown sidecar version {format}")));
        }
        c.take(2)?;
        let page_size = c.u32()?;
        let page_count = c.u32()?;
        let root = Locator {
            segment: SegmentId(c.u64()?),
            offset: c.u64()?,
            len: c.u32()?,
        };
        let version = c.u64()?;
        let fingerprint = Fingerprint {
            size: c.u64()?,
            mtime_ns: c.u64()? as i64,
            inode: c.u64()?,
            boot: c.u32()?,
            wal_size: c.u64()?,
            wal_mtime_ns: c.u64()? as i64,
            ctime_ns: if format >= 3 {
                c.u64()? as i64
            } else {
                CTIME_UNKNOWN
            },
        };
        let stamp_ns = c.u64()? as i64;
        if format >= 2 {
            let read = start - c.remaining();
            let want = xxhash_rust::xxh3::xxh3_64(&all[..read]);
            if c.u64()? != want {
                return Err(E("sidecar header checksum mismatch".into()));
            }
        }
        Ok(RecordHeader {
            page_size,
            page_count,
            root,
            version,
            fingerprint,
            stamp_ns,
        })
    }

    /// Whether `now` is the fingerprint recorded, file and WAL, without the racily-clean
    /// rule: a write in the same timestamp tick as the record would go unseen, so this is
    /// for hints, never for deciding what a checkout holds.
    pub(crate) fn same_fingerprint(&self, now: &Fingerprint) -> bool {
        let r = &self.fingerprint;
        now.size == r.size
            && now.mtime_ns == r.mtime_ns
            && now.ctime_ns == r.ctime_ns
            && now.inode == r.inode
            && now.boot == r.boot
            && now.wal_size == r.wal_size
            && (r.wal_size == 0 || now.wal_mtime_ns == r.wal_mtime_ns)
    }

    /// The record of the file at `checkout` when `now` (its fingerprint) proves the file
    /// still holds exactly the recorded version, read in O(1). `None` when it does not, when
    /// there is no usable record, and while a pending record waits to be judged.
    pub(crate) fn proving(checkout: &Path, now: &Fingerprint) -> CoreResult<Option<RecordHeader>> {
        if Sidecar::pending_path_for(checkout).exists() {
            return Ok(None);
        }
        Ok(RecordHeader::read(checkout)?.filter(|h| h.proves_unmodified(now)))
    }

    /// The header of the record beside `checkout`, reading only the header of a version 2
    /// record (a version 1 record is read whole). `None`: no record, or a damaged one.
    pub fn read(checkout: &Path) -> CoreResult<Option<RecordHeader>> {
        use std::io::Read;
        let path = Sidecar::path_for(checkout);
        let f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(CoreError::io(&path, e)),
        };
        let mut head = Vec::with_capacity(HEADER_LEN + 8);
        f.take((HEADER_LEN + 8) as u64)
            .read_to_end(&mut head)
            .map_err(|e| CoreError::io(&path, e))?;
        let format = head.get(8..10).map(|b| u16::from_le_bytes([b[0], b[1]]));
        if format == Some(1) {
            let bytes = fs::read(&path).map_err(|e| CoreError::io(&path, e))?;
            return Ok(Sidecar::decode(&bytes).ok().map(|s| s.header()));
        }
        Ok(RecordHeader::decode(&mut Cursor::new(&head)).ok())
    }
}

/// Write through a temp file no other process or thread uses, then rename: concurrent
/// writers of one record never see or remove each other's half-written file.
fn write_atomic(path: &Path, data: &[u8]) -> CoreResult<()> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = sidecar_path(path, &format!(".{}.{n}.tmp", std::process::id()));
    let res = File::create(&tmp)
        .and_then(|mut f| f.write_all(data))
        .and_then(|_| fs::rename(&tmp, path));
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        return Err(CoreError::io(path, e));
    }
    Ok(())
}
