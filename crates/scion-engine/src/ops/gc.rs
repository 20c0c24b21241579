//! Garbage collection.
//!
//! Mark: every root reachable from a ref (head, fork point, created version), a
//! checkpoint, or a head-history entry younger than the store's history retention; walk each tree once (shared subtrees are visited once) and collect the
//! segments it uses. Sweep: a segment unreachable at two marks at least a grace period
//! apart, and older than the grace period, is deleted. Any error during the mark deletes
//! nothing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, SystemTime};

use scion_store::{PutMode, StoreError};
use serde::{Deserialize, Serialize};

use crate::clock::{parse_rfc3339, rfc3339, StoreTime};
use crate::error::{EngineError, EngineResult};
use crate::format::{Locator, SegmentId};
use crate::names::BranchRef;
use crate::ops::lease::is_live;
use crate::ops::moves::WorkingFiles;
use crate::Engine;

pub(crate) const GC_STATE_KEY: &str = "gc/state";
/// A destroy whose claim is older than this is presumed dead and finished by `gc`.
const STALE_CLAIM: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct GcState {
    schema: u32,
    /// Segment id -> when a mark first found it unreachable.
    unreachable_since: BTreeMap<String, String>,
}

/// How the store's segments divide into live and reclaimable, from one mark.
#[derive(Debug, Clone, Serialize)]
pub struct SpaceReport {
    /// Segments in the store.
    pub segments: usize,
    /// Segments some version still reachable uses.
    pub live_segments: usize,
    /// Their bytes.
    pub live_bytes: u64,
    /// Bytes of the segments nothing reaches, which `gc` would remove once they are old
    /// enough.
    pub reclaimable_bytes: u64,
}

/// What one `gc` did.
#[derive(Debug, Clone, Serialize)]
pub struct GcReport {
    /// The grace it ran with, in seconds.
    pub grace_secs: u64,
    /// Branches whose TTL passed, destroyed.
    pub reaped: Vec<String>,
    /// Expired, but not reaped: the checkout is open or holds uncheckpointed changes.
    pub kept_in_use: Vec<String>,
    /// Destroys interrupted earlier, finished.
    pub finished_destroys: Vec<String>,
    /// Segments some version still reachable uses.
    pub live_segments: usize,
    /// Their bytes.
    pub live_bytes: u64,
    /// Segments removed.
    pub deleted_segments: usize,
    /// Their bytes.
    pub reclaimed_bytes: u64,
    /// Unreachable, but not yet for a full grace period.
    pub waiting_segments: usize,
    /// Bytes of the segments still waiting.
    pub waiting_bytes: u64,
    /// Temp files of interrupted checkouts and downloads, older than both the grace and
    /// the store's minimum grace.
    pub temp_files_removed: usize,
    /// Bytes of the temp files removed.
    pub temp_bytes_removed: u64,
    /// History objects whose entries had all passed the store's history retention.
    pub history_objects_removed: usize,
    /// Live bytes no branch or checkpoint needs, kept only because the head history (for
    /// `undo` and `restore`) names them, and when they free up.
    pub kept_by_history: HistoryKept,
}

/// What the head history alone keeps from `gc`: the bytes, and when the first and the last
/// of them pass the store's history retention (`scion config --history-retention`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct HistoryKept {
    /// Segments kept only by the history.
    pub segments: usize,
    /// Their bytes.
    pub bytes: u64,
    /// When the first of them passes the retention.
    pub first_free_at: Option<StoreTime>,
    /// When the last of them does.
    pub all_free_at: Option<StoreTime>,
}

impl HistoryKept {
    fn add(&mut self, bytes: u64, free_at: StoreTime) {
        self.segments += 1;
        self.bytes += bytes;
        self.first_free_at = Some(self.first_free_at.map_or(free_at, |t| t.min(free_at)));
        self.all_free_at = Some(self.all_free_at.map_or(free_at, |t| t.max(free_at)));
    }
}

