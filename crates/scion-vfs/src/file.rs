//! One open database through the VFS: the version pinned by the current read transaction,
//! and the pages the current write transaction changed. SQLite's locks map onto scion's
//! model: SHARED pins the head (MVCC, no file lock), RESERVED takes the branch's writing
//! turn on this host and refuses a head that moved since the pin or that someone holds a
//! lease on, the commit signal publishes the buffered pages by compare-and-swap, and an
//! unlock without it discards them.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rusqlite::ffi;
use scion_engine::format::Locator;
use scion_engine::ops::pages::{refuse_checked_out, PageCommit};
use scion_engine::ops::view::VersionView;
use scion_engine::refs::{ref_key, Ref};
use scion_engine::turns::{TurnAnswer, WriteTurn};
use scion_engine::{Engine, EngineError};
use scion_store::ETag;

use crate::ahead::{Ahead, Readahead};
use crate::dirty::DirtyPages;
use crate::error::{VfsError, VfsResult};
use crate::target::OpenTarget;

/// SQLite's lock levels (sqlite3.h), in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Lock {
    None = 0,
    Shared = 1,
    Reserved = 2,
    Pending = 3,
    Exclusive = 4,
}

impl Lock {
    pub(crate) fn from_raw(level: i32) -> Lock {
        match level {
            0 => Lock::None,
            1 => Lock::Shared,
            2 => Lock::Reserved,
            3 => Lock::Pending,
            _ => Lock::Exclusive,
        }
    }
}

static CONNECTIONS: AtomicU64 = AtomicU64::new(1);

/// A write transaction: the head it started from and what it changed.
struct Writer {
    base: Ref,
    etag: ETag,
    /// This host's writers of the branch take turns; `None` where no lock can be made
    /// (the commit's compare-and-swap still keeps writers from overwriting each other).
    /// Under exclusive locking mode the turn lasts from one transaction to the next.
    _turn: Option<WriteTurn>,
    page_size: u32,
    page_count: u32,
    dirty: DirtyPages,
}

/// A branch head as last read: the store's change stamp taken before the read, the ref's
/// tag, and the version it names.
struct CachedHead {
    stamp: Option<u64>,
    etag: ETag,
    view: Arc<VersionView>,
}

/// Page 1 as presented for one version: (its root, its number, the bytes).
type PresentedPage1 = (Locator, u64, Arc<[u8]>);

pub(crate) struct DbFile {
    engine: Arc<Engine>,
    target: OpenTarget,
    read_only: bool,
    holder: String,
    lock: Lock,
    /// A checkpoint's version, fixed at open.
    fixed: Option<Arc<VersionView>>,
    /// The version the current read transaction sees.
    pinned: Option<Arc<VersionView>>,
    /// The last version read, kept between transactions: when the head has not moved, the
    /// next transaction reuses it (and the page map nodes it reached stay cached).
    last: Option<Arc<VersionView>>,
    /// The head last read.
    head: RefCell<Option<CachedHead>>,
    /// Pages fetched ahead of a sequential scan.
    ahead: RefCell<Readahead>,
    /// Page 1 of one version, as presented.
    page1: RefCell<Option<PresentedPage1>>,
    /// Added to the change counter page 1 presents: bumped when a commit failed after
    /// SQLite had finished its side, so that SQLite drops the pages it cached for it even
    /// when the version that won has the number the failed one would have had.
    generation: u32,
    /// The versions this connection's commits made, the newest last.
    commits: Commits,
    writer: Option<Writer>,
    /// Dirty bytes a write transaction keeps in memory before setting pages aside.
    spill_after: u64,
}

/// What a connection committed.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Commits {
    pub(crate) count: u64,
    pub(crate) last: Option<u64>,
}

