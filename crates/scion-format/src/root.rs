//! The root record of a version: everything needed to read it, and where it came from.
//!
//! Reads never follow a parent: the page map under `node` is complete on its own. The
//! ancestry (format 2) is for merges and people: the versions this one was made from, a
//! generation number that bounds walks of the version graph, and the store time it was
//! made. Format 1 records, written before the version graph existed, decode with no
//! ancestry: their parents are unknown, never guessed.

use super::bytes::{err, Cursor};
use super::{DecodeError, Locator, SegmentId};

/// Format 2 adds the ancestry; format 1 is still read, and written for a record without
/// one (only ever a record decoded from format 1).
pub(crate) const ROOT_FORMAT_VERSION: u8 = 2;
const ROOT_FORMAT_V1: u8 = 1;
const ROOT_V1_LEN: usize = 44;
const LOCATOR_LEN: usize = 20;

/// The versions a version was made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Parents {
    /// Made from nothing scion holds: an import, or `create`'s empty database.
    None,
    /// A commit, checkpoint, session flush, compaction: the head it was made on.
    One(Locator),
    /// A merge: the destination's head, then the merged source version.
    Two(Locator, Locator),
}

impl Parents {
    /// The parents' root records, first parent first.
    pub fn iter(&self) -> impl Iterator<Item = Locator> {
        let (a, b) = match *self {
            Parents::None => (None, None),
            Parents::One(a) => (Some(a), None),
            Parents::Two(a, b) => (Some(a), Some(b)),
        };
        a.into_iter().chain(b)
    }

    /// How many parents: 0, 1 or 2.
    pub fn len(&self) -> usize {
        match self {
            Parents::None => 0,
            Parents::One(_) => 1,
            Parents::Two(..) => 2,
        }
    }

    /// Whether the version has no parent (an import or a new database).
    pub fn is_empty(&self) -> bool {
        matches!(self, Parents::None)
    }
}

/// Where a version came from: immutable, written with the version's root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ancestry {
    /// The versions it was made from.
    pub parents: Parents,
    /// 1 for a version without parents, else 1 + the largest parent generation (a parent
    /// of unknown ancestry counts as 0). Every ancestor has a smaller generation, which is
    /// what lets a walk of the graph stop early.
    pub generation: u64,
    /// The store's clock when the version's commit began, in Unix milliseconds.
    pub made_at_ms: u64,
}

/// A version: its page map's top node, its size, its checksum and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootRecord {
    /// Every node of the page map has `2^fanout_bits` slots.
    pub fanout_bits: u8,
    /// Levels of nodes; a version with pages has at least one.
    pub depth: u8,
    /// SQLite's page size, in bytes.
    pub page_size: u32,
    /// Pages in the database.
    pub page_count: u32,
    /// SQLite's file change counter (page 1, bytes 24..28), for people and fingerprints.
    pub change_counter: u32,
    /// Wrapping sum of [`super::page_contribution`] over all present pages; checked at
    /// every full materialization.
    pub db_checksum: u64,
    /// The top node; `None` only for a version without pages.
    pub node: Option<Locator>,
    /// `None` only for a record written before the version graph (format 1).
    pub ancestry: Option<Ancestry>,
}

fn put_locator(out: &mut Vec<u8>, l: Option<Locator>) {
    let (seg, off, len) = match l {
        Some(l) => (l.segment.0, l.offset, l.len),
        None => (0, 0, 0),
    };
    out.extend_from_slice(&seg.to_le_bytes());
    out.extend_from_slice(&off.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
}

fn get_locator(c: &mut Cursor) -> Result<Option<Locator>, DecodeError> {
    let seg = c.u64()?;
    let offset = c.u64()?;
    let len = c.u32()?;
    if seg == 0 {
        return Ok(None);
    }
    Locator::checked(SegmentId(seg), offset, len).map(Some)
}

impl RootRecord {
    /// The record's bytes, as a root frame holds them.
    pub fn encode(&self) -> Vec<u8> {
        let parents = self.ancestry.map_or(0, |a| a.parents.len());
        let mut out = Vec::with_capacity(ROOT_V1_LEN + 17 + parents * LOCATOR_LEN);
        out.push(match self.ancestry {
            Some(_) => ROOT_FORMAT_VERSION,
            None => ROOT_FORMAT_V1,
        });
        out.push(self.fanout_bits);
        out.push(self.depth);
        out.push(0);
        out.extend_from_slice(&self.page_size.to_le_bytes());
        out.extend_from_slice(&self.page_count.to_le_bytes());
        out.extend_from_slice(&self.change_counter.to_le_bytes());
        out.extend_from_slice(&self.db_checksum.to_le_bytes());
        put_locator(&mut out, self.node);
        if let Some(a) = self.ancestry {
            out.extend_from_slice(&a.generation.to_le_bytes());
            out.extend_from_slice(&a.made_at_ms.to_le_bytes());
            out.push(parents as u8);
            for p in a.parents.iter() {
                put_locator(&mut out, Some(p));
            }
        }
        out
    }

    /// A record from a root frame's raw bytes (either format version).
    pub fn decode(raw: &[u8]) -> Result<RootRecord, DecodeError> {
        let mut c = Cursor::new(raw);
        let version = c.u8()?;
        if version != ROOT_FORMAT_V1 && version != ROOT_FORMAT_VERSION {
            return err(format!("unknown root format version {version}"));
        }
        let fanout_bits = c.u8()?;
        let depth = c.u8()?;
        let _reserved = c.u8()?;
        let page_size = c.u32()?;
        let page_count = c.u32()?;
        let change_counter = c.u32()?;
        let db_checksum = c.u64()?;
        let node = get_locator(&mut c)?;
        let ancestry = if version == ROOT_FORMAT_V1 {
            None
        } else {
            Some(decode_ancestry(&mut c)?)
        };
        c.expect_end("root record")?;
        if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
            return err(format!("bad page size {page_size}"));
        }
        if fanout_bits == 0 || fanout_bits > 10 {
            return err(format!("bad fanout bits {fanout_bits}"));
        }
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
            ancestry,
        })
    }
}

fn decode_ancestry(c: &mut Cursor) -> Result<Ancestry, DecodeError> {
    let generation = c.u64()?;
    let made_at_ms = c.u64()?;
    let count = c.u8()?;
    let mut parent = || -> Result<Locator, DecodeError> {
        get_locator(c)?.ok_or_else(|| DecodeError("a parent names no version".to_string()))
    };
    let parents = match count {
        0 => Parents::None,
        1 => Parents::One(parent()?),
        2 => {
            let (a, b) = (parent()?, parent()?);
            if a == b {
                return err("a merge names the same parent twice");
            }
            Parents::Two(a, b)
        }
        n => return err(format!("{n} parents: a version has at most two")),
    };
    if generation == 0 || (parents.is_empty() && generation != 1) {
        return err(format!(
            "generation {generation} for a version with {} parents",
            parents.len()
        ));
    }
    Ok(Ancestry {
        parents,
        generation,
        made_at_ms,
    })
}

/// The most levels a page map of fan-out `2^fanout_bits` can need (u32 page numbers).
pub fn max_depth(fanout_bits: u8) -> u8 {
    32u8.div_ceil(fanout_bits.max(1))
}
