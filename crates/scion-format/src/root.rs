//! The root record of a version: everything needed to read it, and nothing about where it
//! came from (reads never follow a parent).

use super::bytes::{err, Cursor};
use super::{DecodeError, Locator, SegmentId};

pub const ROOT_FORMAT_VERSION: u8 = 1;
const ROOT_LEN: usize = 44;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootRecord {
    pub fanout_bits: u8,
    /// Levels of nodes; a version with pages has at least one.
    pub depth: u8,
    pub page_size: u32,
    pub page_count: u32,
    /// SQLite's file change counter (page 1, bytes 24..28), for people and fingerprints.
    pub change_counter: u32,
    /// Wrapping sum of [`super::page_contribution`] over all present pages; checked at
    /// every full materialization.
    pub db_checksum: u64,
    /// The top node; `None` only for a version without pages.
    pub node: Option<Locator>,
}

impl RootRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ROOT_LEN);
        out.push(ROOT_FORMAT_VERSION);
        out.push(self.fanout_bits);
        out.push(self.depth);
        out.push(0);
        out.extend_from_slice(&self.page_size.to_le_bytes());
        out.extend_from_slice(&self.page_count.to_le_bytes());
        out.extend_from_slice(&self.change_counter.to_le_bytes());
        out.extend_from_slice(&self.db_checksum.to_le_bytes());
        let (seg, off, len) = match self.node {
            Some(l) => (l.segment.0, l.offset, l.len),
            None => (0, 0, 0),
        };
        out.extend_from_slice(&seg.to_le_bytes());
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out
    }

    pub fn decode(raw: &[u8]) -> Result<RootRecord, DecodeError> {
        let mut c = Cursor::new(raw);
        let version = c.u8()?;
        if version != ROOT_FORMAT_VERSION {
            return err(format!("unknown root format version {version}"));
        }
        let fanout_bits = c.u8()?;
        let depth = c.u8()?;
        let _reserved = c.u8()?;
        let page_size = c.u32()?;
        let page_count = c.u32()?;
        let change_counter = c.u32()?;
        let db_checksum = c.u64()?;
        let seg = c.u64()?;
        let offset = c.u64()?;
        let len = c.u32()?;
        c.expect_end("root record")?;
        if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
            return err(format!("bad page size {page_size}"));
        }
        if fanout_bits == 0 || fanout_bits > 10 {
            return err(format!("bad fanout bits {fanout_bits}"));
        }
        let node = if seg == 0 {
            None
        } else {
            Some(Locator::checked(SegmentId(seg), offset, len)?)
        };
        if node.is_none() != (page_count == 0) || (node.is_some() && depth == 0) {
            return err("root record's page count, depth and node disagree");
        }
        // A tree never needs more levels than it takes to address 2^32 pages; deeper
        // ones would make level shifts overflow.
        if depth > max_depth(fanout_bits) {
            return err(format!(
                "depth {depth} is more than a fan-out of 2^{fanout_bits} ever needs"
            ));
        }
        let capacity_bits = fanout_bits as u32 * depth as u32;
        if capacity_bits < 32 && (page_count as u64) > (1u64 << capacity_bits) {
            return err("page count exceeds the tree's capacity");
        }
        Ok(RootRecord {
            fanout_bits,
            depth,
            page_size,
            page_count,
            change_counter,
            db_checksum,
            node,
        })
    }
}

/// The most levels a page map of fan-out `2^fanout_bits` can need (u32 page numbers).
pub fn max_depth(fanout_bits: u8) -> u8 {
    32u8.div_ceil(fanout_bits.max(1))
}
