//! Reading pages of a version lazily, and finding the pages two versions do not share by
//! walking both page maps and skipping every subtree whose locator is equal.

use std::collections::{BTreeSet, HashMap};

use crate::error::EngineResult;
use crate::format::{Node, RootRecord, Slot};
use crate::pagemap;
use crate::reader::FrameReader;

/// A page read by a prefetch: its number and bytes.
type Fetched = (u32, Vec<u8>);

/// How many readers a prefetch runs side by side, and the fewest pages worth a reader.
const PARALLEL_READS: usize = 4;
const MIN_PAGES_PER_READER: usize = 16;

/// One version, read page by page on demand (and counted): from a clean local file of
/// that version where there is one, else from the store.
pub(crate) struct VersionPages<'a> {
    pub reader: &'a FrameReader,
    pub root: RootRecord,
    cache: HashMap<u32, Vec<u8>>,
    pub pages_read: u64,
    local: Option<std::fs::File>,
}

impl<'a> VersionPages<'a> {
    pub fn new(reader: &'a FrameReader, root: RootRecord) -> Self {
        Self {
            reader,
            root,
            cache: HashMap::new(),
            pages_read: 0,
            local: None,
        }
    }

    /// Read pages from `file` (if any), a clean checkout proven to hold exactly this
    /// version.
    pub(crate) fn with_local(mut self, file: Option<std::fs::File>) -> Self {
        self.local = file;
        self
    }

    fn read_local(&mut self, pgno: u32) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let f = self.local.as_ref()?;
        let size = self.root.page_size as usize;
        let mut page = vec![0u8; size];
        f.read_exact_at(&mut page, (pgno as u64 - 1) * size as u64)
            .ok()?;
        Some(page)
    }

    /// Read the pages `pgnos` not read yet in as few store requests as their locations
    /// allow (frames adjacent in a segment come in one ranged read).
    pub(crate) fn prefetch(&mut self, pgnos: &[u32]) -> EngineResult<()> {
        let r = self.root;
        let mut wanted = Vec::new();
        for &pgno in pgnos {
            if self.cache.contains_key(&pgno) || pgno < 1 || pgno > r.page_count {
                continue;
            }
            if self.local.is_some() {
                continue;
            }
            if let Some(slot) =
                pagemap::lookup(self.reader, r.node, r.depth, r.fanout_bits, pgno - 1)?
            {
                wanted.push((slot, pgno));
            }
        }
        // Sorted by location, split into a few contiguous runs read side by side: a remote
        // store answers several requests at once.
        wanted.sort_by_key(|(slot, _)| (slot.loc.segment, slot.loc.offset));
        let reader = self.reader;
        let chunk = wanted
            .len()
            .div_ceil(PARALLEL_READS)
            .max(MIN_PAGES_PER_READER);
        let fetched: Vec<EngineResult<Vec<Fetched>>> = std::thread::scope(|scope| {
            let workers: Vec<_> = wanted
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        let mut pages = Vec::with_capacity(part.len());
                        reader.for_each_page(part.to_vec(), |p| {
                            pages.push((*p.tag, p.raw));
                            Ok(())
                        })?;
                        Ok(pages)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("a page reader does not panic"))
                .collect()
        });
        for part in fetched {
            for (pgno, page) in part? {
                self.pages_read += 1;
                self.cache.insert(pgno, page);
            }
        }
        Ok(())
    }

    pub(crate) fn usable_size(&mut self) -> EngineResult<usize> {
        let p1 = self.page(1)?;
        Ok(self.root.page_size as usize - p1.get(20).copied().unwrap_or(0) as usize)
    }

    /// Page `pgno` (1-based); all zeros past the end or where absent.
    pub fn page(&mut self, pgno: u32) -> EngineResult<Vec<u8>> {
        if let Some(p) = self.cache.get(&pgno) {
            return Ok(p.clone());
        }
        let r = self.root;
        if pgno >= 1 && pgno <= r.page_count {
            if let Some(page) = self.read_local(pgno) {
                self.pages_read += 1;
                self.cache.insert(pgno, page.clone());
                return Ok(page);
            }
        }
        let page = match (pgno >= 1 && pgno <= r.page_count)
            .then(|| pagemap::lookup(self.reader, r.node, r.depth, r.fanout_bits, pgno - 1))
            .transpose()?
            .flatten()
        {
            Some(slot) => {
                self.pages_read += 1;
                self.reader.page(&slot, pgno)?.0
            }
            None => vec![0u8; r.page_size as usize],
        };
        self.cache.insert(pgno, page.clone());
        Ok(page)
    }
}

/// Page numbers whose content may differ between two versions of one page size, found
/// without reading a single page: only map nodes that differ are visited.
pub fn changed_pages(
    reader: &FrameReader,
    a: &RootRecord,
    b: &RootRecord,
) -> EngineResult<BTreeSet<u32>> {
    let mut out = BTreeSet::new();
    let bits = a.fanout_bits;
    if a.page_size != b.page_size || a.fanout_bits != b.fanout_bits {
        out.extend(1..=a.page_count.max(b.page_count));
        return Ok(out);
    }
    let depth = a.depth.max(b.depth).max(1);
    // A shallower tree is slot 0 of virtual nodes above its top.
    let (ta, tb) = (a.node.map(Slot::from), b.node.map(Slot::from));
    walk(
        reader,
        bits,
        (ta, a.depth),
        (tb, b.depth),
        depth - 1,
        0,
        &mut out,
    )?;
    let limit = a.page_count.max(b.page_count);
    out.retain(|p| *p <= limit);
    for p in a.page_count.min(b.page_count) + 1..=limit {
        out.insert(p);
    }
    Ok(out)
}

/// Node at `level` of a tree whose real depth is `depth` (levels above it are virtual).
fn node_at(
    reader: &FrameReader,
    bits: u8,
    slot: Option<Slot>,
    depth: u8,
    level: u8,
) -> EngineResult<Node> {
    match slot {
        None => Ok(Node::empty(level, bits)),
        Some(s) if level >= depth => {
            let mut n = Node::empty(level, bits);
            n.slots[0] = Some(s);
            Ok(n)
        }
        Some(s) => Ok((*reader.node(&s.loc, level, bits)?).clone()),
    }
}

#[allow(clippy::too_many_arguments)]
fn walk(
    reader: &FrameReader,
    bits: u8,
    a: (Option<Slot>, u8),
    b: (Option<Slot>, u8),
    level: u8,
    base: u64,
    out: &mut BTreeSet<u32>,
) -> EngineResult<()> {
    // Equal locators (at the same real level) mean equal subtrees.
    if a.0 == b.0 && a.1 == b.1 {
        return Ok(());
    }
    let na = node_at(reader, bits, a.0, a.1, level)?;
    let nb = node_at(reader, bits, b.0, b.1, level)?;
    let span = 1u64 << (bits as u32 * level as u32);
    for i in 0..na.slots.len() {
        let (sa, sb) = (na.slots[i], nb.slots[i]);
        if sa == sb && a.1 == b.1 {
            continue;
        }
        if sa.is_none() && sb.is_none() {
            continue;
        }
        let lo = base + i as u64 * span;
        if level == 0 {
            if sa != sb {
                out.insert(lo as u32 + 1);
            }
            continue;
        }
        walk(reader, bits, (sa, a.1), (sb, b.1), level - 1, lo, out)?;
    }
    Ok(())
}
