//! Readahead for scans. Two patterns start it: SQLite reading the page right after the one
//! it read last (a table stored in page order), and SQLite reading the next child of the
//! b-tree interior page it read last (a scan walking leaves wherever they lie, as in a
//! table grown by random inserts or a branch whose pages were rewritten). Either way the
//! pages the scan reads next are fetched with the one asked for, in one pass (frames
//! adjacent in the store in one ranged read, the rest overlapped), and served from here.
//! The window doubles while the pattern holds and starts over when it breaks; a point
//! lookup (root, interior, leaf) never starts it.

use std::collections::HashMap;
use std::sync::Arc;

const FIRST_WINDOW: u32 = 8;
/// At most this many pages fetched ahead (2 MiB of 4 KiB pages): enough scattered frames
/// in one batch for their reads to overlap on a cold disk.
const MAX_WINDOW: u32 = 512;

#[derive(Default)]
pub(crate) struct Readahead {
    /// The version the buffered pages belong to (numbers never repeat on a branch).
    version: Option<u64>,
    /// The page after the last one read.
    next: u32,
    window: u32,
    pages: HashMap<u32, Option<Arc<[u8]>>>,
    /// The children of the last interior b-tree page read, in key order.
    children: Vec<u32>,
    /// Where among `children` the last page read was.
    child_at: Option<usize>,
}

/// What to do for a page SQLite asks for.
pub(crate) enum Ahead {
    /// It was fetched ahead.
    Buffered(Option<Arc<[u8]>>),
    /// A scan: fetch these pages (the first is the one asked for) and `keep` the rest.
    Fetch(Vec<u32>),
    /// A read on its own.
    Single,
}

impl Readahead {
    pub(crate) fn plan(&mut self, version: u64, pgno: u32) -> Ahead {
        if self.version != Some(version) {
            *self = Readahead {
                version: Some(version),
                ..Readahead::default()
            };
        }
        let sequential = pgno == self.next;
        self.next = pgno.saturating_add(1);
        let walked_from = self.child_at;
        self.child_at = match walked_from {
            Some(i) if self.children.get(i + 1) == Some(&pgno) => Some(i + 1),
            _ => self.children.iter().position(|&c| c == pgno),
        };
        if let Some(page) = self.pages.remove(&pgno) {
            return Ahead::Buffered(page);
        }
        let walking = matches!((walked_from, self.child_at), (Some(a), Some(b)) if b == a + 1);
        if !(sequential || walking) || pgno < 2 {
            self.window = 0;
            self.pages.clear();
            return Ahead::Single;
        }
        self.window = (self.window * 2).clamp(FIRST_WINDOW, MAX_WINDOW);
        let window = self.window as usize;
        // Page order first: it runs past the end of one interior page's children, where a
        // table stored in page order continues; the walk serves leaves out of page order.
        match self.child_at.filter(|_| walking && !sequential) {
            Some(i) => {
                Ahead::Fetch(self.children[i..(i + window).min(self.children.len())].to_vec())
            }
            None => Ahead::Fetch((pgno..pgno.saturating_add(self.window)).collect()),
        }
    }

    /// Keep pages fetched ahead (all but the one asked for).
    pub(crate) fn keep(&mut self, pages: impl IntoIterator<Item = (u32, Option<Arc<[u8]>>)>) {
        self.pages.clear();
        self.pages.extend(pages);
    }

    /// Note a page SQLite was served: an interior b-tree page's children are where a scan
    /// goes next.
    pub(crate) fn served(&mut self, pgno: u32, page: &[u8]) {
        if let Some(children) = interior_children(pgno, page) {
            self.children = children;
            self.child_at = None;
        }
    }
}

