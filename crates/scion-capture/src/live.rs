//! A branch under live capture: its checkout followed by a capturer, what was captured
//! committed through the engine's one commit path, under the branch's lease.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scion_core::checkout::live::LiveClaim;
use scion_core::checkout::{now_ns, Fingerprint, Sidecar};
use scion_core::format::{page_hash, Locator};
use scion_core::ops::pages::PageCommit;
use scion_core::refs::Ref;
use scion_core::WriteStats;
use scion_core::{
    BranchRef, CheckpointName, CoreError, EngineError, LeaseChange, LeaseOutcome, Scion,
};
use scion_store::ETag;
use serde::Serialize;

use crate::capturer::{restore_wal_mode, CaptureCounters, Capturer, Step};
use crate::cursor::{FileId, Mark, Place, MARK_KEY};
use crate::error::{CaptureError, CaptureResult};
use crate::reconcile::ReconcileReport;

/// A generation longer than this many frames is recycled (after a flush, or while
/// capturing, at most every [`RECYCLE_EVERY`]).
const SOFT_FRAMES: u32 = 1000;
const RECYCLE_EVERY: Duration = Duration::from_millis(50);

/// How a live branch began.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Attach {
    /// The checkout was proved to hold the head; capture starts at the WAL's end.
    Clean,
    /// The head's stored cursor still matched the WAL: capture went on from it.
    Resumed,
    /// The checkout was compared page by page with the head; what differed was committed.
    Reconciled(ReconcileReport),
}

/// What a flush made durable.
#[derive(Debug, Clone, Serialize)]
pub struct FlushReport {
    /// The durable version after the flush.
    pub version: u64,
    /// Whether a new version was committed (false: nothing was captured since the last).
    pub committed: bool,
    pub pages: u64,
    /// Bytes of page images committed.
    pub bytes: u64,
    pub transactions: u64,
    pub checkpoint: Option<String>,
    pub store: WriteStats,
}

/// Where a live branch stands.
#[derive(Debug, Clone, Serialize)]
pub struct LiveStatus {
    pub branch: String,
    pub path: PathBuf,
    pub durable_version: u64,
    /// Milliseconds since the oldest captured transaction that is not yet durable (0 when
    /// everything captured is durable).
    pub durable_age_ms: u64,
    pub pending_pages: u64,
    pub pending_bytes: u64,
    pub pending_transactions: u64,
    /// Bytes published in the WAL and not yet captured.
    pub wal_lag_bytes: u64,
    pub transactions_captured: u64,
    pub reconciles: u64,
    pub fenced: Option<String>,
    pub last_flush_error: Option<String>,
}

pub struct LiveBranch {
    /// Dropped after the capturer (fields drop in order): other code of this process
    /// keeps its hands off the file for as long as capture has it open.
    capturer: Option<Capturer>,
    claim: Option<LiveClaim>,
    scion: Arc<Scion>,
    branch: BranchRef,
    holder: String,
    path: PathBuf,
    base: Ref,
    etag: ETag,
    /// Page hashes of `base` where known (index: page number - 1).
    hashes: Vec<Option<u64>>,
    lease_ttl: Duration,
    fenced: Option<String>,
    last_flush_error: Option<String>,
    dirty_since: Option<Instant>,
    reconciles: u64,
    /// The second tier: above this many frames after a flush and a PASSIVE recycle, take
    /// the write lock briefly to let the WAL restart (off unless set).
    barrier_frames: Option<u32>,
    last_recycle: Instant,
    pub attach: Attach,
}

fn file_id(path: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| FileId {
        dev: m.dev(),
        ino: m.ino(),
    })
}

