//! The pages a write transaction changed: kept in memory up to a bound, then set aside in
//! a temporary file (all but page 1, which the commit adjusts), so a bulk load through the
//! VFS needs bounded memory. The commit takes both.

use std::collections::BTreeMap;

use scion_core::ops::pages::PageChanges;
use scion_core::ops::spill::SpilledPages;
use scion_core::CoreResult;

/// Dirty bytes kept in memory by default before they are set aside (`?spill_kib=` sets it).
pub(crate) const DEFAULT_SPILL_AFTER: u64 = 64 << 20;

#[derive(Debug)]
pub(crate) struct DirtyPages {
    memory: BTreeMap<u32, Vec<u8>>,
    spilled: SpilledPages,
    spill_after: u64,
}

impl DirtyPages {
    pub(crate) fn new(spill_after: u64) -> DirtyPages {
        DirtyPages {
            memory: BTreeMap::new(),
            spilled: SpilledPages::default(),
            spill_after,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.memory.is_empty() && self.spilled.is_empty()
    }

    /// The image of `pgno` this transaction wrote, if any.
    pub(crate) fn get(&self, pgno: u32) -> CoreResult<Option<std::borrow::Cow<'_, [u8]>>> {
        if let Some(p) = self.memory.get(&pgno) {
            return Ok(Some(std::borrow::Cow::Borrowed(p)));
        }
        Ok(self.spilled.get(pgno)?.map(std::borrow::Cow::Owned))
    }

    /// The page to write `pgno` into, in memory: the transaction's image, or `base()` for a
    /// page it has not written yet.
    pub(crate) fn page_mut(
        &mut self,
        pgno: u32,
        base: impl FnOnce() -> CoreResult<Vec<u8>>,
    ) -> CoreResult<&mut Vec<u8>> {
        if !self.memory.contains_key(&pgno) {
            let page = match self.spilled.take(pgno)? {
                Some(p) => p,
                None => base()?,
            };
            self.memory.insert(pgno, page);
        }
        Ok(self.memory.get_mut(&pgno).expect("just inserted"))
    }

    /// Set pages aside once memory holds more than the bound.
    pub(crate) fn bound(&mut self) -> CoreResult<()> {
        let in_memory: u64 = self.memory.values().map(|p| p.len() as u64).sum();
        if in_memory <= self.spill_after {
            return Ok(());
        }
        let page1 = self.memory.remove(&1);
        for (pgno, page) in std::mem::take(&mut self.memory) {
            self.spilled.put(pgno, &page)?;
        }
        if let Some(p) = page1 {
            self.memory.insert(1, p);
        }
        Ok(())
    }

    /// Forget pages above `last`.
    pub(crate) fn truncate(&mut self, last: u32) {
        self.memory.retain(|&p, _| p <= last);
        self.spilled.truncate(last);
    }

    /// Everything written, as a commit takes it; page 1 (in memory) given to `page1` first.
    pub(crate) fn take(
        &mut self,
        page_size: u32,
        page_count: u32,
        page1: impl FnOnce(&mut Vec<u8>) -> CoreResult<()>,
    ) -> CoreResult<PageChanges> {
        let mut pages = std::mem::take(&mut self.memory);
        if let Some(p) = pages.get_mut(&1) {
            page1(p)?;
        }
        Ok(PageChanges {
            page_size,
            page_count,
            pages,
            spilled: std::mem::take(&mut self.spilled),
        })
    }
}
