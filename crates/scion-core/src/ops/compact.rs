//! Compaction: rewriting a branch head so it reads with few ranged reads. A head made by
//! many small commits keeps each changed page in the small segment of its commit; a scan
//! then reads one frame here, one there. `compact` rewrites the whole head in page order;
//! `Scattered` rewrites only the pages of small segments, into one new segment in page
//! order, so the large segments' runs stay whole and the rewritten pages read as one run.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::checkout::{CheckoutState, Sidecar};
use crate::commit::Commit;
use crate::error::{CoreError, CoreResult, EngineError, EngineResult};
use crate::format::{FrameKind, Locator, Parents, SegmentId, Slot};
use crate::history::{HeadMove, HeadOp};
use crate::names::BranchRef;
use crate::pagemap::{self, Changes, TreeUpdate, DEFAULT_FANOUT_BITS};
use crate::Scion;

/// A segment holding fewer of a version's pages than this is "small": reading its pages
/// costs a read each, where a large segment's pages come in long runs (64 pages of
/// 4 KiB is 256 KiB, a read worth making on its own).
pub(crate) const SMALL_SEGMENT_PAGES: usize = 64;

/// What `compact` rewrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CompactScope {
    /// Every page, in page order, as full frames: the head reads sequentially and shares
    /// no segment with older versions (a fork's head then stops sharing with its parent).
    #[default]
    All,
    /// Only the pages in small segments (fewer than 64 of the head's
    /// pages), into one new segment in page order; deltas stay deltas against the same
    /// bases. Cheap, and pages shared with other branches stay shared.
    Scattered,
}

/// How a branch head's pages lie in the store.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Fragmentation {
    /// Pages the head stores (all-zero pages are not stored).
    pub pages: u32,
    /// Segments holding them.
    pub segments: usize,
    /// Pages in small segments (fewer than 64 of the head's pages each).
    pub scattered_pages: u32,
    /// Those small segments.
    pub small_segments: usize,
}

impl Fragmentation {
    /// The share of the head's pages in small segments, 0 to 1.
    pub fn scattered_share(&self) -> f64 {
        if self.pages == 0 {
            0.0
        } else {
            self.scattered_pages as f64 / self.pages as f64
        }
    }

