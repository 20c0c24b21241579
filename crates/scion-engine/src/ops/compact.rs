//! Compaction: rewriting a branch head so it reads with few ranged reads. A head made by
//! many small commits keeps each changed page in the small segment of its commit; a scan
//! then reads one frame here, one there. `compact` rewrites the whole head in page order;
//! `Scattered` rewrites only the pages of small segments, into one new segment in page
//! order, so the large segments' runs stay whole and the rewritten pages read as one run.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::commit::Commit;
use crate::error::EngineResult;
use crate::format::{FrameKind, Locator, Parents, SegmentId, Slot};
use crate::history::{HeadMove, HeadOp};
use crate::names::BranchRef;
use crate::ops::moves::WorkingFiles;
use crate::pagemap::{self, Changes, TreeUpdate, DEFAULT_FANOUT_BITS};
use crate::Engine;

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

/// What a compaction did.
#[derive(Debug, Clone, Serialize)]
pub struct CompactReport {
    /// The branch compacted.
    pub branch: BranchRef,
    /// The head's number now (unchanged when nothing was written).
    pub version: u64,
    /// What was rewritten.
    pub scope: CompactScope,
    /// Pages the head holds.
    pub pages: u32,
    /// Pages rewritten (all of them for `All`).
    pub pages_rewritten: u32,
    /// Segments the head used before.
    pub segments_before: usize,
    /// How the head lay before.
    pub before: Fragmentation,
    /// Bytes written to the store.
    pub store_bytes_written: u64,
}

impl Engine {
    /// How the version at `root` lies in the store: one walk of its page map (nodes are
    /// cached), no page read.
    pub fn fragmentation(&self, root: &Locator) -> EngineResult<Fragmentation> {
        let root = self.reader.root(root)?;
        let leaves = pagemap::leaves(&self.reader, root.node, root.depth, root.fanout_bits)?;
        Ok(Fragmentation::of(&leaves).0)
    }

    /// Rewrite `b`'s head into fresh segments, as `scope` says, so that it reads with few
    /// ranged reads and segments only older versions use can go: `All` in page order (full
    /// frames, no deltas), `Scattered` only the pages of small segments. The content is
    /// unchanged: the new head is the old one's only child, holding the same bytes. With
    /// `Scattered` and nothing scattered, nothing is written and the head stays where it
    /// is. `files` are asked before (the head moves: changes never checkpointed would be
    /// stranded, as with promote) and told after.
    pub fn compact<G: WorkingFiles>(
        &self,
        b: &BranchRef,
        force: bool,
        scope: CompactScope,
        files: &mut G,
    ) -> Result<CompactReport, G::Error> {
        let (r, etag) = self.read_ref(b)?;
        self.check_not_leased(b, &r, force)?;
        files.before_rewrite(b, &r, force)?;
        let root = self.reader.root(&r.root)?;
        let leaves = pagemap::leaves(&self.reader, root.node, root.depth, root.fanout_bits)?;
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
            branch: b.clone(),
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
            let mut commit = Commit::begin(self)?;
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
                                Some(_) => Some(self.reader.delta_base(&slot, pgno)?),
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
                        reader: &self.reader,
                        fanout_bits: root.fanout_bits,
                        limit: root.page_count,
                    };
                    record.node =
                        update.apply(writer, root.node, root.depth, root.depth, &changes)?;
                }
            }
            // The same content: the compacted version is the old one's only child.
            record.ancestry = Some(commit.ancestry(self, Parents::One(r.root))?);
            commit.seal(record)
        })?;
        let (new_root, stats) = (sealed.root, sealed.stats);
        let mv = HeadMove::new(HeadOp::Compact);
        let (next, _) = self.publish_head(b, &r, etag, Some(&sealed), &mv, |next| {
            next.root = new_root;
            next.version = r.version + 1;
            Ok(())
        })?;
        files.after_rewrite(b, &r, &next)?;
        Ok(report(next.version, rewrite.len(), stats.bytes))
    }
}

impl Engine {
    /// The pages of a chunk of a page-ordered leaf list, read in one pass (adjacent frames
    /// coalesced), by page number.
    fn read_chunk(&self, chunk: &[(u32, Slot)]) -> EngineResult<BTreeMap<u32, Vec<u8>>> {
        let mut raw_pages = BTreeMap::new();
        let items = chunk.iter().map(|(i, s)| (*s, i + 1)).collect();
        self.reader.for_each_page(items, |p| {
            raw_pages.insert(*p.tag, p.raw);
            Ok(())
        })?;
        Ok(raw_pages)
    }
}