impl LiveBranch {
    /// Take `b`'s lease as `holder`, make sure its checkout holds the head (checking it
    /// out when there is none or it is stale; a checkout with changes of unknown origin
    /// is refused unless `force`), and start capture: resume from the head's cursor when
    /// the WAL still continues it, start clean when the checkout provably is the head, or
    /// reconcile page by page and commit the difference.
    pub fn open(
        scion: Arc<Scion>,
        b: &BranchRef,
        holder: &str,
        lease_ttl: Duration,
        force: bool,
    ) -> CaptureResult<LiveBranch> {
        let base = scion
            .engine()
            .lease(b, holder, LeaseChange::Acquire { ttl: lease_ttl })?
            .head;
        match Self::attach(scion.clone(), b, holder, lease_ttl, force, base) {
            Ok(live) => Ok(live),
            Err(e) => {
                let release = LeaseChange::Release { force: false };
                let _ = scion.engine().lease(b, holder, release);
                Err(e)
            }
        }
    }

    fn attach(
        scion: Arc<Scion>,
        b: &BranchRef,
        holder: &str,
        lease_ttl: Duration,
        force: bool,
        mut base: Ref,
    ) -> CaptureResult<LiveBranch> {
        let path = scion.checkout_path(b);
        let mark = base
            .meta
            .get(MARK_KEY)
            .and_then(|m| m.parse::<Mark>().ok())
            .filter(|m| {
                m.root == base.root
                    && m.place == Some(Place::of(&path))
                    && Some(m.file) == file_id(&path)
            });
        let mut sidecar = Sidecar::load(&path, &base.root)?.filter(|s| s.root == base.root);
        let etag;
        if mark.is_some() || sidecar.is_some() {
            // Resumed on a file this attach does not check out: it is recorded all the same
            // (the session's lease keeps the head where the file says meanwhile).
            (base, etag) = scion.record_checkout(b)?;
        } else {
            // Everything that may open and close the file happens before capture opens.
            scion.checkout(b, force)?;
            (base, etag) = scion.engine().read_ref(b)?;
            sidecar = Sidecar::load(&path, &base.root)?.filter(|s| s.root == base.root);
            if sidecar.is_none() {
                return Err(CoreError::UnknownCheckout {
                    path,
                    branch: b.clone(),
                }
                .into());
            }
        }
        let claim = scion_core::checkout::live::claim(&path);
        let mut capturer = match Capturer::open(&path) {
            Err(CaptureError::NotWal { .. }) => {
                // Switched out of WAL mode while nothing captured it: switch it back
                // (refused while another connection has it open) and reconcile below.
                tracing::warn!(path = %path.display(), "checkout left WAL mode; switching it back");
                restore_wal_mode(&path)?;
                Capturer::open(&path)?
            }
            other => other?,
        };
        let mut hashes: Vec<Option<u64>> = match &sidecar {
            Some(s) => s.hashes.iter().map(|h| Some(*h)).collect(),
            None => vec![None; base.page_count as usize],
        };
        let resumed = match mark.as_ref().filter(|m| m.file == capturer.file()) {
            Some(m) => capturer.resume(m.cursor, base.page_count)?,
            None => false,
        };
        let attach = if resumed {
            Attach::Resumed
        } else if sidecar.as_ref().is_some_and(|s| {
            Fingerprint::of(&path)
                .ok()
                .flatten()
                .is_some_and(|fp| s.proves_unmodified(&fp))
        }) && capturer.start_clean(base.page_count)?
        {
            Attach::Clean
        } else {
            let full = complete(&scion, &base.root, &mut hashes)?;
            Attach::Reconciled(capturer.reconcile(&full)?)
        };
        let mut live = LiveBranch {
            scion,
            branch: b.clone(),
            holder: holder.to_string(),
            path,
            capturer: Some(capturer),
            claim,
            base,
            etag,
            hashes,
            lease_ttl,
            fenced: None,
            last_flush_error: None,
            dirty_since: None,
            reconciles: u64::from(matches!(attach, Attach::Reconciled(_))),
            barrier_frames: None,
            last_recycle: Instant::now(),
            attach,
        };
        if !live.capturer().pending().is_empty() {
            live.dirty_since = Some(Instant::now());
            live.flush(None)?;
        }
        Ok(live)
    }

