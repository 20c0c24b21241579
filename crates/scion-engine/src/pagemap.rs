//! The copy-on-write radix tree from page number to page frame.
//!
//! Slot `i` of a level-`L` node covers pages `(i << (bits * L)) ..` of its subtree. An
//! absent slot is all-zero pages. A commit path-copies only the nodes above changed pages;
//! everything else is shared with the previous version by locator.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use crate::error::EngineResult;
use crate::format::{FrameKind, Locator, Node, Slot};
use crate::reader::FrameReader;
use crate::writer::VersionWriter;

/// 32 slots a node: the fan-out chosen by measuring commit cost (docs/benchmarks.md).
pub(crate) const DEFAULT_FANOUT_BITS: u8 = 5;

/// Levels needed to address `page_count` pages (at least one).
pub(crate) fn depth_for(page_count: u32, fanout_bits: u8) -> u8 {
    let mut depth = 1u8;
    while (depth as u32 * fanout_bits as u32) < 32
        && (page_count as u64) > (1u64 << (depth as u32 * fanout_bits as u32))
    {
        depth += 1;
    }
    depth
}

/// Build a tree bottom-up from the locators of pages `1..=pages.len()` (`None` = zero page).
pub fn build(
    writer: &mut VersionWriter<'_>,
    pages: &[Option<Locator>],
    fanout_bits: u8,
) -> EngineResult<(Option<Locator>, u8)> {
    let fanout = 1usize << fanout_bits;
    let depth = depth_for(pages.len() as u32, fanout_bits);
    let mut level_slots: Vec<Option<Slot>> = pages.iter().map(|p| p.map(Slot::from)).collect();
    for level in 0..depth {
        let mut next = Vec::with_capacity(level_slots.len().div_ceil(fanout));
        for chunk in level_slots.chunks(fanout) {
            let mut node = Node::empty(level, fanout_bits);
            node.slots[..chunk.len()].copy_from_slice(chunk);
            if node.is_empty() {
                next.push(None);
            } else {
                let (loc, _) = writer.add(FrameKind::Node, level as u64, &node.encode())?;
                next.push(Some(Slot::from(loc)));
            }
        }
        if next.is_empty() {
            next.push(None);
        }
        level_slots = next;
    }
    Ok((level_slots[0].map(|s| s.loc), depth))
}

/// A change set: page index (pgno - 1) to its new frame, or `None` for an all-zero page.
pub type Changes = BTreeMap<u32, Option<Slot>>;

pub(crate) struct TreeUpdate<'r> {
    pub reader: &'r FrameReader,
    pub fanout_bits: u8,
    /// Pages at index >= limit are dropped (the database shrank).
    pub limit: u32,
}

impl TreeUpdate<'_> {
    /// Apply `changes` to the tree at `top` (of `old_depth` levels), growing it to
    /// `new_depth` levels if needed. Returns the new top node.
    pub fn apply(
        &self,
        writer: &mut VersionWriter<'_>,
        top: Option<Locator>,
        old_depth: u8,
        new_depth: u8,
        changes: &Changes,
    ) -> EngineResult<Option<Locator>> {
        let mut top = top;
        let mut depth = if top.is_none() { new_depth } else { old_depth };
        // Grow: the old tree becomes slot 0 of new upper nodes. Rare (the database crossed
        // a power of the fan-out), so the wrappers are simply written.
        while depth < new_depth {
            let mut upper = Node::empty(depth, self.fanout_bits);
            upper.slots[0] = top.map(Slot::from);
            top = Some(writer.add_node(upper)?);
            depth += 1;
        }
        let node = match top {
            Some(loc) => self.load(writer, &loc, depth - 1)?,
            None => Node::empty(depth - 1, self.fanout_bits),
        };
        let changes: Vec<(u32, Option<Slot>)> = changes.iter().map(|(k, v)| (*k, *v)).collect();
        let (loc, changed) = self.update(writer, node, depth - 1, 0, &changes)?;
        Ok(if changed { loc } else { top })
    }

    /// A node from this commit's writer or, failing that, the store.
    fn load(&self, writer: &VersionWriter<'_>, loc: &Locator, level: u8) -> EngineResult<Node> {
        if let Some(n) = writer.node(loc) {
            return Ok(n.clone());
        }
        Ok((*self.reader.node(loc, level, self.fanout_bits)?).clone())
    }

    fn span(&self, level: u8) -> u64 {
        1u64 << (self.fanout_bits as u32 * level as u32)
    }

    fn update(
        &self,
        writer: &mut VersionWriter<'_>,
        mut node: Node,
        level: u8,
        base: u64,
        changes: &[(u32, Option<Slot>)],
    ) -> EngineResult<(Option<Locator>, bool)> {
        let span = self.span(level);
        let limit = self.limit as u64;
        let mut changed = false;
        let mut rest = changes;
        for i in 0..node.slots.len() {
            let lo = base + i as u64 * span;
            let hi = lo + span;
            let split = rest.partition_point(|(idx, _)| (*idx as u64) < hi);
            let (mine, after) = rest.split_at(split);
            rest = after;
            if lo >= limit {
                if node.slots[i].is_some() {
                    node.slots[i] = None;
                    changed = true;
                }
                continue;
            }
            if mine.is_empty() && hi <= limit {
                continue;
            }
            if level == 0 {
                if let Some((_, new)) = mine.last() {
                    if node.slots[i] != *new {
                        node.slots[i] = *new;
                        changed = true;
                    }
                }
                continue;
            }
            if mine.is_empty() && node.slots[i].is_none() {
                continue;
            }
            let child = match node.slots[i] {
                Some(slot) => self.load(writer, &slot.loc, level - 1)?,
                None => Node::empty(level - 1, self.fanout_bits),
            };
            let (new_child, child_changed) = self.update(writer, child, level - 1, lo, mine)?;
            if child_changed {
                node.slots[i] = new_child.map(Slot::from);
                changed = true;
            }
        }
        if !changed {
            return Ok((None, false));
        }
        if node.is_empty() {
            return Ok((None, true));
        }
        Ok((Some(writer.add_node(node)?), true))
    }
}

