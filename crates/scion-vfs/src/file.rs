//! One open database through the VFS: the version pinned by the current read transaction,
//! and the pages the current write transaction changed. SQLite's locks map onto scion's
//! model: SHARED pins the head (MVCC, no file lock), RESERVED takes the branch's lease and
//! refuses a head that moved since the pin, the commit signal publishes the buffered pages,
//! and an unlock without it discards them.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::ffi;
use scion_core::format::Locator;
use scion_core::ops::pages::{LeaseAfter, PageChanges};
use scion_core::ops::view::VersionView;
use scion_core::refs::{ref_key, Ref};
use scion_core::{CheckoutState, CoreError, Scion};
use scion_store::ETag;

use crate::target::OpenTarget;

/// A failure as SQLite sees it: a result code, and what to tell the user.
#[derive(Debug)]
pub(crate) struct VfsError {
    pub(crate) code: i32,
    pub(crate) message: String,
}

impl VfsError {
    pub(crate) fn new(code: i32, message: impl Into<String>) -> Self {
        VfsError {
            code,
            message: message.into(),
        }
    }

    fn io(e: CoreError) -> Self {
        let code = if e.is_retryable() {
            ffi::SQLITE_BUSY
        } else {
            ffi::SQLITE_IOERR
        };
        VfsError::new(code, format!("scion: {e}"))
    }
}

pub(crate) type VfsResult<T> = Result<T, VfsError>;

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

/// How long a write transaction's lease lasts if its process dies holding it.
const LEASE_TTL: Duration = Duration::from_secs(30);

static CONNECTIONS: AtomicU64 = AtomicU64::new(1);

/// A write transaction: the head it started from and what it changed.
struct Writer {
    base: Ref,
    etag: ETag,
    /// The commit ends the lease in its own write; a further transaction under the same
    /// lock (exclusive locking mode) takes it again at its first write.
    leased: bool,
    page_size: u32,
    page_count: u32,
    dirty: BTreeMap<u32, Vec<u8>>,
}

pub(crate) struct DbFile {
    scion: Arc<Scion>,
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
    /// The head last read: the ref's tag, and the version it names.
    head: RefCell<Option<(ETag, Arc<VersionView>)>>,
    /// Page 1 of one version, as presented.
    page1: RefCell<Option<(Locator, u64, Vec<u8>)>>,
    writer: Option<Writer>,
}