impl DbFile {
    pub(crate) fn open(
        engine: Arc<Engine>,
        target: OpenTarget,
        read_only: bool,
        spill_after: u64,
    ) -> VfsResult<DbFile> {
        let fixed = match (&target.checkpoint, target.version) {
            (None, None) if target.root.is_some() => {
                let root = target.root.expect("checked");
                engine.read_ref(&target.branch).map_err(open_error)?;
                Some(Arc::new(
                    engine.version_view(root, 0).map_err(VfsError::io)?,
                ))
            }
            (Some(_), _) => {
                let v = engine.resolve(&target.target()).map_err(open_error)?;
                Some(Arc::new(
                    engine
                        .version_view(v.root, v.version)
                        .map_err(VfsError::io)?,
                ))
            }
            (None, Some(n)) => {
                let root = version_root(&engine, &target.branch, n)?;
                Some(Arc::new(
                    engine.version_view(root, n).map_err(VfsError::io)?,
                ))
            }
            (None, None) => {
                engine.read_ref(&target.branch).map_err(open_error)?;
                None
            }
        };
        let n = CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        let holder = format!("{}#vfs-{}-{n}", engine.holder(), std::process::id());
        Ok(DbFile {
            read_only: read_only || fixed.is_some(),
            engine,
            target,
            holder,
            lock: Lock::None,
            fixed,
            pinned: None,
            last: None,
            head: RefCell::new(None),
            ahead: RefCell::default(),
            page1: RefCell::new(None),
            generation: 0,
            commits: Commits::default(),
            writer: None,
            spill_after,
        })
    }

    pub(crate) fn read_only(&self) -> bool {
        self.read_only
    }

    /// The pinned version, or (for a header read outside a transaction) the current one.
    fn view(&self) -> VfsResult<Arc<VersionView>> {
        if let Some(v) = self.pinned.as_ref().or(self.fixed.as_ref()) {
            return Ok(v.clone());
        }
        self.head_view()
    }

    fn head_view(&self) -> VfsResult<Arc<VersionView>> {
        if let Some(v) = &self.fixed {
            return Ok(v.clone());
        }
        // Where the store keeps a change board (a local store), a head nobody wrote since
        // it was last read costs no system call; otherwise one read of the ref per
        // transaction, decoded (and the version's root record read) only when its bytes
        // changed. The stamp is taken before the read it vouches for.
        let key = ref_key(&self.target.branch);
        let backend = self.engine.backend();
        let stamp = backend.change_stamp(&key);
        if let Some(cached) = &*self.head.borrow() {
            if stamp.is_some() && cached.stamp == stamp {
                return Ok(cached.view.clone());
            }
        }
        let (bytes, etag) = backend.get(&key).map_err(|e| VfsError::io(e.into()))?;
        if let Some(cached) = self.head.borrow_mut().as_mut() {
            if cached.etag == etag {
                cached.stamp = stamp;
                return Ok(cached.view.clone());
            }
        }
        let r = Ref::decode(&bytes, &key).map_err(VfsError::io)?;
        let view = match self.pinned.as_ref().or(self.last.as_ref()) {
            Some(p) if p.root == r.root && p.version == r.version => p.clone(),
            _ => Arc::new(
                self.engine
                    .version_view(r.root, r.version)
                    .map_err(VfsError::io)?,
            ),
        };
        *self.head.borrow_mut() = Some(CachedHead {
            stamp,
            etag,
            view: view.clone(),
        });
        Ok(view)
    }

    /// Page `pgno` of `view` as SQLite sees it; page 1 (read at every transaction's start
    /// for its change counter) is kept per version.
    fn version_page(&self, view: &VersionView, pgno: u32) -> VfsResult<Option<Arc<[u8]>>> {
        if pgno == 1 {
            if let Some((root, version, page)) = &*self.page1.borrow() {
                if *root == view.root && *version == view.version {
                    return Ok(Some(page.clone()));
                }
            }
        }
        let plan = self.ahead.borrow_mut().plan(view.version, pgno);
        let page = match plan {
            Ahead::Buffered(page) => page,
            Ahead::Single => self.engine.read_page(view, pgno).map_err(VfsError::io)?,
            Ahead::Fetch(pgnos) => {
                let mut pages = self
                    .engine
                    .read_pages(view, pgnos)
                    .map_err(VfsError::io)?
                    .into_iter();
                let first = pages.next().and_then(|(_, p)| p);
                self.ahead.borrow_mut().keep(pages);
                first
            }
        };
        if let Some(p) = &page {
            self.ahead.borrow_mut().served(pgno, p);
        }
        if pgno == 1 {
            // Cached pages are shared: page 1 is presented on a copy of its own.
            if let Some(stored) = page {
                let mut p = stored.to_vec();
                present_page1(&mut p, view.version, self.generation);
                let p: Arc<[u8]> = p.into();
                *self.page1.borrow_mut() = Some((view.root, view.version, p.clone()));
                return Ok(Some(p));
            }
        }
        Ok(page)
    }

