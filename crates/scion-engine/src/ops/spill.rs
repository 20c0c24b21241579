//! Pages set aside in an unnamed temporary file, so that a writer whose transaction
//! changes more pages than it may keep in memory (a bulk load through the VFS) stays
//! bounded. The file vanishes with its last handle, a crash included.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::error::{EngineError, EngineResult};

/// Changed pages kept in a temporary file, by page number.
#[derive(Debug, Clone, Default)]
pub struct SpilledPages {
    file: Option<Arc<File>>,
    /// Where each page is in the file.
    at: BTreeMap<u32, u64>,
    /// Places of pages taken back out, reused before the file grows.
    free: Vec<u64>,
    end: u64,
    page_size: usize,
}

fn spill_error(e: std::io::Error) -> EngineError {
    EngineError::io(std::path::Path::new("(temporary page file)"), e)
}

impl SpilledPages {
    /// How many pages are set aside.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Whether page `pgno` is set aside here.
    pub fn contains(&self, pgno: u32) -> bool {
        self.at.contains_key(&pgno)
    }

    /// The highest page number held.
    pub fn last(&self) -> Option<u32> {
        self.at.last_key_value().map(|(&p, _)| p)
    }

    /// The page numbers held, in order.
    pub fn pgnos(&self) -> impl Iterator<Item = u32> + '_ {
        self.at.keys().copied()
    }

    /// Bytes of pages held.
    pub fn bytes(&self) -> u64 {
        self.at.len() as u64 * self.page_size as u64
    }

    /// Set `pgno` aside (replacing an earlier image of it). Every page must have one size.
    pub fn put(&mut self, pgno: u32, page: &[u8]) -> EngineResult<()> {
        if self.page_size == 0 {
            self.page_size = page.len();
        }
        if page.len() != self.page_size {
            return Err(EngineError::InvalidInput {
                reason: format!(
                    "a {}-byte page among {}-byte pages",
                    page.len(),
                    self.page_size
                ),
            });
        }
        let file = match &self.file {
            Some(f) => f.clone(),
            None => {
                let f = Arc::new(tempfile::tempfile().map_err(spill_error)?);
                self.file = Some(f.clone());
                f
            }
        };
        let offset = match self.at.get(&pgno) {
            Some(&o) => o,
            None => self.free.pop().unwrap_or_else(|| {
                let o = self.end;
                self.end += page.len() as u64;
                o
            }),
        };
        file.write_all_at(page, offset).map_err(spill_error)?;
        self.at.insert(pgno, offset);
        Ok(())
    }

    /// The image of `pgno` set aside, if any.
    pub fn get(&self, pgno: u32) -> EngineResult<Option<Vec<u8>>> {
        let (Some(&offset), Some(file)) = (self.at.get(&pgno), &self.file) else {
            return Ok(None);
        };
        let mut page = vec![0u8; self.page_size];
        file.read_exact_at(&mut page, offset).map_err(spill_error)?;
        Ok(Some(page))
    }

    /// Take `pgno` back out (its image, if it was held).
    pub fn take(&mut self, pgno: u32) -> EngineResult<Option<Vec<u8>>> {
        let page = self.get(pgno)?;
        if let Some(offset) = self.at.remove(&pgno) {
            self.free.push(offset);
        }
        Ok(page)
    }

    /// Forget every page above `last`.
    pub fn truncate(&mut self, last: u32) {
        let gone = self.at.split_off(&last.saturating_add(1));
        self.free.extend(gone.into_values());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_set_aside_come_back_and_places_are_reused() {
        let mut s = SpilledPages::default();
        s.put(3, &[3u8; 512]).unwrap();
        s.put(9, &[9u8; 512]).unwrap();
        s.put(3, &[33u8; 512]).unwrap();
        assert_eq!(s.get(3).unwrap().unwrap(), vec![33u8; 512]);
        assert_eq!(s.take(9).unwrap().unwrap(), vec![9u8; 512]);
        assert!(!s.contains(9));
        s.put(12, &[12u8; 512]).unwrap();
        assert_eq!(s.end, 1024, "the place page 9 left is reused");
        s.truncate(5);
        assert_eq!(s.pgnos().collect::<Vec<_>>(), vec![3]);
        assert!(s.put(4, &[0u8; 100]).is_err());
    }
}
