//! A page-map node: `2^fanout_bits` slots, each empty or holding a locator. Leaves (level
//! 0) point at page frames, interior nodes at child node frames.

use super::bytes::{err, put_varint, unzigzag, zigzag, Cursor};
use super::{DecodeError, Locator, SegmentId};

pub const NODE_FORMAT_VERSION: u8 = 1;
const MAX_FANOUT_BITS: u8 = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub level: u8,
    pub fanout_bits: u8,
    pub slots: Vec<Option<Locator>>,
}

impl Node {
    pub fn empty(level: u8, fanout_bits: u8) -> Self {
        Node {
            level,
            fanout_bits,
            slots: vec![None; 1 << fanout_bits],
        }
    }

    pub fn is_empty(&self) -> bool {
        self.slots.iter().all(|s| s.is_none())
    }

    /// Segment table, presence bitmap, then per present slot: segment index, offset as a
    /// zigzag delta from where the previous slot in the same segment ended, length.
    /// Slots written together are adjacent, so most offsets cost one byte.
    pub fn encode(&self) -> Vec<u8> {
        let mut segs: Vec<SegmentId> = Vec::new();
        for loc in self.slots.iter().flatten() {
            if !segs.contains(&loc.segment) {
                segs.push(loc.segment);
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
        let mut bitmap = vec![0u8; self.slots.len().div_ceil(8)];
        for (i, s) in self.slots.iter().enumerate() {
            if s.is_some() {
                bitmap[i / 8] |= 1 << (i % 8);
            }
        }
        out.extend_from_slice(&bitmap);
        let mut last_end = vec![0u64; segs.len()];
        for loc in self.slots.iter().flatten() {
            let idx = segs.iter().position(|s| *s == loc.segment).unwrap();
            put_varint(&mut out, idx as u64);
            put_varint(
                &mut out,
                zigzag(loc.offset.wrapping_sub(last_end[idx]) as i64),
            );
            put_varint(&mut out, loc.len as u64);
            last_end[idx] = loc.end();
        }
        out
    }

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
        if nseg > fanout as u64 {
            return err(format!("node lists {nseg} segments for {fanout} slots"));
        }
        let mut segs = Vec::with_capacity(nseg as usize);
        for _ in 0..nseg {
            segs.push(SegmentId(c.u64()?));
        }
        let bitmap = c.take(fanout.div_ceil(8))?.to_vec();
        let mut last_end = vec![0u64; segs.len()];
        let mut slots = vec![None; fanout];
        for (i, slot) in slots.iter_mut().enumerate() {
            if bitmap[i / 8] & (1 << (i % 8)) == 0 {
                continue;
            }
            let idx = c.varint()? as usize;
            if idx >= segs.len() {
                return err(format!("slot {i} names segment #{idx} of {}", segs.len()));
            }
            let offset = last_end[idx].wrapping_add(unzigzag(c.varint()?) as u64);
            let len = u32::try_from(c.varint()?)
                .map_err(|_| DecodeError(format!("slot {i}: length too large")))?;
            let loc = Locator {
                segment: segs[idx],
                offset,
                len,
            };
            last_end[idx] = offset.checked_add(len as u64).ok_or_else(|| {
                DecodeError(format!("slot {i}: offset + length overflows"))
            })?;
            *slot = Some(loc);
        }
        c.expect_end("node")?;
        Ok(Node {
            level,
            fanout_bits,
            slots,
        })
    }
}