    pub(crate) fn lock(&mut self, level: Lock) -> VfsResult<()> {
        if level <= self.lock {
            return Ok(());
        }
        if self.lock == Lock::None {
            self.pinned = Some(self.head_view()?);
        }
        if level >= Lock::Reserved && self.writer.is_none() {
            self.begin_write()?;
        }
        self.lock = level;
        Ok(())
    }

    fn begin_write(&mut self) -> VfsResult<()> {
        if self.read_only {
            return Err(VfsError::new(
                ffi::SQLITE_READONLY,
                format!(
                    "scion: {} is read-only (a checkpoint, or opened with mode=ro): fork it to write",
                    self.target.target()
                ),
            ));
        }
        let b = &self.target.branch;
        let pinned = self.pinned.clone().ok_or_else(|| {
            VfsError::new(
                ffi::SQLITE_MISUSE,
                "scion: a write lock without a read lock",
            )
        })?;
        let turn = match self.engine.try_write_turn(b).map_err(VfsError::io)? {
            TurnAnswer::Mine(turn) => Some(turn),
            // No turn to be had here: writers meet at the head's compare-and-swap alone.
            TurnAnswer::Unavailable => None,
            TurnAnswer::Taken => {
                return Err(VfsError::new(
                    ffi::SQLITE_BUSY,
                    format!("scion: another connection on this host is writing {b}: retry when its transaction ends"),
                ))
            }
            _ => None,
        };
        // Read after the turn was taken: a writer that just finished is seen.
        let (base, etag) = self.engine.read_ref(b).map_err(VfsError::io)?;
        if base.root != pinned.root {
            return Err(VfsError::new(
                ffi::SQLITE_BUSY_SNAPSHOT,
                format!("scion: {b} moved since this transaction began: retry it"),
            ));
        }
        match self.engine.check_lease_free_for(b, &base, &self.holder) {
            Ok(()) => {}
            Err(ref e @ EngineError::LeaseHeld { ref holder, .. }) => {
                return Err(VfsError::new(
                    ffi::SQLITE_BUSY,
                    format!("scion: {b} is leased by {holder} (a session or an operation): retry when it is done"),
                )
                .presented_as(e));
            }
            Err(e) => return Err(VfsError::io(e)),
        }
        // A branch with a writable checkout is written through that file, on whichever
        // host it is: one way of writing a branch at a time.
        if let Err(e) = refuse_checked_out(b, &base) {
            return Err(VfsError::new(
                ffi::SQLITE_BUSY,
                format!("scion: {e}; `scion checkout {b} --release` ends the checkout"),
            )
            .presented_as(&e));
        }
        self.writer = Some(Writer {
            base,
            etag,
            _turn: turn,
            page_size: pinned.page_size,
            page_count: pinned.page_count,
            dirty: DirtyPages::new(self.spill_after),
        });
        Ok(())
    }

    pub(crate) fn unlock(&mut self, level: Lock) -> VfsResult<()> {
        if level < Lock::Reserved {
            // Without a commit signal the transaction rolled back: what it wrote is
            // dropped, and the writing turn with it.
            self.writer = None;
        }
        if level == Lock::None {
            if let Some(p) = self.pinned.take() {
                self.last = Some(p);
            }
        }
        self.lock = self.lock.min(level);
        Ok(())
    }