/// What a mark found.
struct Marked {
    live: HashSet<SegmentId>,
    /// Every version the mark started from: heads, fork and import points, checkpoints,
    /// and those the head history keeps.
    roots: Vec<Locator>,
    /// Live segments that only the head history keeps, and when the newest entry naming
    /// each passes the retention.
    history_only: HashMap<SegmentId, StoreTime>,
    expired_history: Vec<String>,
}

/// The segments reachable from the roots walked so far.
#[derive(Default)]
struct LiveWalk {
    live: HashSet<SegmentId>,
    seen_roots: HashSet<Locator>,
    seen_nodes: HashSet<Locator>,
}

impl LiveWalk {
    /// Walk `root_loc`'s page map; the segments it made live that no earlier root had.
    fn walk_root(&mut self, engine: &Engine, root_loc: Locator) -> EngineResult<Vec<SegmentId>> {
        let mut added = Vec::new();
        if !self.seen_roots.insert(root_loc) {
            return Ok(added);
        }
        let mut mark = |seg: SegmentId, live: &mut HashSet<SegmentId>| {
            if live.insert(seg) {
                added.push(seg);
            }
        };
        mark(root_loc.segment, &mut self.live);
        let root = engine.reader.root(&root_loc)?;
        let Some(top) = root.node else {
            return Ok(added);
        };
        let mut frontier = vec![top];
        for level in (0..root.depth).rev() {
            frontier.retain(|l| self.seen_nodes.insert(*l));
            if frontier.is_empty() {
                break;
            }
            let nodes = engine.reader.nodes(&frontier, level, root.fanout_bits)?;
            let mut next = Vec::new();
            for (loc, node) in frontier.iter().zip(nodes) {
                mark(loc.segment, &mut self.live);
                for slot in node.slots.iter().flatten() {
                    mark(slot.loc.segment, &mut self.live);
                    if let Some(base) = slot.base {
                        mark(base.segment, &mut self.live);
                    }
                    if level > 0 {
                        next.push(slot.loc);
                    }
                }
            }
            frontier = next;
        }
        Ok(added)
    }
}

/// What reaping did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReapReport {
    /// Branches whose TTL passed, destroyed.
    pub reaped: Vec<String>,
    /// Expired, but not reaped: the checkout is open or holds uncheckpointed changes.
    pub kept_in_use: Vec<String>,
    /// Destroys interrupted earlier, finished.
    pub finished_destroys: Vec<String>,
}