/// Every present page of a tree, as (page index, slot), in page order.
pub fn leaves(
    reader: &FrameReader,
    top: Option<Locator>,
    depth: u8,
    fanout_bits: u8,
) -> EngineResult<Vec<(u32, Slot)>> {
    let mut all = Vec::new();
    for_each_leaf_group(reader, top, depth, fanout_bits, usize::MAX, |group| {
        if all.is_empty() {
            all = group;
        } else {
            all.extend(group);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(all)
}

/// Every present page of a tree, as (page index, slot), in page order, handed to `f` a
/// group at a time: the pages under at most `group_pages` pages' worth of leaf nodes
/// (at least one node). A caller can set the first group to work while later leaf nodes
/// are still being read, and end the walk early with `Break`.
pub(crate) fn for_each_leaf_group(
    reader: &FrameReader,
    top: Option<Locator>,
    depth: u8,
    fanout_bits: u8,
    group_pages: usize,
    mut f: impl FnMut(Vec<(u32, Slot)>) -> EngineResult<ControlFlow<()>>,
) -> EngineResult<()> {
    let Some(top) = top else {
        return Ok(());
    };
    if depth == 0 {
        return f(vec![(0, Slot::from(top))]).map(|_| ());
    }
    // Breadth-first, one level at a time, so each level's nodes are read coalesced.
    let mut frontier: Vec<(u64, Slot)> = vec![(0, Slot::from(top))];
    for level in (1..depth).rev() {
        frontier = children(reader, &frontier, level, fanout_bits)?;
    }
    let nodes_per_group = (group_pages >> fanout_bits).max(1);
    for group in frontier.chunks(nodes_per_group) {
        let pages = children(reader, group, 0, fanout_bits)?;
        let pages = pages.into_iter().map(|(idx, slot)| (idx as u32, slot));
        if f(pages.collect())?.is_break() {
            break;
        }
    }
    Ok(())
}

/// The present children of `parents` (nodes at `level`), with their first page indexes.
fn children(
    reader: &FrameReader,
    parents: &[(u64, Slot)],
    level: u8,
    fanout_bits: u8,
) -> EngineResult<Vec<(u64, Slot)>> {
    let locs: Vec<Locator> = parents.iter().map(|(_, s)| s.loc).collect();
    let nodes: Vec<Arc<Node>> = reader.nodes(&locs, level, fanout_bits)?;
    let span = 1u64 << (fanout_bits as u32 * level as u32);
    let present = nodes
        .iter()
        .map(|n| n.slots.iter().filter(|s| s.is_some()).count())
        .sum();
    let mut next = Vec::with_capacity(present);
    for ((base, _), node) in parents.iter().zip(nodes) {
        for (i, slot) in node.slots.iter().enumerate() {
            if let Some(slot) = slot {
                next.push((base + i as u64 * span, *slot));
            }
        }
    }
    Ok(next)
}

/// The slot of one page (by index), or `None` for an all-zero or missing page.
pub fn lookup(
    reader: &FrameReader,
    top: Option<Locator>,
    depth: u8,
    fanout_bits: u8,
    idx: u32,
) -> EngineResult<Option<Slot>> {
    let Some(mut cur) = top else {
        return Ok(None);
    };
    let total_bits = fanout_bits as u32 * depth as u32;
    if total_bits < 32 && (idx as u64) >= (1u64 << total_bits) {
        return Ok(None);
    }
    for level in (0..depth).rev() {
        let node = reader.node(&cur, level, fanout_bits)?;
        let shift = fanout_bits as u32 * level as u32;
        let i = ((idx as u64 >> shift) & ((1u64 << fanout_bits) - 1)) as usize;
        match node.slots[i] {
            None => return Ok(None),
            Some(slot) if level == 0 => return Ok(Some(slot)),
            Some(slot) => cur = slot.loc,
        }
    }
    Ok(None)
}
