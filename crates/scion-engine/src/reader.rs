//! Verified reads of frames from the store, with adjacent frames coalesced into one
//! ranged read and decoded nodes cached for the life of the process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use scion_store::{Backend, StoreError};

use crate::error::{EngineError, EngineResult};
use crate::format::{
    decode_frame, decode_frame_with_base, is_delta_frame, FrameKind, Locator, Node, RootRecord,
    Slot,
};
use crate::page_cache::{store_tag, CachedPage, Lookup, PageCache, PageKey};

/// Largest single ranged read when coalescing adjacent frames.
pub(crate) const MAX_RUN_BYTES: u64 = 8 << 20;

#[derive(Debug)]
pub(crate) struct FrameReader {
    backend: Arc<dyn Backend>,
    nodes: Mutex<HashMap<Locator, Arc<Node>>>,
    /// Decoded root records: immutable, small, and read again by every walk of the
    /// version graph.
    roots: Mutex<HashMap<Locator, RootRecord>>,
    /// This store's part of the process's page cache.
    store: u64,
}

/// Decoded root records kept at most; past it the cache starts over (a walk of the
/// version graph reads each root once, so this bounds memory, not correctness).
const MAX_CACHED_ROOTS: usize = 100_000;

/// A decoded, verified page.
pub(crate) struct PageFrame<'a, T> {
    pub tag: &'a T,
    pub raw: Vec<u8>,
    pub hash: u64,
}

impl FrameReader {
    pub fn new(backend: Arc<dyn Backend>, store_id: &str) -> Self {
        Self {
            backend,
            nodes: Mutex::new(HashMap::new()),
            roots: Mutex::new(HashMap::new()),
            store: store_tag(store_id),
        }
    }

    /// The pages behind `slots` (tagged with their page numbers), from the process's page
    /// cache where it has them; the rest are read as `for_each_page` reads them, decoded
    /// once in the process (a page another thread is decoding is waited for) and kept.
    /// Each page is handed to `f` once, in no particular order.
    pub(crate) fn cached_pages(
        &self,
        slots: Vec<(Slot, u32)>,
        mut f: impl FnMut(u32, CachedPage),
    ) -> EngineResult<()> {
        let cache = PageCache::process();
        let key = |slot: &Slot, pgno: u32| PageKey {
            store: self.store,
            frame: slot.loc,
            pgno,
        };
        let mut guards = HashMap::new();
        let mut misses = Vec::new();
        let mut busy = Vec::new();
        for (slot, pgno) in slots {
            match cache.lookup(&key(&slot, pgno)) {
                Lookup::Hit(page) => f(pgno, page),
                Lookup::Miss(guard) => {
                    if let Some(g) = guard {
                        guards.insert(pgno, g);
                    }
                    misses.push((slot, pgno));
                }
                Lookup::Busy => busy.push((slot, pgno)),
            }
        }
        // This thread's own decodes end (kept, or their guards dropped by an error) before
        // it waits for anyone else's, so two readers never wait for each other.
        self.for_each_page(misses, |page| {
            let kept: CachedPage = (Arc::from(page.raw), page.hash);
            cache.decoded(guards.remove(page.tag), &kept);
            f(*page.tag, kept);
            Ok(())
        })?;
        drop(guards);
        for (slot, pgno) in busy {
            match cache.wait(&key(&slot, pgno)) {
                Ok(page) => f(pgno, page),
                Err(guard) => {
                    let (raw, hash) = self.page(&slot, pgno)?;
                    let kept: CachedPage = (Arc::from(raw), hash);
                    cache.decoded(guard, &kept);
                    f(pgno, kept);
                }
            }
        }
        Ok(())
    }

    fn fetch(&self, loc: &Locator, len: u64) -> EngineResult<Vec<u8>> {
        let mut out = Vec::new();
        self.fetch_into(loc, len, &mut out)?;
        Ok(out)
    }

    fn fetch_into(&self, loc: &Locator, len: u64, out: &mut Vec<u8>) -> EngineResult<()> {
        let key = loc.segment.key();
        self.backend
            .get_range_into(&key, loc.offset..loc.offset.saturating_add(len), out)
            .map_err(|e| match e {
                StoreError::NotFound { key } => {
                    EngineError::corrupt(key, "segment is missing from the store")
                }
                StoreError::Other(msg) => EngineError::corrupt(key, msg),
                other => EngineError::Store(other),
            })
    }

