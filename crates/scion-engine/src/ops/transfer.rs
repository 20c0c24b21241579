//! Sending versions from one store to another (`scion push`, `pull`, `clone`).
//!
//! Segment ids are random 64-bit numbers and locators name segments by id, so a segment
//! copied verbatim means the same thing in every store: a version travels as the segments
//! its root record, page map and pages live in, and nothing is rewritten.
//!
//! What to send is found without reading whole page maps. The receiving store's head of
//! the branch (`have`) is complete there (a ref is moved only after all its data arrived,
//! and `gc` keeps what refs reach), so the page map of the version sent is walked beside
//! `have`'s, level by level, and only subtrees whose node locators differ are descended:
//! a one-row commit costs a node per level on each side. Segments the walk finds are then
//! asked for at the receiver (a HEAD each, or one listing when there are many); those it
//! lacks are sent. The version graph travels too: the root records of the versions
//! between the head and what the receiver already holds, so that a merge there finds the
//! same base as here.
//!
//! Every segment is checked as it arrives (`scion_format::check_segment`: trailer, footer
//! checksum, and each frame's kind, key, length and content hash) and written create-only,
//! so an interrupted transfer leaves only whole segments, which a rerun finds and skips
//! and the receiver's `gc` sweeps if nothing comes to use them.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use scion_store::{PutMode, StoreError};

use crate::error::{EngineError, EngineResult};
use crate::format::{Locator, Parents, SegmentId};
use crate::progress::Progress;
use crate::Engine;

/// Asking the receiver about more segments than this costs one listing instead of a
/// request each.
const LIST_INSTEAD_OVER: usize = 64;
/// Segments in flight at once to an object store: enough to keep its pipe full.
const SEND_THREADS_CLOUD: usize = 4;
/// Segments in flight at once to a directory: each ends in fsyncs, which more writers
/// than cores only make contend (measured in docs/benchmarks.md).
const SEND_THREADS_LOCAL: usize = 2;

/// What a transfer sends.
#[derive(Debug, Clone, Default)]
pub struct TransferPlan {
    /// Segments the receiver lacks, to send.
    pub missing: Vec<SegmentId>,
    /// Segments the versions need that the receiver already holds outside what `have`
    /// shares (left by an interrupted transfer, or another branch's).
    pub present: Vec<SegmentId>,
    /// Versions of the graph walked below the head, whose root records travel too.
    pub ancestors: u64,
    /// The segments holding the root records of those versions and of the head, by
    /// generation, oldest first: sent in this order, after every other segment, so a
    /// receiver that holds a version's root holds its ancestors' too, and a transfer
    /// cut short and run again may stop its walk down the graph at the first root it
    /// finds there.
    pub root_waves: Vec<Vec<SegmentId>>,
}

impl TransferPlan {
    /// Every segment the sent versions need beyond what `have` shares with them.
    pub fn needed(&self) -> impl Iterator<Item = &SegmentId> {
        self.missing.iter().chain(&self.present)
    }
}

/// What a transfer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TransferStats {
    /// Segments written to the receiver, and their bytes.
    pub objects_sent: u64,
    /// Their bytes.
    pub bytes_sent: u64,
    /// Segments the receiver already held (found before or while sending).
    pub objects_skipped: u64,
}

/// Which segments a store holds, asked once each.
struct Presence<'a> {
    at: &'a Engine,
    listed: Option<HashSet<SegmentId>>,
}

impl<'a> Presence<'a> {
    fn new(at: &'a Engine) -> Self {
        Presence { at, listed: None }
    }

    /// The ids of `ids` the store holds.
    fn held(&mut self, ids: &BTreeSet<SegmentId>) -> EngineResult<HashSet<SegmentId>> {
        if self.listed.is_none() && ids.len() > LIST_INSTEAD_OVER {
            let all = self.at.backend.list("segments/")?;
            self.listed = Some(
                all.iter()
                    .filter_map(|m| SegmentId::from_key(&m.key))
                    .collect(),
            );
        }
        if let Some(listed) = &self.listed {
            return Ok(ids.iter().filter(|i| listed.contains(i)).copied().collect());
        }
        let mut held = HashSet::new();
        for id in ids {
            if self.at.backend.exists(&id.key())? {
                held.insert(*id);
            }
        }
        Ok(held)
    }
}

