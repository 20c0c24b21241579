//! Refreshing a checkout by rewriting only the pages that differ from the new head: a
//! rollback or promote onto a version a few pages away, or a forced one that discards a
//! few changed pages, costs those pages, not a copy of the whole file.
//!
//! The pages that differ come from the two versions' page maps (only map nodes that
//! differ are read) and, for a file with changes, from the page hashes its inspection just
//! computed; the new record's page hashes are the file's with those pages' replaced, and
//! their sum must give the new version's whole-database checksum before a byte is
//! written, so a page missed would show here, not in the file. Anything out of the
//! ordinary (no record, a journal with content, many pages changed) leaves the file to be
//! replaced whole.

use std::os::unix::fs::FileExt;

use super::files::DbFiles;
use super::sidecar::{Fingerprint, Sidecar};
use crate::error::{CoreError, CoreResult};
use crate::format::{page_contribution, page_hash};
use crate::refs::Ref;
use crate::Scion;
use scion_engine::sqlite_io::set_wal_mode_bytes;

/// Past one page in this many changed, writing the whole file is the cheaper refresh.
const MAX_SHARE: u64 = 8;
/// At most this many bytes of pages are held in memory for one refresh.
const MAX_BYTES: usize = 64 << 20;

impl Scion {
    /// Bring the checkout in `files` (judged as `seen`, its record naming the version it
    /// was made from) to the head `r` by rewriting the pages that differ: those that differ
    /// between the two versions and, for a file judged changed (`file_hashes`: the hash of
    /// each of its pages now), those where the file differs from its record. `false`: not
    /// done, nothing written; the caller replaces the file whole.
    pub(crate) fn refresh_in_place(
        &self,
        files: &DbFiles,
        seen: Fingerprint,
        r: &Ref,
        file_hashes: Option<&[u64]>,
    ) -> CoreResult<bool> {
        let Some(old) = Sidecar::load(files.db(), &r.root)? else {
            return Ok(false);
        };
        // The inspection that judged the file either proved it unmodified against this
        // record (by fingerprint or by hashing it) or hashed every page of it as it is
        // now; `patch` goes ahead only if the file is still as it was then.
        if (old.root == r.root && file_hashes.is_none()) || old.page_size != r.page_size {
            return Ok(false);
        }
        let (a, b) = (
            self.engine.root_record(&old.root)?,
            self.engine.root_record(&r.root)?,
        );
        if a.page_size != b.page_size || old.hashes.len() != a.page_count as usize {
            return Ok(false);
        }
        let mut changed = self.engine.changed_pages(&old.root, &r.root)?;
        let mut hashes = match file_hashes {
            None => old.hashes,
            Some(now) => {
                for i in 0..now.len().max(old.hashes.len()) {
                    if now.get(i) != old.hashes.get(i) {
                        changed.insert(i as u32 + 1);
                    }
                }
                now.to_vec()
            }
        };
        // Pages the new version has past the file's end.
        changed.extend(hashes.len() as u32 + 1..=b.page_count);
        changed.retain(|p| *p <= b.page_count);
        let page_size = b.page_size as usize;
        if changed.len() * page_size > MAX_BYTES
            || changed.len() as u64 * MAX_SHARE > b.page_count as u64
        {
            return Ok(false);
        }
        let zero_hash = page_hash(&vec![0u8; page_size]);
        hashes.resize(b.page_count as usize, zero_hash);
        let mut pages: Vec<(u32, Vec<u8>)> = Vec::with_capacity(changed.len());
        self.engine
            .for_each_page_of(&r.root, &changed, |pgno, raw, hash| {
                hashes[pgno as usize - 1] = hash;
                pages.push((pgno, raw));
                Ok(())
            })?;
        let checksum = hashes.iter().enumerate().fold(0u64, |sum, (i, h)| {
            sum.wrapping_add(page_contribution(i as u32 + 1, *h, zero_hash))
        });
        if checksum != b.db_checksum {
            tracing::warn!(
                "{}: the pages found to differ do not add up to version {}; writing the whole file",
                files.db().display(),
                r.version
            );
            return Ok(false);
        }
        pages.sort_unstable_by_key(|(pgno, _)| *pgno);
        let record = Sidecar::unstamped(r, hashes);
        let path = files.db().to_path_buf();
        let len = b.page_count as u64 * page_size as u64;
        files.patch(
            seen,
            |file| {
                for (pgno, mut bytes) in pages {
                    if pgno == 1 {
                        set_wal_mode_bytes(&mut bytes);
                    }
                    file.write_all_at(&bytes, (pgno as u64 - 1) * page_size as u64)
                        .map_err(|e| CoreError::io(&path, e))?;
                }
                file.set_len(len).map_err(|e| CoreError::io(&path, e))
            },
            record,
        )
    }
}