/// What the store alone decides: which segments are reachable.
impl Engine {
    /// Every segment reachable from a ref, a checkpoint or a head-history entry younger
    /// than the store's retention; and the history objects past it. Refs are listed
    /// before history objects: a move that spills entries, and a destroy, write their
    /// history object before the ref changes, so no entry is missed in between.
    fn mark(&self) -> EngineResult<Marked> {
        let mut roots: Vec<Locator> = Vec::new();
        let mut refs = Vec::new();
        for m in self.backend.list("refs/")? {
            match self.backend.get(&m.key) {
                Ok((bytes, _)) => {
                    let r = crate::refs::Ref::decode(&bytes, &m.key)?;
                    roots.extend([r.root, r.fork_root, r.init_root]);
                    refs.push(r);
                }
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        for m in self.backend.list("checkpoints/")? {
            match self.backend.get(&m.key) {
                Ok((bytes, _)) => roots.push(crate::refs::Checkpoint::decode(&bytes, &m.key)?.root),
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        let mut walk = LiveWalk::default();
        for root in &roots {
            walk.walk_root(self, *root)?;
        }
        // Then what only the head history keeps, newest entry first: each segment is
        // counted for the newest entry that names it, which is when it stops being kept.
        let retention = self.history_retention()?;
        let mut history = self.history_marks(&refs, retention)?;
        history.roots.sort_by_key(|(_, at)| std::cmp::Reverse(*at));
        let mut history_only = HashMap::new();
        for (root, at) in history.roots {
            roots.push(root);
            let free_at = at.saturating_add(retention);
            for seg in walk.walk_root(self, root)? {
                history_only.insert(seg, free_at);
            }
        }
        Ok(Marked {
            live: walk.live,
            roots,
            history_only,
            expired_history: history.expired_objects,
        })
    }

    /// Live and reclaimable bytes (a mark without a sweep).
    pub fn space(&self) -> EngineResult<SpaceReport> {
        let live = self.mark()?.live;
        let segments = self.backend.list("segments/")?;
        let mut live_bytes = 0;
        let mut dead_bytes = 0;
        let mut live_segments = 0;
        for m in &segments {
            match SegmentId::from_key(&m.key) {
                Some(id) if live.contains(&id) => {
                    live_bytes += m.size;
                    live_segments += 1;
                }
                _ => dead_bytes += m.size,
            }
        }
        Ok(SpaceReport {
            segments: segments.len(),
            live_segments,
            live_bytes,
            reclaimable_bytes: dead_bytes,
        })
    }
}

/// Expired: has a TTL, not protected, no live lease, and idle for longer than the TTL.
pub(crate) fn expired(r: &crate::refs::Ref, now: SystemTime) -> bool {
    let Some(ttl) = r.ttl_secs else { return false };
    if r.protected || r.lease.as_ref().is_some_and(|l| is_live(l, now)) {
        return false;
    }
    r.touched_at
        .saturating_add(Duration::from_secs(ttl))
        .as_system_time()
        < now
}

impl Engine {
    /// Reap branches whose TTL passed (keeping, and touching, those whose checkout is open
    /// or holds changes) and finish interrupted destroys: the first step of `gc`, cheap
    /// enough to run on its own on a schedule.
    pub fn reap_expired<G: WorkingFiles>(&self, files: &mut G) -> Result<ReapReport, G::Error> {
        let now = self.store_now()?;
        let mut reaped = Vec::new();
        let mut kept_in_use = Vec::new();
        let mut finished_destroys = Vec::new();
        for db in self.list_databases()? {
            for m in self.backend.list(&crate::refs::refs_prefix(&db))? {
                let Some(branch) = crate::refs::branch_from_key(&db, &m.key) else {
                    continue;
                };
                let b = BranchRef::new(db.clone(), branch);
                let (r, etag) = match self.read_ref_any(&b) {
                    Ok(x) => x,
                    Err(
                        EngineError::BranchNotFound { .. } | EngineError::DatabaseNotFound { .. },
                    ) => continue,
                    Err(e) => return Err(e.into()),
                };
                if let Some(since) = r.destroying_since {
                    if since.saturating_add(STALE_CLAIM).as_system_time() < now {
                        self.finish_destroy(&b, &etag, files)?;
                        finished_destroys.push(b.to_string());
                    }
                    continue;
                }
                if !expired(&r, now) {
                    continue;
                }
                // An expired branch whose checkout is open or holds changes is still in
                // use: its file is never deleted under a connection or with unsaved work.
                if files.in_use(&b, &r)? {
                    // Work in the checkout is activity: the TTL counts from now again.
                    match self.touch(&b, None) {
                        Ok(_) | Err(EngineError::Conflict { .. }) => {}
                        Err(
                            EngineError::BranchNotFound { .. } | EngineError::BeingDestroyed { .. },
                        ) => continue,
                        Err(e) => return Err(e.into()),
                    }
                    kept_in_use.push(b.to_string());
                    continue;
                }
                if self.reap(&b, &r, &etag, files)?.is_some() {
                    reaped.push(b.to_string());
                }
            }
        }
        Ok(ReapReport {
            reaped,
            kept_in_use,
            finished_destroys,
        })
    }

    /// Reap expired branches, finish interrupted destroys, then mark and sweep. A grace
    /// below the store's minimum needs `force`: a commit slower than half of it could
    /// otherwise lose a segment it is about to publish.
    pub fn gc<G: WorkingFiles>(
        &self,
        grace: Duration,
        force: bool,
        files: &mut G,
    ) -> Result<GcReport, G::Error> {
        if grace < self.min_grace() && !force {
            return Err(EngineError::GraceBelowMinimum {
                grace: crate::clock::format_duration(grace.as_secs()),
                minimum: crate::clock::format_duration(self.min_grace().as_secs()),
            }
            .into());
        }
        let ReapReport {
            reaped,
            kept_in_use,
            finished_destroys,
        } = self.reap_expired(files)?;

        let marked_at = self.store_now()?;
        let Marked {
            live,
            roots,
            history_only,
            expired_history,
        } = self.mark()?;
        // The live versions' ancestry outlives the pages swept below.
        self.keep_ancestry(&roots, &live)?;
        let (mut state, state_etag) = match self.backend.get(GC_STATE_KEY) {
            Ok((bytes, etag)) => (
                serde_json::from_slice::<GcState>(&bytes)
                    .map_err(|e| EngineError::corrupt(GC_STATE_KEY, e.to_string()))?,
                Some(etag),
            ),
            Err(StoreError::NotFound { .. }) => (
                GcState {
                    schema: 1,
                    ..Default::default()
                },
                None,
            ),
            Err(e) => return Err(e.into()),
        };
        // The mark saw refs as they were when it started. A commit that published after
        // that is safe only while the sweep follows within half the grace (commits older
        // than that re-check before publishing): a slower mark deletes nothing.
        let now = self.store_now()?;
        let mark_took = now.duration_since(marked_at).unwrap_or_default();
        let sweep_allowed = force || mark_took.saturating_mul(2) <= grace;
        let mut next = BTreeMap::new();
        let mut doomed: Vec<String> = Vec::new();
        let (mut deleted, mut reclaimed, mut waiting, mut waiting_bytes, mut live_bytes) =
            (0, 0, 0, 0, 0);
        let mut kept_by_history = HistoryKept::default();
        for m in self.backend.list("segments/")? {
            let Some(id) = SegmentId::from_key(&m.key) else {
                continue;
            };
            if live.contains(&id) {
                live_bytes += m.size;
                if let Some(free_at) = history_only.get(&id) {
                    kept_by_history.add(m.size, *free_at);
                }
                continue;
            }
            let since = state
                .unreachable_since
                .remove(&id.to_string())
                .and_then(|s| parse_rfc3339(&s))
                .unwrap_or(now);
            let old_enough = |t: SystemTime| t.checked_add(grace).is_some_and(|t| t <= now);
            if sweep_allowed && old_enough(since) && old_enough(m.last_modified) {
                doomed.push(m.key.clone());
                deleted += 1;
                reclaimed += m.size;
            } else {
                next.insert(id.to_string(), rfc3339(since));
                waiting += 1;
                waiting_bytes += m.size;
            }
        }
        // One batched request per thousand segments on S3.
        for chunk in doomed.chunks(1000) {
            self.backend.delete_many(chunk)?;
        }
        // History objects whose every entry passed the retention: nothing reads them as
        // roots any more, and a walk of a history ends where they were.
        let expired_history = if sweep_allowed {
            expired_history
        } else {
            Vec::new()
        };
        let history_objects_removed = expired_history.len();
        for chunk in expired_history.chunks(1000) {
            self.backend.delete_many(chunk)?;
        }
        // Leftovers of interrupted operations in the working files: nothing still writes a
        // temp file whose inode changed longer ago than both the grace and the store's
        // minimum grace. A forced run is one with nothing else at work, and takes the
        // grace alone.
        let temp_age = if force {
            grace
        } else {
            grace.max(self.min_grace())
        };
        let (temp_files_removed, temp_bytes_removed) = files.sweep_leftovers(temp_age)?;
        state.unreachable_since = next;
        let body = serde_json::to_vec(&state).expect("gc state serializes");
        let mode = match state_etag {
            Some(e) => PutMode::Update(e),
            None => PutMode::Create,
        };
        match crate::conditional::put_exact(self.backend.as_ref(), GC_STATE_KEY, &body, mode) {
            // Another gc ran at the same time: its record is as good as ours.
            Ok(_) | Err(StoreError::Conflict { .. } | StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(GcReport {
            grace_secs: grace.as_secs(),
            reaped,
            kept_in_use,
            finished_destroys,
            live_segments: live.len(),
            live_bytes,
            deleted_segments: deleted,
            reclaimed_bytes: reclaimed,
            waiting_segments: waiting,
            waiting_bytes,
            temp_files_removed,
            temp_bytes_removed,
            history_objects_removed,
            kept_by_history,
        })
    }
}