impl Engine {
    /// What sending `wanted` (versions of this store) to `to` takes, when `to` already
    /// holds `have` whole (its head of the branch, or nothing). The graph is followed from
    /// `wanted[0]` down to versions `to` holds.
    pub fn plan_transfer(
        &self,
        to: &Engine,
        wanted: &[Locator],
        have: Option<Locator>,
    ) -> EngineResult<TransferPlan> {
        let mut needed = BTreeSet::new();
        let mut seen = HashSet::new();
        for w in wanted {
            self.segments_beyond(to, *w, have, &mut seen, &mut needed)?;
        }
        let mut presence = Presence::new(to);
        let mut roots = std::collections::BTreeMap::<u64, BTreeSet<SegmentId>>::new();
        if let Some(head) = wanted.first().filter(|h| Some(**h) != have) {
            self.ancestry_segments(*head, have, &mut presence, &mut roots)?;
        }
        let ancestors = roots
            .values()
            .map(|w| w.len() as u64)
            .sum::<u64>()
            .saturating_sub(1);
        needed.extend(roots.values().flatten());
        let held = presence.held(&needed)?;
        let (present, missing): (Vec<SegmentId>, Vec<SegmentId>) =
            needed.into_iter().partition(|id| held.contains(id));
        // A segment holding several roots goes with the oldest of them.
        let mut placed = HashSet::new();
        let root_waves = roots
            .into_values()
            .map(|w| {
                w.into_iter()
                    .filter(|id| !held.contains(id) && placed.insert(*id))
                    .collect::<Vec<_>>()
            })
            .filter(|w| !w.is_empty())
            .collect();
        Ok(TransferPlan {
            missing,
            present,
            ancestors,
            root_waves,
        })
    }

    /// Add to `out` the segments of `w`'s version that `have`'s (read from `to`) does not
    /// share: the two page maps walked side by side, equal subtrees skipped.
    fn segments_beyond(
        &self,
        to: &Engine,
        w: Locator,
        have: Option<Locator>,
        seen: &mut HashSet<Locator>,
        out: &mut BTreeSet<SegmentId>,
    ) -> EngineResult<()> {
        if have == Some(w) {
            return Ok(());
        }
        out.insert(w.segment);
        let wr = self.reader.root(&w)?;
        let Some(top) = wr.node else {
            return Ok(());
        };
        let hr = have.map(|h| to.reader.root(&h)).transpose()?;
        // Only maps of one shape pair up slot by slot.
        let h_top = hr
            .filter(|h| h.depth == wr.depth && h.fanout_bits == wr.fanout_bits)
            .and_then(|h| h.node);
        let mut frontier = vec![(top, h_top)];
        for level in (0..wr.depth).rev() {
            frontier.retain(|(w, h)| Some(*w) != *h && seen.insert(*w));
            if frontier.is_empty() {
                break;
            }
            let ws: Vec<Locator> = frontier.iter().map(|(w, _)| *w).collect();
            let w_nodes = self.reader.nodes(&ws, level, wr.fanout_bits)?;
            let hs: Vec<Locator> = frontier.iter().filter_map(|(_, h)| *h).collect();
            let mut h_nodes = to.reader.nodes(&hs, level, wr.fanout_bits)?.into_iter();
            let mut next = Vec::new();
            for ((w_loc, h_loc), w_node) in frontier.iter().zip(w_nodes) {
                out.insert(w_loc.segment);
                let h_node = h_loc.and_then(|_| h_nodes.next());
                for (i, slot) in w_node.slots.iter().enumerate() {
                    let Some(slot) = slot else { continue };
                    let theirs = h_node
                        .as_ref()
                        .and_then(|n| n.slots.get(i).copied().flatten());
                    if theirs == Some(*slot) {
                        continue;
                    }
                    if level > 0 {
                        next.push((slot.loc, theirs.map(|t| t.loc)));
                    } else {
                        out.insert(slot.loc.segment);
                        if let Some(base) = slot.base {
                            out.insert(base.segment);
                        }
                    }
                }
            }
            frontier = next;
        }
        Ok(())
    }

    /// Add to `roots`, by generation, the segments holding the root records of `head` and
    /// its ancestors, down to versions `to` holds (or `have`), versions this store no
    /// longer has, and versions written before the graph.
    fn ancestry_segments(
        &self,
        head: Locator,
        have: Option<Locator>,
        presence: &mut Presence<'_>,
        roots: &mut std::collections::BTreeMap<u64, BTreeSet<SegmentId>>,
    ) -> EngineResult<()> {
        let mut seen = HashSet::from([head]);
        let mut frontier = vec![head];
        while !frontier.is_empty() {
            let mut parents = Vec::new();
            for v in frontier {
                let record = match self.reader.root(&v) {
                    Ok(r) => r,
                    // Swept here: the graph, there as here, stops at the gap.
                    Err(_) if !self.backend.exists(&v.segment.key())? => continue,
                    Err(e) => return Err(e),
                };
                let Some(ancestry) = record.ancestry else {
                    roots.entry(0).or_default().insert(v.segment);
                    continue;
                };
                roots
                    .entry(ancestry.generation)
                    .or_default()
                    .insert(v.segment);
                let ps = match ancestry.parents {
                    Parents::None => vec![],
                    Parents::One(p) => vec![p],
                    Parents::Two(a, b) => vec![a, b],
                };
                parents.extend(
                    ps.into_iter()
                        .filter(|p| Some(*p) != have && seen.insert(*p)),
                );
            }
            let ids: BTreeSet<SegmentId> = parents.iter().map(|p| p.segment).collect();
            let held = presence.held(&ids)?;
            frontier = parents
                .into_iter()
                .filter(|p| !held.contains(&p.segment))
                .collect();
        }
        Ok(())
    }

