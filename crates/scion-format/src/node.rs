//! A page-map node: `2^fanout_bits` slots, each empty or holding a locator. Leaves (level
//! 0) point at page frames, interior nodes at child node frames.

use super::bytes::{err, put_varint, unzigzag, zigzag, Cursor};
use super::{DecodeError, Locator, SegmentId};

pub(crate) const NODE_FORMAT_VERSION: u8 = 1;
const MAX_FANOUT_BITS: u8 = 10;

/// One slot's content: the frame, and for a page stored as a delta, the full frame of
/// the same page it applies to. Bases are listed in the node so that reachability (GC)
/// never has to read page frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot {
    /// The frame: a page, or a child node.
    pub loc: Locator,
    /// For a page stored as a delta, the full frame it applies to.
    pub base: Option<Locator>,
}

impl From<Locator> for Slot {
    fn from(loc: Locator) -> Self {
        Slot { loc, base: None }
    }
}

/// A page-map node: `2^fanout_bits` slots of pages (level 0) or of child nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// 0 for a leaf, whose slots are pages; above, slots are child nodes.
    pub level: u8,
    /// The node has `2^fanout_bits` slots.
    pub fanout_bits: u8,
    /// The slots; `None` for pages (or subtrees) that are all zeros.
    pub slots: Vec<Option<Slot>>,
}

impl Node {
    /// A node of `level` with every slot empty.
    pub fn empty(level: u8, fanout_bits: u8) -> Self {
        Node {
            level,
            fanout_bits,
            slots: vec![None; 1 << fanout_bits],
        }
    }

    /// Whether no slot holds anything.
    pub fn is_empty(&self) -> bool {
        self.slots.iter().all(|s| s.is_none())
    }

    /// Segment table, presence bitmap, delta bitmap, then per present slot its locator
    /// (segment index, offset as a zigzag delta from where the previous locator in the
    /// same segment ended, length) and, for a delta, its base's locator the same way.
    /// Frames written together are adjacent, so most offsets cost one byte.
    pub fn encode(&self) -> Vec<u8> {
        let mut segs: Vec<SegmentId> = Vec::new();
        for slot in self.slots.iter().flatten() {
            for loc in std::iter::once(&slot.loc).chain(slot.base.iter()) {
                if !segs.contains(&loc.segment) {
                    segs.push(loc.segment);
                }
            }
        }
        let mut out = Vec::with_capacity(8 + segs.len() * 8 + self.slots.len() * 4);
        out.push(NODE_FORMAT_VERSION);
        out.push(self.level);
        out.push(self.fanout_bits);
        put_varint(&mut out, segs.len() as u64);
        for s in &segs {
            out.extend_from_slice(&s.0.to_le_bytes());
        }
        let nbytes = self.slots.len().div_ceil(8);
        let mut present = vec![0u8; nbytes];
        let mut delta = vec![0u8; nbytes];
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(slot) = s {
                present[i / 8] |= 1 << (i % 8);
                if slot.base.is_some() {
                    delta[i / 8] |= 1 << (i % 8);
                }
            }
        }
        out.extend_from_slice(&present);
        out.extend_from_slice(&delta);
        let mut last_end = vec![0u64; segs.len()];
        for slot in self.slots.iter().flatten() {
            for loc in std::iter::once(&slot.loc).chain(slot.base.iter()) {
                let idx = segs.iter().position(|s| *s == loc.segment).unwrap();
                put_varint(&mut out, idx as u64);
                put_varint(
                    &mut out,
                    zigzag(loc.offset.wrapping_sub(last_end[idx]) as i64),
                );
                put_varint(&mut out, loc.len as u64);
                last_end[idx] = loc.end();
            }
        }
        out
    }

    /// A node from its frame's raw bytes (as `encode` wrote them).
    pub fn decode(raw: &[u8]) -> Result<Node, DecodeError> {
        let mut c = Cursor::new(raw);
        let version = c.u8()?;
        if version != NODE_FORMAT_VERSION {
            return err(format!("unknown node format version {version}"));
        }
        let level = c.u8()?;
        let fanout_bits = c.u8()?;
        if fanout_bits == 0 || fanout_bits > MAX_FANOUT_BITS {
            return err(format!("bad fanout bits {fanout_bits}"));
        }
        let fanout = 1usize << fanout_bits;
        let nseg = c.varint()?;
        if nseg > 2 * fanout as u64 {
            return err(format!("node lists {nseg} segments for {fanout} slots"));
        }
        let mut segs = Vec::with_capacity(nseg as usize);
        for _ in 0..nseg {
            segs.push(SegmentId(c.u64()?));
        }
        let present = c.take(fanout.div_ceil(8))?.to_vec();
        let delta = c.take(fanout.div_ceil(8))?.to_vec();
        let mut last_end = vec![0u64; segs.len()];
        let mut read_loc = |c: &mut Cursor<'_>, i: usize| -> Result<Locator, DecodeError> {
            let idx = c.varint()? as usize;
            if idx >= segs.len() {
                return err(format!("slot {i} names segment #{idx} of {}", segs.len()));
            }
            let offset = last_end[idx].wrapping_add(unzigzag(c.varint()?) as u64);
            let len = u32::try_from(c.varint()?)
                .map_err(|_| DecodeError(format!("slot {i}: length too large")))?;
            last_end[idx] = offset
                .checked_add(len as u64)
                .ok_or_else(|| DecodeError(format!("slot {i}: offset + length overflows")))?;
            Ok(Locator {
                segment: segs[idx],
                offset,
                len,
            })
        };
        let mut slots = vec![None; fanout];
        for (i, slot) in slots.iter_mut().enumerate() {
            let bit = 1 << (i % 8);
            if present[i / 8] & bit == 0 {
                if delta[i / 8] & bit != 0 {
                    return err(format!("slot {i} is a delta but absent"));
                }
                continue;
            }
            let loc = read_loc(&mut c, i)?;
            let base = if delta[i / 8] & bit != 0 {
                if level != 0 {
                    return err("an interior node slot cannot be a delta");
                }
                Some(read_loc(&mut c, i)?)
            } else {
                None
            };
            *slot = Some(Slot { loc, base });
        }
        c.expect_end("node")?;
        Ok(Node {
            level,
            fanout_bits,
            slots,
        })
    }
}
