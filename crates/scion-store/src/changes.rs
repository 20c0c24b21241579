//! A host-local change board for a store directory: a small shared memory file in which
//! every write of a non-segment object (a ref, a checkpoint) by any process on this host is
//! announced before it starts and after it ends. A reader that cached an object's state can
//! then tell, without a system call, that nothing wrote it since: the VFS checks a branch
//! head this way at every read transaction instead of reading the ref file.
//!
//! Each key hashes to one of [`SLOTS`] slots of two counters, `begun` and `ended`. A writer
//! bumps `begun`, writes, then bumps `ended` (whatever the outcome). A reader takes a stamp
//! (`ended`, then `begun`, equal) before it reads the object; the stamp still being the
//! slot's value later proves no write to any key of the slot began in between. A writer
//! killed between its two bumps leaves the slot unequal for good: readers of its keys then
//! always read the object (slower, never stale).

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Slots on the board; keys share a slot by hash.
pub const SLOTS: usize = 1024;
const BYTES: usize = SLOTS * 16;

#[derive(Debug)]
pub(crate) struct ChangeBoard {
    map: *mut AtomicU64,
    _file: File,
}

// SAFETY: the mapping is only accessed through atomics, and lives as long as the board.
unsafe impl Send for ChangeBoard {}
// SAFETY: as above.
unsafe impl Sync for ChangeBoard {}

impl ChangeBoard {
    /// The board at `path`, made if missing; `None` where it cannot be mapped (a read-only
    /// store directory): readers then read every object.
    pub(crate) fn open(path: &Path) -> Option<ChangeBoard> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .ok()?;
        // Growing a file only adds zeros, so racing openers agree on the content.
        if file.metadata().ok()?.len() < BYTES as u64 {
            file.set_len(BYTES as u64).ok()?;
        }
        // SAFETY: a fresh shared mapping of BYTES bytes of a file at least that long.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        Some(ChangeBoard {
            map: map.cast(),
            _file: file,
        })
    }

    fn counters(&self, key: &str) -> (&AtomicU64, &AtomicU64) {
        let slot = (xxhash_rust::xxh3::xxh3_64(key.as_bytes()) % SLOTS as u64) as usize;
        // SAFETY: 2 * slot + 1 < 2 * SLOTS, the mapping's length in u64s; it is aligned to
        // a page, so every u64 in it is aligned.
        unsafe { (&*self.map.add(2 * slot), &*self.map.add(2 * slot + 1)) }
    }

    /// The slot's stamp when no write of its keys is under way.
    pub(crate) fn stamp(&self, key: &str) -> Option<u64> {
        let (begun, ended) = self.counters(key);
        let e = ended.load(Ordering::SeqCst);
        let b = begun.load(Ordering::SeqCst);
        (b == e).then_some(e)
    }

    /// Announce a write of `key`; it is announced ended when the guard drops.
    pub(crate) fn writing(&self, key: &str) -> Writing<'_> {
        let (begun, ended) = self.counters(key);
        begun.fetch_add(1, Ordering::SeqCst);
        Writing { ended }
    }
}

impl Drop for ChangeBoard {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, unmapped once.
        unsafe { libc::munmap(self.map.cast(), BYTES) };
    }
}

pub(crate) struct Writing<'a> {
    ended: &'a AtomicU64,
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.ended.fetch_add(1, Ordering::SeqCst);
    }
}
