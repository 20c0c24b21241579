//! Capture of one checkout's committed transactions as they happen, without ever taking
//! SQLite's write lock:
//!
//! - frames are consumed only up to the wal-index's published end (`mxFrame`), never to
//!   the last checksum-valid frame of the file (that may be a commit SQLite never
//!   published);
//! - a read transaction (a *pin*) is always open, and pins are passed hand over hand: a
//!   new pin begins, capture catches up with what is published, and only then does the
//!   old pin end. Under a pin, no checkpoint can copy frames past it into the database
//!   and no writer can restart the WAL over frames not yet captured;
//! - only PASSIVE checkpoints, which never wait and never block a writer;
//! - the database file and `-shm` are read through descriptors opened once and closed
//!   only after every connection (closing any descriptor of a file drops this process's
//!   POSIX locks on it, SQLite's included).

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::cursor::{Cursor, FileId};
use crate::error::{CaptureError, CaptureResult};
use crate::pending::{lock_byte_page, Pending};
use crate::shm::{Published, ShmFile};
use crate::walfile::{verify_frames, Checksum, FrameHeader, WalFile, FRAME_HEADER_LEN};

/// What one capture step found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing new was published.
    Idle,
    /// Transactions were captured.
    Captured { transactions: u64, frames: u64 },
    /// A writer is in the middle of restarting the WAL; look again shortly.
    InFlight,
    /// The published WAL does not continue the cursor: reconcile.
    Break(BreakReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakReason {
    /// A new WAL generation that this capturer cannot vouch it saw begin.
    NewGeneration,
    /// The published end is behind the cursor (the WAL lost frames: power loss, a
    /// restored file).
    Behind,
    /// The frames up to the published end do not chain from the cursor.
    Chain,
    /// The WAL's page size is not the database's.
    PageSize,
}

impl std::fmt::Display for BreakReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BreakReason::NewGeneration => "new WAL generation not seen to begin",
            BreakReason::Behind => "published end behind the cursor",
            BreakReason::Chain => "frames do not chain from the cursor",
            BreakReason::PageSize => "WAL page size differs from the database's",
        })
    }
}

/// Counters since the capturer opened.
#[derive(Debug, Clone, Copy, Default)]
pub struct CaptureCounters {
    pub transactions: u64,
    pub frames: u64,
    pub continuations: u64,
    pub passive_checkpoints: u64,
    /// Second-tier recycles that held the write lock, and those skipped because a writer
    /// held it past the barrier's busy timeout.
    pub barriers: u64,
    pub barriers_skipped: u64,
    /// The longest a barrier held the write lock, in microseconds.
    pub barrier_max_hold_us: u64,
    pub growth_pages: u64,
}

pub(crate) struct Capturer {
    // Connections first: fields drop in order, so every connection is closed before the
    // descriptors below.
    pins: [Connection; 2],
    active: usize,
    ckpt: Connection,
    /// The opt-in second tier's write-lock barrier, opened on first use.
    barrier: Option<Connection>,
    shm: ShmFile,
    pub(crate) db: File,
    pub(crate) path: PathBuf,
    pub(crate) wal_path: PathBuf,
    file: FileId,
    pub(crate) page_size: u32,
    pub(crate) cursor: Option<Cursor>,
    /// Whether this capturer has seen the WAL continue its cursor since its first pin.
    /// Until it has, a new generation may have restarted over frames it never saw.
    pub(crate) vouched: bool,
    pub(crate) pending: Pending,
    pub counters: CaptureCounters,
}

fn sqlite_err(path: &Path) -> impl Fn(rusqlite::Error) -> CaptureError + '_ {
    move |source| CaptureError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn io_err(path: &Path) -> impl Fn(std::io::Error) -> CaptureError + '_ {
    move |source| CaptureError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn connect(path: &Path) -> CaptureResult<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let c = Connection::open_with_flags(path, flags).map_err(sqlite_err(path))?;
    c.busy_timeout(Duration::from_secs(5))
        .map_err(sqlite_err(path))?;
    // Only PASSIVE checkpoints, and only when capture asks for one.
    c.pragma_update(None, "wal_autocheckpoint", 0)
        .map_err(sqlite_err(path))?;
    Ok(c)
}

fn begin_pin(c: &Connection, path: &Path) -> CaptureResult<()> {
    c.execute_batch("BEGIN").map_err(sqlite_err(path))?;
    // A read transaction holds its snapshot only once it has read something.
    let pinned = c.query_row("SELECT count(*) FROM sqlite_schema", [], |r| {
        r.get::<_, i64>(0)
    });
    if let Err(e) = pinned {
        let _ = c.execute_batch("ROLLBACK");
        return Err(sqlite_err(path)(e));
    }
    Ok(())
}