    fn of(leaves: &[(u32, Slot)]) -> (Fragmentation, HashSet<SegmentId>) {
        let mut per_segment: HashMap<SegmentId, usize> = HashMap::new();
        for (_, s) in leaves {
            *per_segment.entry(s.loc.segment).or_default() += 1;
        }
        let small: HashSet<SegmentId> = per_segment
            .iter()
            .filter(|(_, n)| **n < SMALL_SEGMENT_PAGES)
            .map(|(id, _)| *id)
            .collect();
        let scattered_pages = small.iter().map(|id| per_segment[id]).sum::<usize>();
        let f = Fragmentation {
            pages: leaves.len() as u32,
            segments: per_segment.len(),
            scattered_pages: scattered_pages as u32,
            small_segments: small.len(),
        };
        (f, small)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CompactReport {
    pub branch: String,
    pub version: u64,
    pub scope: CompactScope,
    /// Pages the head holds.
    pub pages: u32,
    /// Pages rewritten (all of them for `All`).
    pub pages_rewritten: u32,
    pub segments_before: usize,
    pub before: Fragmentation,
    pub store_bytes_written: u64,
}

impl Scion {
    /// How `b`'s head lies in the store: one walk of its page map (nodes are cached), no
    /// page read.
    pub fn fragmentation(&self, b: &BranchRef) -> CoreResult<Fragmentation> {
        let (r, _) = self.engine.read_ref(b)?;
        let root = self.engine.reader.root(&r.root)?;
        let leaves = pagemap::leaves(&self.engine.reader, root.node, root.depth, root.fanout_bits)?;
        Ok(Fragmentation::of(&leaves).0)
    }

    /// Rewrite a branch head into fresh segments in page order (full frames, no deltas),
    /// so that it reads sequentially and segments only older versions use can go.
    pub fn compact(&self, b: &BranchRef, force: bool) -> CoreResult<CompactReport> {
        self.compact_scope(b, force, CompactScope::All)
    }

    /// [`Scion::compact`] of what `scope` names. The content is unchanged: the new head is
    /// the old one's only child, holding the same bytes. With `Scattered` and nothing
    /// scattered, nothing is written and the head stays where it is.
    pub fn compact_scope(
        &self,
        b: &BranchRef,
        force: bool,
        scope: CompactScope,
    ) -> CoreResult<CompactReport> {
        let (r, etag) = self.engine.read_ref(b)?;
        self.engine.check_not_leased(b, &r, force)?;
        // Compaction moves the head: changes never checkpointed would be stranded in a
        // file made from the old version, as with promote.
        let path = self.checkout_path(b);
        let judged = self.inspect(&path, &r.root)?;
        let state = judged.state;
        if !force {
            crate::checkout::refuse_unsaved(&judged, &path, b)?;
        }
        let root = self.engine.reader.root(&r.root)?;
        let leaves = pagemap::leaves(&self.engine.reader, root.node, root.depth, root.fanout_bits)?;
        let (before, small) = Fragmentation::of(&leaves);
        let rewrite: Vec<(u32, Slot)> = match scope {
            CompactScope::All => leaves.clone(),
            CompactScope::Scattered => leaves
                .iter()
                .filter(|(_, s)| small.contains(&s.loc.segment))
                .copied()
                .collect(),
        };
        let report = |version, pages_rewritten: usize, bytes| CompactReport {
            branch: b.to_string(),
            version,
            scope,
            pages: root.page_count,
            pages_rewritten: pages_rewritten as u32,
            segments_before: before.segments,
            before,
            store_bytes_written: bytes,
        };
        // One small segment rewritten is one small segment again: nothing to gain.
        if scope == CompactScope::Scattered && before.small_segments < 2 {
            return Ok(report(r.version, 0, 0));
        }
        let sealed = crate::retry::with_fresh_ids(|| {
            let mut commit = Commit::begin(&self.engine)?;
            let writer = &mut commit.writer;
            let mut record = root;
            match scope {
                CompactScope::All => {
                    let mut pages: Vec<Option<Locator>> = vec![None; root.page_count as usize];
                    // Chunks of the page-ordered leaf list: reads coalesce within a chunk,
                    // memory stays bounded, and pages are written in page order.
                    for chunk in rewrite.chunks(1024) {
                        for (pgno, raw) in self.read_chunk(chunk)? {
                            let (loc, _) = writer.add(FrameKind::Page, pgno as u64, &raw)?;
                            pages[pgno as usize - 1] = Some(loc);
                        }
                    }
                    let (node, depth) = pagemap::build(writer, &pages, DEFAULT_FANOUT_BITS)?;
                    record.node = node;
                    record.depth = if node.is_some() { depth } else { 0 };
                    record.fanout_bits = DEFAULT_FANOUT_BITS;
                }
                CompactScope::Scattered => {
                    let mut changes = Changes::new();
                    for chunk in rewrite.chunks(1024) {
                        let slots: HashMap<u32, Slot> =
                            chunk.iter().map(|(i, s)| (i + 1, *s)).collect();
                        for (pgno, raw) in self.read_chunk(chunk)? {
                            let slot = slots[&pgno];
                            // A delta stays a delta against the same base, which stays in
                            // its large segment's run.
                            let base = match slot.base {
                                Some(_) => Some(self.engine.reader.delta_base(&slot, pgno)?),
                                None => None,
                            };
                            let (new, _) = writer.add_page(
                                pgno,
                                &raw,
                                base.as_ref().map(|(l, b)| (*l, b.as_slice())),
                            )?;
                            changes.insert(pgno - 1, Some(new));
                        }
                    }
                    let update = TreeUpdate {
                        reader: &self.engine.reader,
                        fanout_bits: root.fanout_bits,
                        limit: root.page_count,
                    };
                    record.node =
                        update.apply(writer, root.node, root.depth, root.depth, &changes)?;
                }
            }
            // The same content: the compacted version is the old one's only child.
            record.ancestry = Some(commit.ancestry(&self.engine, Parents::One(r.root))?);
            commit.seal(record)
        })?;
        let (new_root, stats) = (sealed.root, sealed.stats);
        let mv = HeadMove::new(HeadOp::Compact);
        let (next, _) = self
            .engine
            .publish_head(b, &r, etag, Some(&sealed), &mv, |next| {
                next.root = new_root;
                next.version = r.version + 1;
                Ok(())
            })?;
        // A clean checkout holds the same bytes: point its record at the new root.
        if state == CheckoutState::Clean {
            if let Some(mut s) = Sidecar::load(&path, &r.root)? {
                s.root = new_root;
                s.version = next.version;
                s.store(&path)?;
            }
        }
        Ok(report(next.version, rewrite.len(), stats.bytes))
    }
}

impl Scion {
    /// The pages of a chunk of a page-ordered leaf list, read in one pass (adjacent frames
    /// coalesced), by page number.
    fn read_chunk(&self, chunk: &[(u32, Slot)]) -> EngineResult<BTreeMap<u32, Vec<u8>>> {
        let mut raw_pages = BTreeMap::new();
        let items = chunk.iter().map(|(i, s)| (*s, i + 1)).collect();
        self.engine.reader.for_each_page(items, |p| {
            raw_pages.insert(*p.tag, p.raw);
            Ok(())
        })?;
        Ok(raw_pages)
    }
}

/// When the janitor compacts a branch on its own (`Scion::compact_fragmented`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FragmentationPolicy {
    /// Compact when at least this share (0 to 1) of the head's pages lie in small segments.
    pub scattered_share: f64,
    /// ... and the head has not moved for this long: a writer mid-transaction on the
    /// branch would otherwise find the head moved under it at its commit.
    pub idle: std::time::Duration,
}

/// What one sweep of `compact_fragmented` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FragmentationSweep {
    /// Branches looked at.
    pub branches: usize,
    pub compacted: Vec<CompactReport>,
    /// Fragmented past the share, but left alone: leased, holding unsaved changes in a
    /// checkout, or moved meanwhile (`branch: reason`).
    pub skipped: Vec<String>,
}