    /// Send `plan.missing` to `to`: each segment read whole, checked, and written
    /// create-only (one already there counts as skipped); the segments of roots last, in
    /// `plan.root_waves` order. `progress` counts segments.
    pub fn send_segments(
        &self,
        to: &Engine,
        plan: &TransferPlan,
        progress: &dyn Progress,
    ) -> EngineResult<TransferStats> {
        let in_waves: HashSet<SegmentId> = plan.root_waves.iter().flatten().copied().collect();
        let first: Vec<SegmentId> = plan
            .missing
            .iter()
            .filter(|id| !in_waves.contains(id))
            .copied()
            .collect();
        let mut stats = TransferStats {
            objects_skipped: plan.present.len() as u64,
            ..Default::default()
        };
        progress.start("sending", plan.missing.len() as u64);
        let mut result = Ok(());
        for batch in std::iter::once(&first).chain(&plan.root_waves) {
            result = self.send_batch(to, batch, &mut stats, progress);
            if result.is_err() {
                break;
            }
        }
        progress.finish();
        result.map(|()| stats)
    }

    /// Send `batch` with a few segments in flight (more to an object store than to a
    /// directory).
    fn send_batch(
        &self,
        to: &Engine,
        batch: &[SegmentId],
        stats: &mut TransferStats,
        progress: &dyn Progress,
    ) -> EngineResult<()> {
        let next = AtomicUsize::new(0);
        let sent = AtomicU64::new(0);
        let bytes = AtomicU64::new(0);
        let skipped = AtomicU64::new(0);
        let failure: Mutex<Option<EngineError>> = Mutex::new(None);
        let worker = || {
            // One buffer a thread, reused segment after segment: no fresh memory to fault
            // in for each 64 MiB.
            let mut buf = Vec::new();
            loop {
                if failure.lock().unwrap().is_some() {
                    return;
                }
                let Some(id) = batch.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return;
                };
                match self.send_one(to, *id, &mut buf) {
                    Ok(Some(n)) => {
                        sent.fetch_add(1, Ordering::Relaxed);
                        bytes.fetch_add(n, Ordering::Relaxed);
                    }
                    Ok(None) => {
                        skipped.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        failure.lock().unwrap().get_or_insert(e);
                        return;
                    }
                }
                progress.advance(1);
            }
        };
        let cloud = ["s3://", "az://"]
            .iter()
            .any(|p| to.location.starts_with(p));
        let threads = if cloud {
            SEND_THREADS_CLOUD
        } else {
            SEND_THREADS_LOCAL
        };
        std::thread::scope(|s| {
            for _ in 0..threads.min(batch.len()) {
                s.spawn(worker);
            }
        });
        stats.objects_sent += sent.into_inner();
        stats.bytes_sent += bytes.into_inner();
        stats.objects_skipped += skipped.into_inner();
        match failure.into_inner().unwrap() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Copy one segment; its size when written, `None` when `to` had it already.
    fn send_one(
        &self,
        to: &Engine,
        id: SegmentId,
        data: &mut Vec<u8>,
    ) -> EngineResult<Option<u64>> {
        let key = id.key();
        let size = self.backend.head(&key)?.size;
        self.backend.get_range_into(&key, 0..size, data)?;
        let data = &data[..];
        crate::format::check_segment(data, id).map_err(|e| {
            EngineError::corrupt(
                &key,
                format!("refused on the way to {}: {}", to.location, e.0),
            )
        })?;
        match to.backend.put(&key, data, PutMode::Create) {
            Ok(_) => Ok(Some(data.len() as u64)),
            Err(StoreError::AlreadyExists { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether every one of `ids` is in this store (a HEAD each, or one listing).
    pub fn holds_segments<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a SegmentId>,
    ) -> EngineResult<bool> {
        let ids: BTreeSet<SegmentId> = ids.into_iter().copied().collect();
        Ok(Presence::new(self).held(&ids)?.len() == ids.len())
    }
}
