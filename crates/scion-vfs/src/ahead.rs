//! Readahead for sequential reads: when SQLite reads the page right after the one it read
//! last (a table scan), the next pages are fetched with it, frames adjacent in the store
//! in one ranged read, and served from here. The window doubles while the reads stay
//! sequential and starts over when they jump.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

const FIRST_WINDOW: u32 = 8;
/// At most this many pages fetched ahead (512 KiB of 4 KiB pages).
const MAX_WINDOW: u32 = 128;

#[derive(Default)]
pub(crate) struct Readahead {
    /// The version the buffered pages belong to (numbers never repeat on a branch).
    version: Option<u64>,
    /// The page after the last one read.
    next: u32,
    window: u32,
    pages: HashMap<u32, Option<Arc<[u8]>>>,
}

/// What to do for a page SQLite asks for.
pub(crate) enum Ahead {
    /// It was fetched ahead.
    Buffered(Option<Arc<[u8]>>),
    /// The read is sequential: fetch this range (it starts with the page) and `keep` it.
    Fetch(Range<u32>),
    /// A read on its own.
    Single,
}

impl Readahead {
    pub(crate) fn plan(&mut self, version: u64, pgno: u32) -> Ahead {
        if self.version != Some(version) {
            self.version = Some(version);
            self.pages.clear();
            self.window = 0;
            self.next = 0;
        }
        let sequential = pgno == self.next;
        self.next = pgno.saturating_add(1);
        if let Some(page) = self.pages.remove(&pgno) {
            return Ahead::Buffered(page);
        }
        if !sequential || pgno < 2 {
            self.window = 0;
            self.pages.clear();
            return Ahead::Single;
        }
        self.window = (self.window * 2).clamp(FIRST_WINDOW, MAX_WINDOW);
        Ahead::Fetch(pgno..pgno.saturating_add(self.window))
    }

    /// Keep pages fetched ahead (all but the one asked for).
    pub(crate) fn keep(&mut self, pages: impl IntoIterator<Item = (u32, Option<Arc<[u8]>>)>) {
        self.pages.clear();
        self.pages.extend(pages);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_reads_grow_the_window_and_a_jump_resets_it() {
        let v = 1;
        let mut r = Readahead::default();
        assert!(matches!(r.plan(v, 5), Ahead::Single));
        let Ahead::Fetch(range) = r.plan(v, 6) else {
            panic!("sequential")
        };
        assert_eq!(range, 6..14);
        r.keep((7..14).map(|p| (p, Some(Arc::from(vec![p as u8])))));
        for p in 7..14 {
            assert!(matches!(r.plan(v, p), Ahead::Buffered(Some(ref b)) if b[0] == p as u8));
        }
        let Ahead::Fetch(range) = r.plan(v, 14) else {
            panic!("still sequential")
        };
        assert_eq!(range, 14..30);
        assert!(matches!(r.plan(v, 3), Ahead::Single));
        // Another version drops what was buffered.
        r.keep([(4, None)]);
        assert!(matches!(r.plan(2, 4), Ahead::Single));
    }
}