    /// Drop any local copy of a segment a read found damaged, so the next read of it goes
    /// to the store. Best effort: a failure only means the retry reads the same copy.
    pub(crate) fn evict(&self, segment: crate::format::SegmentId) {
        if let Err(e) = self.backend.evict(&segment.key()) {
            tracing::debug!("could not drop the local copy of {}: {e}", segment.key());
        }
    }

    fn read_one(&self, loc: &Locator, kind: FrameKind, key: u64) -> EngineResult<(Vec<u8>, u64)> {
        let bytes = self.fetch(loc, loc.len as u64)?;
        match decode_frame(&bytes, kind, key) {
            Ok(x) => Ok(x),
            Err(_) => {
                // A damaged local copy is read again from the store, once.
                self.evict(loc.segment);
                let bytes = self.fetch(loc, loc.len as u64)?;
                decode_frame(&bytes, kind, key).map_err(|e| frame_error(loc, e))
            }
        }
    }

    /// The content hash a page frame records in its header (the page's hash, for a full
    /// frame and a delta alike): 24 bytes read instead of the page, for a commit's
    /// whole-database checksum. A header that is not this page's is read in full, so a
    /// damaged frame is reported as such.
    pub fn page_hash_at(&self, slot: &Slot, pgno: u32) -> EngineResult<u64> {
        let len = (crate::format::FRAME_HEADER_LEN as u64).min(slot.loc.len as u64);
        let h = self.fetch(&slot.loc, len)?;
        let field = |at: usize| {
            h.get(at..at + 8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        if h.first() == Some(&(FrameKind::Page as u8)) && field(8) == Some(pgno as u64) {
            if let Some(hash) = field(16) {
                return Ok(hash);
            }
        }
        Ok(self.page(slot, pgno)?.1)
    }

    pub fn root(&self, loc: &Locator) -> EngineResult<RootRecord> {
        if let Some(r) = self.roots.lock().unwrap().get(loc) {
            return Ok(*r);
        }
        let (raw, _) = self.read_one(loc, FrameKind::Root, 0)?;
        let record = RootRecord::decode(&raw)
            .map_err(|e| EngineError::corrupt(format!("root record {loc}"), e.0))?;
        let mut roots = self.roots.lock().unwrap();
        if roots.len() >= MAX_CACHED_ROOTS {
            roots.clear();
        }
        roots.insert(*loc, record);
        Ok(record)
    }

    pub fn node(&self, loc: &Locator, level: u8, fanout_bits: u8) -> EngineResult<Arc<Node>> {
        if let Some(n) = self.nodes.lock().unwrap().get(loc) {
            return Ok(n.clone());
        }
        let (raw, _) = self.read_one(loc, FrameKind::Node, level as u64)?;
        let node = Arc::new(check_node(&raw, loc, level, fanout_bits)?);
        self.nodes.lock().unwrap().insert(*loc, node.clone());
        Ok(node)
    }

    /// Read many nodes of one level, coalescing adjacent ones.
    pub fn nodes(
        &self,
        locs: &[Locator],
        level: u8,
        fanout_bits: u8,
    ) -> EngineResult<Vec<Arc<Node>>> {
        let mut out: Vec<Option<Arc<Node>>> = vec![None; locs.len()];
        let mut missing = Vec::new();
        {
            let cache = self.nodes.lock().unwrap();
            for (i, l) in locs.iter().enumerate() {
                match cache.get(l) {
                    Some(n) => out[i] = Some(n.clone()),
                    None => missing.push((*l, i)),
                }
            }
        }
        self.for_each_frame(
            missing,
            FrameKind::Node,
            |_| level as u64,
            |frame| {
                let loc = locs[*frame.tag];
                let node = Arc::new(check_node(&frame.raw, &loc, level, fanout_bits)?);
                self.nodes.lock().unwrap().insert(loc, node.clone());
                out[*frame.tag] = Some(node);
                Ok(())
            },
        )?;
        Ok(out
            .into_iter()
            .map(|n| n.expect("every node read"))
            .collect())
    }

    /// Read the frames at `items`, in store order, coalescing frames adjacent in one
    /// segment into a single ranged read; each verified frame is handed to `f`.
    pub(crate) fn for_each_frame<T>(
        &self,
        items: Vec<(Locator, T)>,
        kind: FrameKind,
        key_of: impl Fn(&T) -> u64,
        mut f: impl FnMut(PageFrame<'_, T>) -> EngineResult<()>,
    ) -> EngineResult<()> {
        self.for_each_verified(items, |loc, tag, bytes| {
            let (raw, hash) =
                decode_frame(bytes, kind, key_of(tag)).map_err(|e| Step::damaged(loc, e))?;
            f(PageFrame { tag, raw, hash }).map_err(Step::Failed)
        })
    }

    /// Read the pages behind `slots` (tagged with their page numbers, 1-based), resolving
    /// deltas against their bases; each verified page is handed to `f`.
    ///
    /// A delta's base is read in the same pass as every other frame: a page changed by a
    /// small commit keeps its base among its neighbours' frames in the older segment, so
    /// the run holding them stays one ranged read instead of breaking around the gap.
    pub(crate) fn for_each_page(
        &self,
        slots: Vec<(Slot, u32)>,
        mut f: impl FnMut(PageFrame<'_, u32>) -> EngineResult<()>,
    ) -> EngineResult<()> {
        let mut items: Vec<(Locator, Wanted)> = Vec::with_capacity(slots.len());
        for (slot, pgno) in slots {
            if let Some(base) = slot.base {
                items.push((base, Wanted::Base { pgno }));
            }
            items.push((
                slot.loc,
                Wanted::Page {
                    pgno,
                    base: slot.base,
                },
            ));
        }
        // Delta frames (bytes, locator, base) and decoded bases, resolved after the pass.
        let mut deltas: Vec<(u32, Vec<u8>, Locator, Locator)> = Vec::new();
        let mut bases: HashMap<Locator, Vec<u8>> = HashMap::new();
        self.for_each_verified(items, |loc, wanted, bytes| match *wanted {
            Wanted::Base { pgno } => {
                if is_delta_frame(bytes) {
                    return Err(Step::Failed(EngineError::corrupt(
                        format!("{} at {loc}", loc.segment.key()),
                        "a delta's base is itself a delta",
                    )));
                }
                let (base, _) = decode_frame(bytes, FrameKind::Page, pgno as u64)
                    .map_err(|e| Step::damaged(loc, e))?;
                bases.insert(*loc, base);
                Ok(())
            }
            Wanted::Page {
                pgno,
                base: Some(base),
            } => {
                deltas.push((pgno, bytes.to_vec(), *loc, base));
                Ok(())
            }
            Wanted::Page { pgno, base: None } => {
                if is_delta_frame(bytes) {
                    return Err(Step::Failed(EngineError::corrupt(
                        format!("{} at {loc}", loc.segment.key()),
                        "delta frame without a base in its node",
                    )));
                }
                let (raw, hash) = decode_frame(bytes, FrameKind::Page, pgno as u64)
                    .map_err(|e| Step::damaged(loc, e))?;
                f(PageFrame {
                    tag: &pgno,
                    raw,
                    hash,
                })
                .map_err(Step::Failed)
            }
        })?;
        for (pgno, delta, delta_loc, base_loc) in deltas {
            let base = bases
                .get(&base_loc)
                .expect("every base was read in the pass");
            let (raw, hash) =
                decode_frame_with_base(&delta, FrameKind::Page, pgno as u64, Some(base))
                    .map_err(|e| frame_error(&delta_loc, e))?;
            f(PageFrame {
                tag: &pgno,
                raw,
                hash,
            })?;
        }
        Ok(())
    }

    /// The raw bytes of `len` bytes from `loc`'s offset (a coalesced run of frames), into a
    /// buffer the caller reuses.
    pub(crate) fn run_into(
        &self,
        start: &Locator,
        len: u64,
        out: &mut Vec<u8>,
    ) -> EngineResult<()> {
        self.fetch_into(start, len, out)
    }

    /// The raw bytes of one frame, unverified (callers decode and verify).
    /// The full frame a new delta of page `pgno` (now at `slot`) is taken against, and its
    /// content: the slot's base, or the slot itself when it is a full frame. Deltas are
    /// therefore never more than one deep.
    pub(crate) fn delta_base(&self, slot: &Slot, pgno: u32) -> EngineResult<(Locator, Vec<u8>)> {
        let loc = slot.base.unwrap_or(slot.loc);
        let bytes = self.raw(&loc)?;
        let (raw, _) = decode_frame(&bytes, FrameKind::Page, pgno as u64)
            .map_err(|e| EngineError::corrupt(format!("{} at {loc}", loc.segment.key()), e.0))?;
        Ok((loc, raw))
    }

    pub fn raw(&self, loc: &Locator) -> EngineResult<Vec<u8>> {
        self.fetch(loc, loc.len as u64)
    }

    /// Read one page (resolving a delta).
    pub fn page(&self, slot: &Slot, pgno: u32) -> EngineResult<(Vec<u8>, u64)> {
        let mut out = None;
        self.for_each_page(vec![(*slot, pgno)], |p| {
            out = Some((p.raw, p.hash));
            Ok(())
        })?;
        Ok(out.expect("one page read"))
    }

    /// `for_each_raw`, where `f` tells a frame that failed verification (before it did
    /// anything with it) from any other failure: the run holding a damaged frame is read
    /// again from the store, once, and `f` sees that frame again.
    fn for_each_verified<T>(
        &self,
        mut items: Vec<(Locator, T)>,
        mut f: impl FnMut(&Locator, &T, &[u8]) -> Result<(), Step>,
    ) -> EngineResult<()> {
        items.sort_by_key(|(l, _)| (l.segment, l.offset));
        // Runs of frames adjacent in one segment: (first item, end item, byte end).
        let mut runs = Vec::new();
        let mut i = 0;
        while i < items.len() {
            let start = items[i].0;
            let mut j = i + 1;
            let mut end = start.end();
            while j < items.len()
                && items[j].0.segment == start.segment
                && items[j].0.offset == end
                && end - start.offset + items[j].0.len as u64 <= MAX_RUN_BYTES
            {
                end = items[j].0.end();
                j += 1;
            }
            runs.push((i, j, end));
            i = j;
        }
        if runs.len() > 1 {
            // Scattered runs: let the store start on all of them before the first is read.
            let ranges: Vec<(String, std::ops::Range<u64>)> = runs
                .iter()
                .map(|&(i, _, end)| (items[i].0.segment.key(), items[i].0.offset..end))
                .collect();
            self.backend.prefetch(&ranges);
        }
        for (i, j, end) in runs {
            let start = items[i].0;
            let mut run = self.fetch(&start, end - start.offset)?;
            let mut fetched_again = false;
            for (loc, tag) in &items[i..j] {
                let lo = (loc.offset - start.offset) as usize;
                match f(loc, tag, &run[lo..lo + loc.len as usize]) {
                    Ok(()) => {}
                    Err(Step::Damaged(_)) if !fetched_again => {
                        self.evict(start.segment);
                        run = self.fetch(&start, end - start.offset)?;
                        fetched_again = true;
                        f(loc, tag, &run[lo..lo + loc.len as usize]).map_err(Step::into_error)?;
                    }
                    Err(e) => return Err(e.into_error()),
                }
            }
        }
        Ok(())
    }
}

/// A frame `for_each_page` reads: a page's own frame (full, or a delta against `base`), or
/// the base of a delta.
#[derive(Clone, Copy)]
enum Wanted {
    Page { pgno: u32, base: Option<Locator> },
    Base { pgno: u32 },
}

/// How a callback of `for_each_verified` failed.
enum Step {
    /// The frame's bytes failed verification; nothing was done with them.
    Damaged(EngineError),
    Failed(EngineError),
}

impl Step {
    fn damaged(loc: &Locator, e: crate::format::DecodeError) -> Step {
        Step::Damaged(frame_error(loc, e))
    }
    fn into_error(self) -> EngineError {
        match self {
            Step::Damaged(e) | Step::Failed(e) => e,
        }
    }
}

fn frame_error(loc: &Locator, e: crate::format::DecodeError) -> EngineError {
    EngineError::corrupt(format!("{} at {loc}", loc.segment.key()), e.0)
}

fn check_node(raw: &[u8], loc: &Locator, level: u8, fanout_bits: u8) -> EngineResult<Node> {
    let node = Node::decode(raw).map_err(|e| EngineError::corrupt(format!("node {loc}"), e.0))?;
    if node.level != level || node.fanout_bits != fanout_bits {
        return Err(EngineError::corrupt(
            format!("node {loc}"),
            format!(
                "node is level {} fan-out 2^{}, expected level {level} fan-out 2^{fanout_bits}",
                node.level, node.fanout_bits
            ),
        ));
    }
    Ok(node)
}
