//! Captured transactions not yet committed to the store: the last image of each changed
//! page and the database's size after the last transaction.

use std::collections::BTreeMap;

use scion_core::format::normalize_page1;
use scion_core::ops::pages::PageChanges;

use crate::cursor::Cursor;

/// The page that holds byte 2^30 of the file: SQLite never writes it and scion never
/// stores it.
pub(crate) fn lock_byte_page(page_size: u32) -> u32 {
    (1u32 << 30) / page_size + 1
}

/// Pages captured since the last durable version.
#[derive(Debug, Clone)]
pub struct Pending {
    pub page_size: u32,
    /// The size (in pages) after the last captured transaction.
    pub page_count: u32,
    pub pages: BTreeMap<u32, Vec<u8>>,
    /// Where the last captured transaction ends.
    pub cursor: Cursor,
    /// Transactions captured into this set.
    pub transactions: u64,
}

impl Pending {
    pub fn new(page_size: u32, page_count: u32, cursor: Cursor) -> Pending {
        Pending {
            page_size,
            page_count,
            pages: BTreeMap::new(),
            cursor,
            transactions: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty() && self.transactions == 0
    }

    pub fn bytes(&self) -> u64 {
        self.pages.values().map(|p| p.len() as u64).sum()
    }

    /// Record a page image of the transaction being applied (page 1 normalized).
    pub fn put(&mut self, pgno: u32, page: &[u8]) {
        if pgno == lock_byte_page(self.page_size) {
            return;
        }
        let mut image = page.to_vec();
        if pgno == 1 {
            normalize_page1(&mut image);
        }
        self.pages.insert(pgno, image);
    }

    /// End a transaction at its commit frame: the database now has `size` pages.
    /// `growth` holds the pages of `(old size, size]` the transaction wrote no frame for
    /// (SQLite reads those from the database file).
    pub fn commit(&mut self, size: u32, cursor: Cursor, growth: Vec<(u32, Vec<u8>)>) {
        for (pgno, page) in growth {
            self.put(pgno, &page);
        }
        self.pages.retain(|&p, _| p <= size);
        self.page_count = size;
        self.cursor = cursor;
        self.transactions += 1;
    }

    /// What a commit of this set writes; the pages move out (give them back with
    /// [`Pending::restore`] if the commit fails).
    pub(crate) fn take_changes(&mut self) -> PageChanges {
        PageChanges {
            page_size: self.page_size,
            page_count: self.page_count,
            pages: std::mem::take(&mut self.pages),
            spilled: Default::default(),
        }
    }

    /// Put back the pages of a commit that failed.
    pub fn restore(&mut self, changes: PageChanges) {
        self.pages = changes.pages;
    }
}
