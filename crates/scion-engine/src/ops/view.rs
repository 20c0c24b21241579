//! Reading a version page by page, without materializing it: what the VFS serves SQLite
//! from. A view holds the version's root record; each page read is a page-map lookup
//! (nodes cached by the reader) and one verified frame read.

use std::sync::Arc;

use crate::error::EngineResult;
use crate::format::{Locator, RootRecord};
use crate::pagemap::lookup;
use crate::Engine;

/// A page as the page cache holds it: shared, never copied on a hit.
pub type SharedPage = Arc<[u8]>;

/// One version, ready to be read page by page.
#[derive(Debug, Clone)]
pub struct VersionView {
    /// The version's root record.
    pub root: Locator,
    /// Its number on its branch.
    pub version: u64,
    /// Its page size in bytes.
    pub page_size: u32,
    /// Its number of pages.
    pub page_count: u32,
    record: RootRecord,
}

impl Engine {
    /// The version at `root` (numbered `version`): one read of its root record.
    pub fn version_view(&self, root: Locator, version: u64) -> EngineResult<VersionView> {
        let record = self.reader.root(&root)?;
        Ok(VersionView {
            root,
            version,
            page_size: record.page_size,
            page_count: record.page_count,
            record,
        })
    }

    /// Page `pgno` (1-based) of `view`, verified; `None` for a page the version holds as
    /// zeros (or one past its end). Served from the process's [`PageCache`](crate::PageCache) when it holds
    /// the page, and kept there when it did not.
    pub fn read_page(&self, view: &VersionView, pgno: u32) -> EngineResult<Option<Arc<[u8]>>> {
        if pgno == 0 || pgno > view.page_count {
            return Ok(None);
        }
        let r = &view.record;
        let Some(slot) = lookup(&self.reader, r.node, r.depth, r.fanout_bits, pgno - 1)? else {
            return Ok(None);
        };
        let mut out = None;
        self.reader
            .cached_pages(vec![(slot, pgno)], |_, page| out = Some(page.0))?;
        Ok(out)
    }

    /// Pages `pgnos` of `view`, verified, in one pass, in the order given: those the
    /// [`PageCache`](crate::PageCache) lacks are fetched with frames adjacent in the store
    /// coalesced into one ranged read (what readahead of a scan uses). A page the version
    /// holds as zeros (or past its end, or 0) is `None`.
    pub fn read_pages(
        &self,
        view: &VersionView,
        pgnos: impl IntoIterator<Item = u32>,
    ) -> EngineResult<Vec<(u32, Option<SharedPage>)>> {
        let r = &view.record;
        let mut out: Vec<(u32, Option<SharedPage>)> =
            pgnos.into_iter().map(|p| (p, None)).collect();
        let mut at = std::collections::HashMap::with_capacity(out.len());
        for (i, (p, _)) in out.iter().enumerate() {
            at.entry(*p).or_insert(i);
        }
        let mut slots = Vec::with_capacity(out.len());
        for (i, &(pgno, _)) in out.iter().enumerate() {
            // Each page once (a repeat stays `None`); none outside the version.
            if pgno == 0 || pgno > view.page_count || at[&pgno] != i {
                continue;
            }
            if let Some(slot) = lookup(&self.reader, r.node, r.depth, r.fanout_bits, pgno - 1)? {
                slots.push((slot, pgno));
            }
        }
        self.reader.cached_pages(slots, |pgno, page| {
            out[at[&pgno]].1 = Some(page.0);
        })?;
        Ok(out)
    }
}