/// Put a database that left WAL mode back into it. SQLite refuses while another
/// connection has the file open; call it only before capture opens the file.
pub(crate) fn restore_wal_mode(path: &Path) -> CaptureResult<()> {
    let c = Connection::open(path).map_err(sqlite_err(path))?;
    let mode: String = c
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(sqlite_err(path))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(CaptureError::NotWal {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

impl Capturer {
    /// Open capture of the WAL-mode database at `path`. The cursor is unknown until one of
    /// [`Capturer::resume`], [`Capturer::start_clean`] or [`Capturer::reconcile`] sets it.
    pub fn open(path: &Path) -> CaptureResult<Capturer> {
        let wal_path = PathBuf::from(format!("{}-wal", path.display()));
        let shm_path = PathBuf::from(format!("{}-shm", path.display()));
        // Declared first so that, on an early return, it is dropped after the connections.
        let db = File::open(path).map_err(io_err(path))?;
        let md = db.metadata().map_err(io_err(path))?;
        let file = FileId {
            dev: md.dev(),
            ino: md.ino(),
        };
        let mut header = [0u8; 100];
        db.read_exact_at(&mut header, 0)
            .map_err(|_| CaptureError::NotWal {
                path: path.to_path_buf(),
            })?;
        if header[18] != 2 || header[19] != 2 {
            // Never pin a rollback-mode database: its read lock blocks every writer.
            return Err(CaptureError::NotWal {
                path: path.to_path_buf(),
            });
        }
        let page_size = match u16::from_be_bytes([header[16], header[17]]) {
            1 => 65536,
            n => n as u32,
        };
        let pins = [connect(path)?, connect(path)?];
        let ckpt = connect(path)?;
        begin_pin(&pins[0], path)?;
        let shm = ShmFile::new(File::open(&shm_path).map_err(io_err(&shm_path))?);
        Ok(Capturer {
            pins,
            active: 0,
            ckpt,
            barrier: None,
            shm,
            db,
            path: path.to_path_buf(),
            wal_path,
            file,
            page_size,
            cursor: None,
            vouched: false,
            pending: Pending::new(page_size, 0, Cursor::default()),
            counters: CaptureCounters::default(),
        })
    }

    pub fn file(&self) -> FileId {
        self.file
    }

    pub fn cursor(&self) -> Option<Cursor> {
        self.cursor
    }

    pub fn pending(&self) -> &Pending {
        &self.pending
    }

    pub(crate) fn pending_mut(&mut self) -> &mut Pending {
        &mut self.pending
    }

    /// The captured set was committed: start an empty one from the same place.
    pub fn committed(&mut self) {
        self.pending = Pending::new(self.page_size, self.pending.page_count, self.pending.cursor);
    }

    pub fn published(&self) -> CaptureResult<Option<Published>> {
        self.shm.published().map_err(io_err(&self.path))
    }

    /// Bytes published in the WAL and not yet captured.
    pub(crate) fn lag_bytes(&self) -> CaptureResult<u64> {
        let (Some(p), Some(c)) = (self.published()?, self.cursor) else {
            return Ok(0);
        };
        let frame = (FRAME_HEADER_LEN as u64) + self.page_size as u64;
        Ok(if p.salts == c.salts {
            p.max_frame.saturating_sub(c.frame) as u64 * frame
        } else {
            p.max_frame as u64 * frame
        })
    }

    pub(crate) fn wal(&self) -> CaptureResult<Option<WalFile>> {
        WalFile::open(&self.wal_path).map_err(io_err(&self.wal_path))
    }

    /// Continue from `cursor` (stored with the durable version of `page_count` pages) if
    /// the WAL still holds exactly that commit frame, published.
    pub fn resume(&mut self, cursor: Cursor, page_count: u32) -> CaptureResult<bool> {
        let Some(p) = self.published()? else {
            return Ok(false);
        };
        if p.salts != cursor.salts || p.max_frame < cursor.frame || p.page_size != self.page_size {
            return Ok(false);
        }
        let Some(wal) = self.wal()? else {
            return Ok(false);
        };
        let Some(header) = wal.header().map_err(io_err(&self.wal_path))? else {
            return Ok(false);
        };
        if header.salts != cursor.salts || header.page_size != self.page_size {
            return Ok(false);
        }
        if cursor.frame > 0 {
            let Some(buf) = wal
                .frames(cursor.frame, cursor.frame, self.page_size)
                .map_err(io_err(&self.wal_path))?
            else {
                return Ok(false);
            };
            let h = FrameHeader::parse(&buf[..FRAME_HEADER_LEN]);
            if h.salts != cursor.salts || h.checksum != cursor.checksum || h.commit_size == 0 {
                return Ok(false);
            }
        }
        self.cursor = Some(cursor);
        self.vouched = false;
        self.pending = Pending::new(self.page_size, page_count, cursor);
        // Capture what was published since at once: until then, a writer may restart a
        // fully checkpointed WAL under a pin that began on it.
        match self.catch_up()? {
            Step::Idle | Step::Captured { .. } => Ok(true),
            Step::InFlight | Step::Break(_) => {
                self.cursor = None;
                Ok(false)
            }
        }
    }

    /// Start at the published end when the caller has proved that the database file
    /// alone is exactly its durable version of `page_count` pages (nothing published in
    /// the WAL). `false` if the WAL has published frames.
    pub(crate) fn start_clean(&mut self, page_count: u32) -> CaptureResult<bool> {
        let p = self.published()?;
        if p.is_some_and(|p| p.max_frame > 0) {
            return Ok(false);
        }
        let cursor = Cursor {
            salts: p.map(|p| p.salts).unwrap_or_default(),
            frame: 0,
            checksum: Checksum::default(),
        };
        self.cursor = Some(cursor);
        self.vouched = true;
        self.pending = Pending::new(self.page_size, page_count, cursor);
        Ok(true)
    }

    pub(crate) fn read_db_page(&self, pgno: u32) -> CaptureResult<Vec<u8>> {
        let mut page = vec![0u8; self.page_size as usize];
        let offset = (pgno as u64 - 1) * self.page_size as u64;
        let mut filled = 0;
        while filled < page.len() {
            let n = self
                .db
                .read_at(&mut page[filled..], offset + filled as u64)
                .map_err(io_err(&self.path))?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        Ok(page)
    }

    /// Capture every transaction published since the cursor.
    pub fn step(&mut self) -> CaptureResult<Step> {
        let Some(mut cursor) = self.cursor else {
            return Ok(Step::Break(BreakReason::NewGeneration));
        };
        let Some(p) = self.published()? else {
            return Ok(Step::Idle);
        };
        if p.page_size != self.page_size && p.max_frame > 0 {
            return Ok(Step::Break(BreakReason::PageSize));
        }
        if p.salts != cursor.salts {
            if !self.vouched {
                return Ok(Step::Break(BreakReason::NewGeneration));
            }
            // Pins held without a gap since the cursor was set mean that a restart could
            // only have dropped frames already captured: a continuation.
            let wal = self.wal()?;
            let header = match &wal {
                Some(w) => w.header().map_err(io_err(&self.wal_path))?,
                None => None,
            };
            if p.max_frame > 0 && header.is_none_or(|h| h.salts != p.salts) {
                return Ok(Step::InFlight);
            }
            cursor = Cursor {
                salts: p.salts,
                frame: 0,
                checksum: Checksum::default(),
            };
            self.cursor = Some(cursor);
            self.pending.cursor = cursor;
            self.counters.continuations += 1;
        }
        if p.max_frame == cursor.frame {
            self.vouched = true;
            return Ok(Step::Idle);
        }
        if p.max_frame < cursor.frame {
            return Ok(Step::Break(BreakReason::Behind));
        }
        let Some(wal) = self.wal()? else {
            return Ok(Step::InFlight);
        };
        let Some(header) = wal.header().map_err(io_err(&self.wal_path))? else {
            return Ok(Step::InFlight);
        };
        if header.salts != cursor.salts {
            return Ok(Step::InFlight);
        }
        if header.page_size != self.page_size {
            return Ok(Step::Break(BreakReason::PageSize));
        }
        let Some(buf) = wal
            .frames(cursor.frame + 1, p.max_frame, self.page_size)
            .map_err(io_err(&self.wal_path))?
        else {
            return Ok(Step::Break(BreakReason::Chain));
        };
        let seed = if cursor.frame == 0 {
            header.checksum
        } else {
            cursor.checksum
        };
        let Some(run) = verify_frames(&buf, &header, cursor.salts, seed) else {
            return Ok(Step::Break(BreakReason::Chain));
        };
        let last = run.frames.last().expect("at least one frame");
        if run.end != p.frame_checksum || last.0.commit_size == 0 {
            return Ok(Step::Break(BreakReason::Chain));
        }
        let frames = run.frames.len() as u64;
        let mut transactions = 0;
        let mut written = std::collections::HashSet::new();
        for (i, (h, page)) in run.frames.iter().enumerate() {
            self.pending.put(h.pgno, page);
            written.insert(h.pgno);
            if h.commit_size == 0 {
                continue;
            }
            let at = Cursor {
                salts: cursor.salts,
                frame: cursor.frame + 1 + i as u32,
                checksum: h.checksum,
            };
            let mut growth = Vec::new();
            if h.commit_size > self.pending.page_count {
                let lock_page = lock_byte_page(self.page_size);
                for pgno in self.pending.page_count + 1..=h.commit_size {
                    if pgno != lock_page && !written.contains(&pgno) {
                        growth.push((pgno, self.read_db_page(pgno)?));
                    }
                }
            }
            self.counters.growth_pages += growth.len() as u64;
            self.pending.commit(h.commit_size, at, growth);
            written.clear();
            transactions += 1;
        }
        self.cursor = Some(self.pending.cursor);
        self.vouched = true;
        self.counters.transactions += transactions;
        self.counters.frames += frames;
        Ok(Step::Captured {
            transactions,
            frames,
        })
    }

    /// Step until nothing is in flight (a WAL restart completes within microseconds).
    pub(crate) fn catch_up(&mut self) -> CaptureResult<Step> {
        for _ in 0..1000 {
            match self.step()? {
                Step::InFlight => std::thread::sleep(Duration::from_millis(1)),
                other => return Ok(other),
            }
        }
        Ok(Step::InFlight)
    }

    /// Pass the pin on: a new read transaction begins, capture catches up, and only then
    /// does the old one end.
    pub(crate) fn rotate_pin(&mut self) -> CaptureResult<Step> {
        let next = 1 - self.active;
        begin_pin(&self.pins[next], &self.path)?;
        let step = self.catch_up()?;
        if matches!(step, Step::Break(_) | Step::InFlight) {
            // Keep the older pin too: nothing may be recycled until capture is sound.
            let _ = self.pins[next].execute_batch("ROLLBACK");
            return Ok(step);
        }
        self.pins[self.active]
            .execute_batch("ROLLBACK")
            .map_err(sqlite_err(&self.path))?;
        self.active = next;
        Ok(step)
    }

    /// Let the WAL be recycled without blocking anyone: pass the pin on, run a PASSIVE
    /// checkpoint (it copies frames into the database only up to the oldest reader), and
    /// pass the pin on again so that, if everything was copied, the next writer may
    /// restart the WAL from the beginning.
    pub(crate) fn recycle(&mut self) -> CaptureResult<Step> {
        let step = self.rotate_pin()?;
        if matches!(step, Step::Break(_) | Step::InFlight) {
            return Ok(step);
        }
        self.ckpt
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .map_err(sqlite_err(&self.path))?;
        self.counters.passive_checkpoints += 1;
        self.rotate_pin()
    }

    /// The second tier, for writers that never pause (opt-in): take the write lock for a
    /// moment (giving up after 10 ms), so that no commit lands while the pin is passed on,
    /// everything is copied into the database and the pin passed on again; the next writer
    /// then restarts the WAL. Writers with a busy timeout wait for at most the barrier;
    /// writers without one get SQLITE_BUSY meanwhile. `None` when a writer held the lock.
    pub(crate) fn recycle_with_barrier(&mut self) -> CaptureResult<Option<Step>> {
        if self.barrier.is_none() {
            let mut c = connect(&self.path)?;
            c.busy_handler(Some(barrier_retry))
                .map_err(sqlite_err(&self.path))?;
            self.barrier = Some(c);
        }
        let barrier = self.barrier.as_ref().expect("opened above");
        let asked = std::time::Instant::now();
        if let Err(e) = barrier.execute_batch("BEGIN IMMEDIATE") {
            self.counters.barriers_skipped += 1;
            let waited_us = asked.elapsed().as_micros() as u64;
            tracing::debug!(error = %e, waited_us, "second-tier barrier skipped");
            return Ok(None);
        }
        let held = std::time::Instant::now();
        let step = self.recycle();
        let barrier = self.barrier.as_ref().expect("opened above");
        let released = barrier.execute_batch("ROLLBACK");
        self.counters.barriers += 1;
        self.counters.barrier_max_hold_us = self
            .counters
            .barrier_max_hold_us
            .max(held.elapsed().as_micros() as u64);
        released.map_err(sqlite_err(&self.path))?;
        step.map(Some)
    }
}

/// How the barrier waits for the write lock: retry every [`BARRIER_RETRY`], for about
/// 10 ms in all. SQLite's own busy timeout sleeps 1, 2, then 5 ms between tries: four looks
/// in 10 ms, which a writer committing back to back (its lock free only for the moment
/// between two transactions) almost always fills, so most barriers would be skipped.
/// Two other ways were measured worse against a writer committing back to back (one
/// barrier in four skipped with this one): retrying at once, yielding the core (over half
/// skipped, and the spinning took CPU from the writer), and watching the wal-index for
/// the writer's next commit and trying right then (six in ten skipped). A skipped barrier
/// is a writer holding its lock through slow commits (those just after the lockless
/// checkpoint's fsync take milliseconds); waiting longer won every barrier but cost the
/// writer more than skipping (docs/benchmarks.md).
fn barrier_retry(attempts: i32) -> bool {
    if attempts >= BARRIER_TRIES {
        return false;
    }
    std::thread::sleep(BARRIER_RETRY);
    true
}

const BARRIER_RETRY: Duration = Duration::from_micros(50);
const BARRIER_TRIES: i32 = 200;