impl DbFile {
    pub(crate) fn open(
        scion: Arc<Scion>,
        target: OpenTarget,
        read_only: bool,
    ) -> VfsResult<DbFile> {
        let fixed = match &target.checkpoint {
            Some(_) => {
                let v = scion.resolve(&target.target()).map_err(open_error)?;
                Some(Arc::new(
                    scion
                        .version_view(v.root, v.version)
                        .map_err(VfsError::io)?,
                ))
            }
            None => {
                scion.read_ref(&target.branch).map_err(open_error)?;
                None
            }
        };
        let n = CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        let holder = format!("{}#vfs-{}-{n}", scion.holder(), std::process::id());
        Ok(DbFile {
            read_only: read_only || fixed.is_some(),
            scion,
            target,
            holder,
            lock: Lock::None,
            fixed,
            pinned: None,
            last: None,
            head: RefCell::new(None),
            page1: RefCell::new(None),
            writer: None,
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
        // One read of the ref per transaction; decoded (and the version's root record
        // read) only when its bytes changed.
        let key = ref_key(&self.target.branch);
        let (bytes, etag) = self
            .scion
            .backend()
            .get(&key)
            .map_err(|e| VfsError::io(e.into()))?;
        if let Some((tag, v)) = &*self.head.borrow() {
            if *tag == etag {
                return Ok(v.clone());
            }
        }
        let r = Ref::decode(&bytes, &key).map_err(VfsError::io)?;
        let view = match self.pinned.as_ref().or(self.last.as_ref()) {
            Some(p) if p.root == r.root && p.version == r.version => p.clone(),
            _ => Arc::new(
                self.scion
                    .version_view(r.root, r.version)
                    .map_err(VfsError::io)?,
            ),
        };
        *self.head.borrow_mut() = Some((etag, view.clone()));
        Ok(view)
    }

    /// Page `pgno` of `view` as SQLite sees it; page 1 (read at every transaction's start
    /// for its change counter) is kept per version.
    fn version_page(&self, view: &VersionView, pgno: u32) -> VfsResult<Option<Vec<u8>>> {
        if pgno == 1 {
            if let Some((root, version, page)) = &*self.page1.borrow() {
                if *root == view.root && *version == view.version {
                    return Ok(Some(page.clone()));
                }
            }
        }
        let mut page = self.scion.read_page(view, pgno).map_err(VfsError::io)?;
        if pgno == 1 {
            if let Some(p) = page.as_mut() {
                present_page1(p, view.version);
                *self.page1.borrow_mut() = Some((view.root, view.version, p.clone()));
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
        // A checkout file holding changes would be overwritten (or would overwrite these)
        // when it is checkpointed: one way of writing a branch at a time. (A head that moved
        // since the pin is refused by `take_lease`, which reads the ref anyway.)
        match self.scion.checkout_state(b, &pinned.root) {
            Ok(CheckoutState::Dirty | CheckoutState::Unknown) => {
                return Err(VfsError::new(
                    ffi::SQLITE_BUSY,
                    format!(
                        "scion: {b} has a checkout file with changes not checkpointed ({}): checkpoint it (`scion checkpoint {b} <name>`) or discard them before writing through the VFS",
                        self.scion.checkout_path(b).display()
                    ),
                ))
            }
            Ok(_) => {}
            Err(e) => return Err(VfsError::io(e)),
        }
        let (base, etag) = self.take_lease(&pinned.root)?;
        self.writer = Some(Writer {
            base,
            etag,
            leased: true,
            page_size: pinned.page_size,
            page_count: pinned.page_count,
            dirty: BTreeMap::new(),
        });
        Ok(())
    }

    /// Take the branch's lease as this connection's holder; the head must still be `root`.
    fn take_lease(&self, root: &Locator) -> VfsResult<(Ref, ETag)> {
        let b = &self.target.branch;
        let (base, etag) = match self.scion.lease_acquire_as(b, &self.holder, LEASE_TTL) {
            Ok(leased) => leased,
            Err(CoreError::LeaseHeld { holder, .. }) => {
                return Err(VfsError::new(
                    ffi::SQLITE_BUSY,
                    format!("scion: {b} is being written by {holder}: retry when it is done"),
                ))
            }
            Err(e) => return Err(VfsError::io(e)),
        };
        if &base.root != root {
            let _ = self.scion.lease_release_as(b, &self.holder);
            return Err(VfsError::new(
                ffi::SQLITE_BUSY_SNAPSHOT,
                format!("scion: {b} moved since this transaction began: retry it"),
            ));
        }
        Ok((base, etag))
    }

    pub(crate) fn unlock(&mut self, level: Lock) -> VfsResult<()> {
        if level < Lock::Reserved {
            if let Some(w) = self.writer.take() {
                // Without a commit signal the transaction rolled back: what it wrote is
                // dropped. A lease still held (no commit ended it) is given back.
                if w.leased {
                    let _ = self
                        .scion
                        .lease_release_as(&self.target.branch, &self.holder);
                }
            }
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
        let mut pages = std::mem::take(&mut w.dirty);
        if let Some(p1) = pages.get_mut(&1) {
            normalize_page1(p1);
        }
        let changes = PageChanges {
            page_size: w.page_size,
            page_count: w.page_count,
            pages,
        };
        let b = &self.target.branch;
        let (r, etag, done) = self
            .scion
            .commit_pages(
                b,
                &w.base,
                w.etag.clone(),
                &changes,
                &mut |_| None,
                &|_| BTreeMap::new(),
                LeaseAfter::Release,
            )
            .map_err(|e| match e {
                CoreError::Conflict { .. } => VfsError::new(
                    ffi::SQLITE_BUSY_SNAPSHOT,
                    format!("scion: {b} moved under this transaction: it was not committed"),
                ),
                e => VfsError::io(e),
            })?;
        let view = self
            .scion
            .version_view(done.root, done.version)
            .map_err(VfsError::io)?;
        w.base = r;
        w.etag = etag;
        w.leased = false;
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
            } else if let Some(page) = self.writer.as_ref().and_then(|w| w.dirty.get(&pgno)) {
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
        if let Some(w) = &self.writer {
            if !w.leased {
                let root = w.base.root;
                let (base, etag) = self.take_lease(&root)?;
                let w = self.writer.as_mut().expect("checked above");
                (w.base, w.etag, w.leased) = (base, etag, true);
            }
        }
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
            let page = match w.dirty.entry(pgno) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    // A partial write of a page this transaction has not written yet keeps
                    // the rest of the page as the version has it.
                    let base = if take == ps as usize || pgno > view.page_count {
                        None
                    } else {
                        self.scion.read_page(&view, pgno).map_err(VfsError::io)?
                    };
                    v.insert(base.unwrap_or_else(|| vec![0u8; ps as usize]))
                }
            };
            page[within..within + take].copy_from_slice(&data[done..done + take]);
            w.page_count = w.page_count.max(pgno);
            done += take;
        }
        Ok(())
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
        w.dirty.retain(|&p, _| p <= pages);
        w.page_count = pages;
        Ok(())
    }

    /// `PRAGMA scion_version`: the version this connection reads.
    pub(crate) fn version(&self) -> VfsResult<u64> {
        Ok(self.view()?.version)
    }

    pub(crate) fn has_writer(&self) -> bool {
        self.writer.is_some()
    }

    pub(crate) fn close(&mut self) {
        if self.writer.take().is_some_and(|w| w.leased) {
            let _ = self
                .scion
                .lease_release_as(&self.target.branch, &self.holder);
        }
    }
}

fn open_error(e: CoreError) -> VfsError {
    VfsError::new(ffi::SQLITE_CANTOPEN, format!("scion: {e}"))
}

/// Page 1 as stored: the WAL bytes say "rollback journal", as every version in the store.
fn normalize_page1(page: &mut [u8]) {
    if page.len() >= 20 {
        page[18] = 1;
        page[19] = 1;
    }
}

/// Page 1 as SQLite sees it: its change counter (and version-valid-for) is the version's
/// number, so a connection's page cache is dropped exactly when the version it reads moved
/// (a rollback included: versions never repeat).
fn present_page1(page: &mut [u8], version: u64) {
    normalize_page1(page);
    if page.len() >= 96 {
        let counter = (version as u32).to_be_bytes();
        page[24..28].copy_from_slice(&counter);
        page[92..96].copy_from_slice(&counter);
    }
}