    /// Turn the second tier on above `frames` frames (or off with `None`).
    pub fn set_barrier_frames(&mut self, frames: Option<u32>) {
        self.barrier_frames = frames;
    }

    fn capturer(&mut self) -> &mut Capturer {
        self.capturer.as_mut().expect("open until closed")
    }

    pub fn branch(&self) -> &BranchRef {
        &self.branch
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    pub fn durable_version(&self) -> u64 {
        self.base.version
    }

    pub fn fenced(&self) -> Option<&str> {
        self.fenced.as_deref()
    }

    pub fn counters(&self) -> CaptureCounters {
        self.capturer
            .as_ref()
            .map(|c| c.counters)
            .unwrap_or_default()
    }

    /// Capture what was published since the last look; a WAL that no longer continues
    /// the cursor is reconciled against the durable version.
    pub fn poll(&mut self) -> CaptureResult<Step> {
        self.check_fenced()?;
        let was_empty = self.capturer().pending().is_empty();
        let mut step = self.capturer().catch_up()?;
        if matches!(step, Step::Captured { .. }) {
            // Pass the pin on at once: a pin left behind keeps writers' own (PASSIVE)
            // autocheckpoints from copying past it, so the WAL stays over their threshold
            // and every commit of theirs tries again. Capture is at the published end, so
            // whatever they copy or restart is already captured.
            // A WAL grown past the threshold is recycled now rather than at the next flush:
            // the sooner it restarts, the sooner writers overwrite its space instead of
            // growing the file (an append costs a writer's fsync a journal commit).
            let next = if self.last_recycle.elapsed() >= RECYCLE_EVERY {
                self.last_recycle = Instant::now();
                self.recycle_step()?
            } else {
                self.capturer().rotate_pin()?
            };
            if matches!(next, Step::Break(_)) {
                step = next;
            }
        }
        if let Step::Break(reason) = step {
            tracing::warn!(branch = %self.branch, %reason, "capture cannot continue its cursor; reconciling");
            let full = complete(&self.scion, &self.base.root, &mut self.hashes)?;
            self.capturer().reconcile(&full)?;
            self.reconciles += 1;
        }
        if was_empty && !self.capturer().pending().is_empty() {
            self.dirty_since = Some(Instant::now());
        }
        Ok(step)
    }

    fn check_fenced(&self) -> CaptureResult<()> {
        match &self.fenced {
            Some(reason) => Err(CaptureError::Fenced {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Capture everything published so far and commit it: every transaction whose commit
    /// returned before this call is in the returned version. With `checkpoint`, the
    /// durable version is also named.
    pub fn flush(
        &mut self,
        checkpoint: Option<(&CheckpointName, BTreeMap<String, String>)>,
    ) -> CaptureResult<FlushReport> {
        self.poll()?;
        let pending = self.capturer().pending();
        let (transactions, cursor, dirty) =
            (pending.transactions, pending.cursor, !pending.is_empty());
        let mut report = FlushReport {
            version: self.base.version,
            committed: false,
            pages: 0,
            bytes: 0,
            transactions,
            checkpoint: None,
            store: WriteStats::default(),
        };
        if dirty {
            let file = self.capturer().file();
            let place = Place::of(&self.path);
            let changes = self.capturer().pending_mut().take_changes();
            let hashes = &self.hashes;
            let known = |pgno: u32| hashes.get(pgno as usize - 1).copied().flatten();
            let mark = |root: &Locator| {
                let mark = Mark {
                    root: *root,
                    place: Some(place),
                    file,
                    cursor,
                };
                BTreeMap::from([(MARK_KEY.to_string(), mark.to_string())])
            };
            let committed = self.scion.engine().commit_pages(
                PageCommit::onto(&self.branch, &self.base, self.etag.clone(), &changes)
                    .from_checkout()
                    .with_known_hashes(&known)
                    .with_meta(&mark),
            );
            let (r, etag, done) = match committed {
                Ok(c) => c,
                Err(e) => {
                    // Nothing is dropped before it is durable: the pages go back.
                    self.capturer().pending_mut().restore(changes);
                    return Err(self.flush_failed(e));
                }
            };
            let zero = page_hash(&vec![0u8; changes.page_size as usize]);
            self.hashes.resize(done.page_count as usize, Some(zero));
            for (pgno, h) in &done.hashes {
                self.hashes[*pgno as usize - 1] = Some(*h);
            }
            (self.base, self.etag) = (r, etag);
            self.capturer().committed();
            self.dirty_since = None;
            self.last_flush_error = None;
            report.version = done.version;
            report.committed = true;
            report.pages = done.pages;
            report.bytes = done.pages * changes.page_size as u64;
            report.store = done.store;
        }
        if let Some((name, meta)) = checkpoint {
            self.scion.engine().name_version(
                &self.branch,
                name,
                self.base.root,
                self.base.version,
                meta,
            )?;
            report.checkpoint = Some(format!("{}@{name}", self.branch));
        }
        if report.committed {
            self.recycle()?;
        }
        Ok(report)
    }

    /// A commit that failed: a changed head or lease fences the session; anything else is
    /// kept as the last flush error and retried by the next flush.
    fn flush_failed(&mut self, e: EngineError) -> CaptureError {
        if let EngineError::Conflict { .. } = e {
            let reason = "the branch's head or lease changed under the session".to_string();
            self.fenced = Some(reason.clone());
            return CaptureError::Fenced { reason };
        }
        self.last_flush_error = Some(e.to_string());
        e.into()
    }

    /// Whether captured transactions wait for a flush.
    pub fn is_dirty(&self) -> bool {
        self.capturer
            .as_ref()
            .is_some_and(|c| !c.pending().is_empty())
    }

    /// After a flush: pass the pin on, and let the WAL restart when it grew long.
    fn recycle(&mut self) -> CaptureResult<()> {
        let step = self.recycle_step()?;
        if !matches!(step, Step::Idle) && !self.capturer().pending().is_empty() {
            self.dirty_since.get_or_insert_with(Instant::now);
        }
        Ok(())
    }

    fn recycle_step(&mut self) -> CaptureResult<Step> {
        // With the second tier on, a WAL bound for the barrier is first copied into the
        // database without it: the barrier then copies only what was committed since, and
        // holds the write lock for a moment instead of a whole checkpoint. A WAL that grew
        // past the limit only after that look waits for the next step.
        let threshold = self
            .barrier_frames
            .map_or(SOFT_FRAMES, |b| b.min(SOFT_FRAMES));
        let long = self
            .capturer()
            .published()?
            .is_some_and(|p| p.max_frame >= threshold);
        if !long {
            return self.capturer().rotate_pin();
        }
        let step = self.capturer().recycle()?;
        let Some(limit) = self.barrier_frames else {
            return Ok(step);
        };
        if matches!(step, Step::Break(_) | Step::InFlight) {
            return Ok(step);
        }
        let still = self
            .capturer()
            .published()?
            .is_some_and(|p| p.max_frame >= limit);
        if still {
            if let Some(s) = self.capturer().recycle_with_barrier()? {
                return Ok(s);
            }
        }
        Ok(step)
    }

    /// Extend the lease; a lease lost to someone else fences the session.
    pub fn renew(&mut self) -> CaptureResult<()> {
        self.check_fenced()?;
        let renew = LeaseChange::Renew {
            epoch: self.base.epoch,
            ttl: self.lease_ttl,
        };
        match self.scion.engine().lease(&self.branch, &self.holder, renew) {
            Ok(LeaseOutcome {
                head: r, tag: etag, ..
            }) if r.root == self.base.root => {
                (self.base, self.etag) = (r, etag);
                Ok(())
            }
            Ok(_) | Err(EngineError::Conflict { .. }) | Err(EngineError::BranchNotFound { .. }) => {
                let reason = "the branch's lease was taken or the branch is gone".to_string();
                self.fenced = Some(reason.clone());
                Err(CaptureError::Fenced { reason })
            }
            Err(e) => Err(e.into()),
        }
    }

    pub fn status(&mut self) -> LiveStatus {
        let lag = self.capturer().lag_bytes().unwrap_or(0);
        let counters = self.counters();
        let pending = self.capturer.as_ref().expect("open until closed").pending();
        LiveStatus {
            branch: self.branch.to_string(),
            path: self.path.clone(),
            durable_version: self.base.version,
            durable_age_ms: self
                .dirty_since
                .map_or(0, |t| t.elapsed().as_millis() as u64),
            pending_pages: pending.pages.len() as u64,
            pending_bytes: pending.bytes(),
            pending_transactions: pending.transactions,
            wal_lag_bytes: lag,
            transactions_captured: counters.transactions,
            reconciles: self.reconciles,
            fenced: self.fenced.clone(),
            last_flush_error: self.last_flush_error.clone(),
        }
    }

    /// Flush, stop capturing, give the lease up and record the checkout as holding the
    /// durable version (a fenced session leaves its record alone: the file may hold
    /// changes no version has).
    pub fn close(mut self) -> CaptureResult<FlushReport> {
        let flushed = self.flush(None);
        // What the session captured of the WAL: the record vouches for no frame past it.
        let captured = self.capturer.as_ref().and_then(|c| c.cursor());
        let wal_path = self.capturer.as_ref().map(|c| c.wal_path.clone());
        // Connections first, then the descriptors: before anything else looks at the file.
        self.capturer = None;
        self.claim = None;
        let _ = self.scion.engine().lease(
            &self.branch,
            &self.holder,
            LeaseChange::Release { force: false },
        );
        let report = flushed?;
        let hashes = complete(&self.scion, &self.base.root, &mut self.hashes)?;
        // Stamped once every connection of the session is closed, then fingerprinted: a
        // write after the stamp moves an mtime past it.
        let stamp = now_ns();
        if let Some(mut fingerprint) = Fingerprint::of(&self.path)? {
            let wal_captured = match &wal_path {
                Some(w) => only_captured_frames(w, captured, self.base.page_size, &fingerprint)?,
                None => fingerprint.wal_size == 0,
            };
            if !wal_captured {
                // A WAL with frames the session never saw proves nothing: recorded as no
                // WAL can be, so the next look hashes the file.
                fingerprint.wal_mtime_ns = i64::MIN;
            }
            let record = Sidecar {
                page_size: self.base.page_size,
                root: self.base.root,
                version: self.base.version,
                fingerprint,
                stamp_ns: stamp,
                hashes,
            };
            record.store(&self.path)?;
        }
        Ok(report)
    }
}

/// Whether the WAL at `wal` (as `seen` fingerprinted it) holds only frames of the
/// generation `captured` names, and none past it: WAL frames are only appended until a
/// restart, which draws new salts.
fn only_captured_frames(
    wal: &Path,
    captured: Option<crate::cursor::Cursor>,
    page_size: u32,
    seen: &Fingerprint,
) -> CaptureResult<bool> {
    if seen.wal_size == 0 {
        return Ok(true);
    }
    let Some(c) = captured else {
        return Ok(false);
    };
    let Some(file) = crate::walfile::WalFile::open(wal).map_err(crate::capturer::io_err(wal))?
    else {
        return Ok(false);
    };
    let header = file.header().map_err(crate::capturer::io_err(wal))?;
    let end = crate::walfile::frame_offset(c.frame + 1, page_size);
    Ok(header.is_some_and(|h| h.salts == c.salts) && seen.wal_size == end)
}

/// Every page hash of the version at `root`, reading the store for the ones not known.
fn complete(
    scion: &Scion,
    root: &Locator,
    hashes: &mut Vec<Option<u64>>,
) -> CaptureResult<Vec<u64>> {
    if hashes.iter().any(Option::is_none) {
        let all = scion.engine().page_hashes(root)?;
        *hashes = all.iter().map(|h| Some(*h)).collect();
    }
    Ok(hashes.iter().map(|h| h.expect("completed")).collect())
}