    /// SQLite committed: publish the pages this transaction changed.
    pub(crate) fn commit(&mut self) -> VfsResult<()> {
        let Some(w) = self.writer.as_mut() else {
            return Ok(());
        };
        let pinned = self.pinned.clone();
        let unchanged_size = pinned
            .as_ref()
            .is_some_and(|p| p.page_count == w.page_count);
        if w.dirty.is_empty() && unchanged_size {
            return Ok(());
        }
        let engine = &self.engine;
        let changes = w
            .dirty
            .take(w.page_size, w.page_count, |p1| {
                normalize_page1(p1);
                // SQLite bumps the change counter at every commit; the store keeps the
                // base's (the VFS presents the version number instead), so a commit that
                // changed no other byte of page 1 does not rewrite it.
                if let Some(base) = pinned.as_ref().filter(|p| p.page_count > 0) {
                    if let Some(stored) = engine.read_page(base, 1)? {
                        keep_change_counter(p1, &stored);
                    }
                }
                Ok(())
            })
            .map_err(VfsError::io)?;
        let b = &self.target.branch;
        let committed =
            self.engine
                .commit_pages(PageCommit::onto(b, &w.base, w.etag.clone(), &changes));
        let (r, etag, done) = match committed {
            Ok(done) => done,
            Err(e) => {
                // SQLite already counts these pages as written: a new generation makes it
                // drop them at its next transaction.
                self.generation = self.generation.wrapping_add(1);
                *self.page1.borrow_mut() = None;
                return Err(match e {
                    EngineError::Conflict { .. } => VfsError::new(
                        ffi::SQLITE_BUSY_SNAPSHOT,
                        format!("scion: {b} moved under this transaction (another writer or a lease came first): it was not committed"),
                    ),
                    e @ EngineError::CheckedOut { .. } => VfsError::new(
                        ffi::SQLITE_BUSY_SNAPSHOT,
                        format!("scion: {e} (checked out while this transaction ran): it was not committed"),
                    )
                    .presented_as(&e),
                    e => VfsError::io(e),
                });
            }
        };
        let view = self
            .engine
            .version_view(done.root, done.version)
            .map_err(VfsError::io)?;
        w.base = r;
        w.etag = etag;
        self.commits.count += 1;
        self.commits.last = Some(done.version);
        self.pinned = Some(Arc::new(view));
        Ok(())
    }

    pub(crate) fn size(&self) -> VfsResult<u64> {
        if let Some(w) = &self.writer {
            return Ok(w.page_count as u64 * w.page_size as u64);
        }
        let v = self.view()?;
        Ok(v.page_count as u64 * v.page_size as u64)
    }

    /// Fill `out` from `offset`; false when the file ended first (the rest is zeros).
    pub(crate) fn read(&mut self, offset: u64, out: &mut [u8]) -> VfsResult<bool> {
        let view = self.view()?;
        let (page_size, page_count) = match &self.writer {
            Some(w) => (w.page_size, w.page_count),
            None => (view.page_size, view.page_count),
        };
        if page_size == 0 {
            out.fill(0);
            return Ok(out.is_empty());
        }
        let ps = page_size as u64;
        let mut done = 0usize;
        let mut complete = true;
        while done < out.len() {
            let at = offset + done as u64;
            let pgno = (at / ps) as u32 + 1;
            let within = (at % ps) as usize;
            let take = (ps as usize - within).min(out.len() - done);
            let dest = &mut out[done..done + take];
            if pgno > page_count {
                dest.fill(0);
                complete = false;
            } else if let Some(page) = match &self.writer {
                Some(w) => w.dirty.get(pgno).map_err(VfsError::io)?,
                None => None,
            } {
                dest.copy_from_slice(&page[within..within + take]);
            } else {
                match self.version_page(&view, pgno)? {
                    Some(page) => dest.copy_from_slice(&page[within..within + take]),
                    None => dest.fill(0),
                }
            }
            done += take;
        }
        Ok(complete)
    }

