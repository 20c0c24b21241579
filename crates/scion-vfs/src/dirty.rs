//! The pages a write transaction changed: kept in memory up to a bound, then set aside in
//! a temporary file (all but page 1, which the commit adjusts), so a bulk load through the
//! VFS needs bounded memory. The commit takes both.

use std::collections::BTreeMap;

use scion_engine::ops::pages::PageChanges;
use scion_engine::ops::spill::SpilledPages;
use scion_engine::EngineResult;

/// Dirty bytes kept in memory by default before they are set aside (`?spill_kib=` sets it).
pub(crate) const DEFAULT_SPILL_AFTER: u64 = 64 << 20;

#[derive(Debug)]
pub(crate) struct DirtyPages {
    memory: BTreeMap<u32, Vec<u8>>,
    /// Bytes of the pages in `memory`, kept as they come and go (checked at every write).
    memory_bytes: u64,
    spilled: SpilledPages,
    spill_after: u64,
}

impl DirtyPages {
    pub(crate) fn new(spill_after: u64) -> DirtyPages {
        DirtyPages {
            memory: BTreeMap::new(),
            memory_bytes: 0,
            spilled: SpilledPages::default(),
            spill_after,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.memory.is_empty() && self.spilled.is_empty()
    }

    /// The image of `pgno` this transaction wrote, if any.
    pub(crate) fn get(&self, pgno: u32) -> EngineResult<Option<std::borrow::Cow<'_, [u8]>>> {
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
        base: impl FnOnce() -> EngineResult<Vec<u8>>,
    ) -> EngineResult<&mut Vec<u8>> {
        if !self.memory.contains_key(&pgno) {
            let page = match self.spilled.take(pgno)? {
                Some(p) => p,
                None => base()?,
            };
            self.memory_bytes += page.len() as u64;
            self.memory.insert(pgno, page);
        }
        Ok(self.memory.get_mut(&pgno).expect("just inserted"))
    }

    /// Set pages aside once memory holds more than the bound.
    pub(crate) fn bound(&mut self) -> EngineResult<()> {
        if self.memory_bytes <= self.spill_after {
            return Ok(());
        }
        let page1 = self.memory.remove(&1);
        for (pgno, page) in std::mem::take(&mut self.memory) {
            self.spilled.put(pgno, &page)?;
        }
        self.memory_bytes = 0;
        if let Some(p) = page1 {
            self.memory_bytes = p.len() as u64;
            self.memory.insert(1, p);
        }
        Ok(())
    }

    /// Forget pages above `last`.
    pub(crate) fn truncate(&mut self, last: u32) {
        self.memory.retain(|&p, _| p <= last);
        self.memory_bytes = self.memory.values().map(|p| p.len() as u64).sum();
        self.spilled.truncate(last);
    }

    /// Everything written, as a commit takes it; page 1 (in memory) given to `page1` first.
    pub(crate) fn take(
        &mut self,
        page_size: u32,
        page_count: u32,
        page1: impl FnOnce(&mut Vec<u8>) -> EngineResult<()>,
    ) -> EngineResult<PageChanges> {
        let mut pages = std::mem::take(&mut self.memory);
        self.memory_bytes = 0;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn write(d: &mut DirtyPages, pgno: u32) {
        d.page_mut(pgno, || Ok(vec![pgno as u8; 512]))
            .unwrap()
            .fill(pgno as u8);
        d.bound().unwrap();
    }

    #[test]
    fn pages_past_the_bound_are_set_aside_and_page_1_stays() {
        let mut d = DirtyPages::new(2 * 512);
        write(&mut d, 1);
        write(&mut d, 2);
        assert!(d.spilled.is_empty(), "at the bound, nothing is set aside");
        write(&mut d, 3);
        assert_eq!(d.spilled.pgnos().collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(d.memory_bytes, 512, "page 1 alone in memory");
        // A page set aside comes back to memory when written again.
        write(&mut d, 2);
        assert_eq!(d.memory_bytes, 1024);
        assert_eq!(d.get(3).unwrap().unwrap()[0], 3);
        d.truncate(2);
        assert_eq!(d.memory_bytes, 1024);
        assert!(d.get(3).unwrap().is_none());
        let changes = d.take(512, 2, |_| Ok(())).unwrap();
        assert_eq!(
            changes.pages.keys().copied().collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(d.is_empty() && d.memory_bytes == 0);
    }
}