impl Scion {
    /// Compact (scattered pages only) every branch whose head is fragmented past
    /// `policy` and idle, never one under a live lease or with unsaved checkout changes.
    /// `judged` remembers heads already found not fragmented enough (branch to head root),
    /// so a daemon sweeping every round walks each head's page map once, not every round.
    pub fn compact_fragmented(
        &self,
        policy: FragmentationPolicy,
        judged: &mut HashMap<String, Locator>,
    ) -> CoreResult<FragmentationSweep> {
        let now = self.engine.store_now()?;
        let mut sweep = FragmentationSweep::default();
        let mut seen = HashSet::new();
        for db in self.engine.list_databases()? {
            for (branch, r) in self.engine.list_branches(&db)? {
                if r.destroying_since.is_some() {
                    continue;
                }
                sweep.branches += 1;
                let b = BranchRef::new(db.clone(), branch);
                let key = b.to_string();
                seen.insert(key.clone());
                if judged.get(&key) == Some(&r.root) {
                    continue;
                }
                // Idle: no commit, fork or touch within the window (a fresh fork of an old
                // version is activity, though its head was made long ago).
                let root = self.engine.reader.root(&r.root)?;
                let made_at = std::time::UNIX_EPOCH
                    + std::time::Duration::from_millis(
                        root.ancestry.as_ref().map_or(0, |a| a.made_at_ms),
                    );
                let last = made_at
                    .max(r.created_at.as_system_time())
                    .max(r.touched_at.as_system_time());
                if now.duration_since(last).unwrap_or_default() < policy.idle {
                    continue;
                }
                let leaves =
                    pagemap::leaves(&self.engine.reader, root.node, root.depth, root.fanout_bits)?;
                let (f, _) = Fragmentation::of(&leaves);
                if f.small_segments < 2 || f.scattered_share() < policy.scattered_share {
                    judged.insert(key, r.root);
                    continue;
                }
                match self.compact_scope(&b, false, CompactScope::Scattered) {
                    Ok(report) => sweep.compacted.push(report),
                    Err(e) if left_alone(&e) => sweep.skipped.push(format!("{b}: {e}")),
                    Err(e) => return Err(e),
                }
            }
        }
        // Branches gone since: forget them.
        judged.retain(|k, _| seen.contains(k));
        Ok(sweep)
    }
}

/// Refusals that mean "someone is using this branch": the sweep leaves it for later.
fn left_alone(e: &CoreError) -> bool {
    matches!(
        e,
        CoreError::DirtyCheckout { .. }
            | CoreError::UnknownCheckout { .. }
            | CoreError::CheckoutBusy { .. }
            | CoreError::Engine(
                EngineError::LeaseHeld { .. }
                    | EngineError::Conflict { .. }
                    | EngineError::BeingDestroyed { .. }
                    | EngineError::BranchNotFound { .. }
            )
    )
}
