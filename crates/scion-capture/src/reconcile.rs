//! Reconcile: when the cursor cannot continue (a restart after the WAL was restarted or
//! deleted, a file switched out of WAL mode, a broken chain), compare the database's
//! published state page by page with the durable version and capture what differs.

use std::time::Duration;

use scion_core::format::normalize_page1;
use scion_core::format::page_hash;

use crate::capturer::{io_err, Capturer};
use crate::cursor::Cursor;
use crate::error::{CaptureError, CaptureResult};
use crate::pending::{lock_byte_page, Pending};
use crate::walfile::{verify_frames, Checksum};

/// What a reconcile found.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ReconcileReport {
    pub pages_read: u64,
    pub bytes_read: u64,
    pub pages_changed: u64,
    pub page_count: u32,
}

impl Capturer {
    /// Make the pending set whatever differs between the database's published state and
    /// a durable version whose page hashes `base` gives (`base.len()` pages), and set the
    /// cursor to the published end. O(size), read locally; used when the cursor cannot
    /// resume.
    pub fn reconcile(&mut self, base: &[u64]) -> CaptureResult<ReconcileReport> {
        for _ in 0..100 {
            if let Some(report) = self.try_reconcile(base)? {
                return Ok(report);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Err(CaptureError::Unsettled {
            path: self.path.clone(),
        })
    }

    fn try_reconcile(&mut self, base: &[u64]) -> CaptureResult<Option<ReconcileReport>> {
        let Some(p) = self.published()? else {
            return Ok(None);
        };
        let mut from_wal: std::collections::HashMap<u32, Vec<u8>> = Default::default();
        let mut cursor = Cursor {
            salts: p.salts,
            frame: 0,
            checksum: Checksum::default(),
        };
        let page_count;
        if p.max_frame > 0 {
            let Some(wal) = self.wal()? else {
                return Ok(None);
            };
            let Some(header) = wal.header().map_err(io_err(&self.wal_path))? else {
                return Ok(None);
            };
            if header.salts != p.salts || header.page_size != self.page_size {
                return Ok(None);
            }
            let Some(buf) = wal
                .frames(1, p.max_frame, self.page_size)
                .map_err(io_err(&self.wal_path))?
            else {
                return Ok(None);
            };
            let Some(run) = verify_frames(&buf, &header, p.salts, header.checksum) else {
                return Ok(None);
            };
            if run.end != p.frame_checksum {
                return Ok(None);
            }
            let last = run.frames.last().expect("at least one frame").0;
            if last.commit_size == 0 {
                return Ok(None);
            }
            page_count = last.commit_size;
            for (h, page) in &run.frames {
                from_wal.insert(h.pgno, page.to_vec());
            }
            cursor.frame = p.max_frame;
            cursor.checksum = run.end;
        } else {
            let len = self.db.metadata().map_err(io_err(&self.path))?.len();
            page_count = (len / self.page_size as u64) as u32;
        }
        let zero = page_hash(&vec![0u8; self.page_size as usize]);
        let lock_page = lock_byte_page(self.page_size);
        let mut pending = Pending::new(self.page_size, page_count, cursor);
        let mut read = 0u64;
        for pgno in 1..=page_count {
            if pgno == lock_page {
                continue;
            }
            let mut image = match from_wal.remove(&pgno) {
                Some(page) => page,
                None => self.read_db_page(pgno)?,
            };
            if pgno == 1 {
                normalize_page1(&mut image);
            }
            read += image.len() as u64;
            let was = base.get(pgno as usize - 1).copied().unwrap_or(zero);
            if page_hash(&image) != was {
                pending.pages.insert(pgno, image);
            }
        }
        let changed = pending.pages.len() as u64;
        let shrank = page_count < base.len() as u32;
        pending.transactions = u64::from(changed > 0 || shrank);
        self.pending = pending;
        self.cursor = Some(cursor);
        self.vouched = true;
        Ok(Some(ReconcileReport {
            pages_read: page_count as u64,
            bytes_read: read,
            pages_changed: changed,
            page_count,
        }))
    }
}