    pub(crate) fn write(&mut self, offset: u64, data: &[u8]) -> VfsResult<()> {
        let view = self.view()?;
        let w = self.writer.as_mut().ok_or_else(|| {
            VfsError::new(
                ffi::SQLITE_MISUSE,
                "scion: a write outside a write transaction",
            )
        })?;
        if w.page_count == 0 && offset == 0 {
            // An empty database takes the page size of its first page.
            w.page_size = data.len() as u32;
        }
        let ps = w.page_size as u64;
        if ps == 0 {
            return Err(VfsError::new(
                ffi::SQLITE_IOERR_WRITE,
                "scion: no page size",
            ));
        }
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let pgno = (at / ps) as u32 + 1;
            let within = (at % ps) as usize;
            let take = (ps as usize - within).min(data.len() - done);
            let engine = &self.engine;
            let page = w
                .dirty
                .page_mut(pgno, || {
                    // A partial write of a page this transaction has not written yet keeps
                    // the rest of the page as the version has it.
                    let base = if take == ps as usize || pgno > view.page_count {
                        None
                    } else {
                        engine.read_page(&view, pgno)?
                    };
                    Ok(base.map_or_else(|| vec![0u8; ps as usize], |p| p.to_vec()))
                })
                .map_err(VfsError::io)?;
            page[within..within + take].copy_from_slice(&data[done..done + take]);
            w.page_count = w.page_count.max(pgno);
            done += take;
        }
        w.dirty.bound().map_err(VfsError::io)
    }

    pub(crate) fn truncate(&mut self, size: u64) -> VfsResult<()> {
        let w = self.writer.as_mut().ok_or_else(|| {
            VfsError::new(
                ffi::SQLITE_MISUSE,
                "scion: a truncate outside a write transaction",
            )
        })?;
        if w.page_size == 0 {
            return Ok(());
        }
        let pages = size.div_ceil(w.page_size as u64) as u32;
        w.dirty.truncate(pages);
        w.page_count = pages;
        Ok(())
    }

    /// `PRAGMA scion_version`: the version this connection reads.
    pub(crate) fn version(&self) -> VfsResult<u64> {
        Ok(self.view()?.version)
    }

    /// `PRAGMA scion_commits`: how many versions this connection committed, and the
    /// last one. The head may have moved on since (another writer), so this is what a
    /// caller reports as its own, not `scion_version`.
    pub(crate) fn commits(&self) -> Commits {
        self.commits
    }

    pub(crate) fn has_writer(&self) -> bool {
        self.writer.is_some()
    }

    pub(crate) fn close(&mut self) {
        self.writer = None;
    }
}

/// The root of version `n` of `b`: its head or a checkpoint holds it (versions nothing
/// names are not kept).
fn version_root(engine: &Engine, b: &scion_engine::BranchRef, n: u64) -> VfsResult<Locator> {
    let (head, _) = engine.read_ref(b).map_err(open_error)?;
    if head.version == n {
        return Ok(head.root);
    }
    let checkpoints = engine.list_checkpoints(b).map_err(open_error)?;
    if let Some((_, c)) = checkpoints.iter().find(|(_, c)| c.version == n) {
        return Ok(c.root);
    }
    let mut kept: Vec<String> = checkpoints
        .iter()
        .map(|(name, c)| format!("{} (checkpoint {name})", c.version))
        .collect();
    kept.insert(0, format!("{} (the head)", head.version));
    Err(VfsError::new(
        ffi::SQLITE_CANTOPEN,
        format!(
            "scion: version {n} of {b} is not kept (only the head and checkpoints are): it has {}; name a version with `scion checkpoint` to open it later",
            kept.join(", ")
        ),
    ))
}

fn open_error(e: EngineError) -> VfsError {
    VfsError::new(ffi::SQLITE_CANTOPEN, format!("scion: {e}"))
}

/// Page 1 as stored: the WAL bytes say "rollback journal", as every version in the store.
fn normalize_page1(page: &mut [u8]) {
    if page.len() >= 20 {
        page[18] = 1;
        page[19] = 1;
    }
}

/// Page 1 with the change counter and version-valid-for of `stored` (equal to each other
/// there, so the header's page count stays trusted).
fn keep_change_counter(page: &mut [u8], stored: &[u8]) {
    if page.len() >= 96 && stored.len() >= 96 {
        page[24..28].copy_from_slice(&stored[24..28]);
        page[92..96].copy_from_slice(&stored[92..96]);
    }
}

/// Page 1 as SQLite sees it: its change counter (and version-valid-for) is the version's
/// number, so a connection's page cache is dropped exactly when the version it reads moved
/// (a rollback included: versions never repeat).
fn present_page1(page: &mut [u8], version: u64, generation: u32) {
    normalize_page1(page);
    if page.len() >= 96 {
        let counter = (version as u32).wrapping_add(generation).to_be_bytes();
        page[24..28].copy_from_slice(&counter);
        page[92..96].copy_from_slice(&counter);
    }
}