/// The child page numbers of an interior b-tree page (table or index), in key order: each
/// cell's left child, then the right-most pointer. `None` for any other page, or one whose
/// header does not hold together (it is then simply not read ahead).
fn interior_children(pgno: u32, page: &[u8]) -> Option<Vec<u32>> {
    let h = if pgno == 1 { 100 } else { 0 };
    let flag = *page.get(h)?;
    if flag != 0x05 && flag != 0x02 {
        return None;
    }
    let be16 = |at: usize| -> Option<usize> {
        Some(u16::from_be_bytes(page.get(at..at + 2)?.try_into().ok()?) as usize)
    };
    let be32 = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(page.get(at..at + 4)?.try_into().ok()?))
    };
    let cells = be16(h + 3)?;
    let mut children = Vec::with_capacity(cells + 1);
    for i in 0..cells {
        let cell = be16(h + 12 + 2 * i)?;
        children.push(be32(cell)?);
    }
    children.push(be32(h + 8)?);
    children.iter().all(|&c| c != 0).then_some(children)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetched(a: Ahead) -> Vec<u32> {
        match a {
            Ahead::Fetch(p) => p,
            _ => panic!("expected a fetch"),
        }
    }

    #[test]
    fn sequential_reads_grow_the_window_and_a_jump_resets_it() {
        let v = 1;
        let mut r = Readahead::default();
        assert!(matches!(r.plan(v, 5), Ahead::Single));
        assert_eq!(fetched(r.plan(v, 6)), (6..14).collect::<Vec<_>>());
        r.keep((7..14).map(|p| (p, Some(Arc::from(vec![p as u8])))));
        for p in 7..14 {
            assert!(matches!(r.plan(v, p), Ahead::Buffered(Some(ref b)) if b[0] == p as u8));
        }
        assert_eq!(fetched(r.plan(v, 14)), (14..30).collect::<Vec<_>>());
        assert!(matches!(r.plan(v, 3), Ahead::Single));
        // Another version drops what was buffered.
        r.keep([(4, None)]);
        assert!(matches!(r.plan(2, 4), Ahead::Single));
    }

    /// An interior table page (flag 0x05) with `children.len() - 1` cells.
    fn interior(children: &[u32]) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        let (cells, right) = children.split_at(children.len() - 1);
        p[0] = 0x05;
        p[3..5].copy_from_slice(&(cells.len() as u16).to_be_bytes());
        p[8..12].copy_from_slice(&right[0].to_be_bytes());
        for (i, c) in cells.iter().enumerate() {
            let at = 2000 + 8 * i;
            p[12 + 2 * i..14 + 2 * i].copy_from_slice(&(at as u16).to_be_bytes());
            p[at..at + 4].copy_from_slice(&c.to_be_bytes());
            p[at + 4] = i as u8; // the key
        }
        p
    }

    #[test]
    fn a_scan_walking_scattered_leaves_reads_the_next_children_ahead() {
        let v = 1;
        let leaves = [90, 17, 55, 3, 71, 40, 12, 99, 28, 64, 33, 80];
        let mut r = Readahead::default();
        assert!(matches!(r.plan(v, 2), Ahead::Single));
        r.served(2, &interior(&leaves));
        // The first leaf is a lookup's read as much as a scan's: on its own.
        assert!(matches!(r.plan(v, 90), Ahead::Single));
        // The next sibling: a scan. Its window starts at that child.
        assert_eq!(fetched(r.plan(v, 17)), leaves[1..9].to_vec());
        r.keep(leaves[2..9].iter().map(|&p| (p, None)));
        for &p in &leaves[2..9] {
            assert!(matches!(r.plan(v, p), Ahead::Buffered(None)));
        }
        // Past the buffered pages the walk goes on, with a doubled window (clipped).
        assert_eq!(fetched(r.plan(v, 64)), leaves[9..].to_vec());
    }

    #[test]
    fn a_point_lookup_through_an_interior_page_reads_nothing_ahead() {
        let v = 1;
        let mut r = Readahead::default();
        assert!(matches!(r.plan(v, 2), Ahead::Single));
        r.served(2, &interior(&[90, 17, 55]));
        assert!(matches!(r.plan(v, 55), Ahead::Single));
        assert!(
            matches!(r.plan(v, 17), Ahead::Single),
            "backwards is no scan"
        );
    }

    #[test]
    fn pages_that_are_not_interior_or_do_not_hold_together_have_no_children() {
        assert_eq!(interior_children(5, &[0x0d; 4096]), None, "a table leaf");
        let mut p = interior(&[4, 5, 6]);
        assert_eq!(interior_children(5, &p), Some(vec![4, 5, 6]));
        p[3..5].copy_from_slice(&4000u16.to_be_bytes());
        assert_eq!(interior_children(5, &p), None, "cells past the page");
        assert_eq!(interior_children(1, &[0x05; 50]), None, "too short");
    }
}
