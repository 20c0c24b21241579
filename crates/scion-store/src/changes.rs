//! A host-local change board for a store directory: a small shared memory file in which
//! every write of a non-segment object (a ref, a checkpoint) by any process on this host is
//! announced before it starts and after it ends. A reader that cached an object's state can
//! then tell, without a system call, that nothing wrote it since: the VFS checks a branch
//! head this way at every read transaction instead of reading the ref file.
//!
//! Each key hashes to one of [`SLOTS`] slots of two counters, `begun` and `ended`. A writer
//! bumps `begun`, writes, then bumps `ended` (whatever the outcome). A reader takes a stamp
//! (`ended`, then `begun`, equal) before it reads the object; the stamp still being the
//! slot's value later proves no write to any key of the slot began in between.
//!
//! A writer killed between its two bumps would leave its slot unequal for good, and readers
//! of the slot's keys would read the object every time (slower, never stale). So each writer
//! holds a shared open-file-description lock on its slot's 16 bytes of the board file from
//! before its first bump until after its second; the kernel drops the lock of a killed
//! process. A reader that finds a slot unequal tries for an exclusive lock on it through a
//! second description of the file: taking it proves no writer on this host is between its
//! bumps, and the reader then raises both counters to one value past either, which heals
//! the slot and matches no stamp taken before. Locks of one description merge (a thread's
//! unlock would drop another's), so the threads of a process count their writers per slot
//! and lock and unlock the slot only on the first and the last.

use crate::range_lock::{lock_range, Locked, RangeLock, Wait};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Slots on the board; keys share a slot by hash.
pub const SLOTS: usize = 1024;
const BYTES: usize = SLOTS * 16;

#[derive(Debug)]
pub(crate) struct ChangeBoard {
    map: *mut AtomicU64,
    /// The description writers lock their slots through.
    file: File,
    /// A second description of the same file, through which a reader proves no writer is
    /// between its bumps (locks of one description never conflict with each other).
    healer: File,
    /// Writers of this process between their bumps, per slot.
    writers: Mutex<HashMap<usize, u32>>,
}

// SAFETY: the mapping is only accessed through atomics, and lives as long as the board.
unsafe impl Send for ChangeBoard {}
// SAFETY: as above.
unsafe impl Sync for ChangeBoard {}

impl ChangeBoard {
    /// The board at `path`, made if missing; `None` where it cannot be mapped (a read-only
    /// store directory): readers then read every object.
    pub(crate) fn open(path: &Path) -> Option<ChangeBoard> {
        let open = || {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
        };
        let file = open().ok()?;
        let healer = open().ok()?;
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
            file,
            healer,
            writers: Mutex::default(),
        })
    }

    fn slot(key: &str) -> usize {
        (xxhash_rust::xxh3::xxh3_64(key.as_bytes()) % SLOTS as u64) as usize
    }

    fn counters(&self, slot: usize) -> (&AtomicU64, &AtomicU64) {
        // SAFETY: 2 * slot + 1 < 2 * SLOTS, the mapping's length in u64s; it is aligned to
        // a page, so every u64 in it is aligned.
        unsafe { (&*self.map.add(2 * slot), &*self.map.add(2 * slot + 1)) }
    }

    /// The slot's stamp when no write of its keys is under way. A slot left unequal by a
    /// writer that died between its bumps is healed here (see the module's notes).
    pub(crate) fn stamp(&self, key: &str) -> Option<u64> {
        let slot = Self::slot(key);
        let (begun, ended) = self.counters(slot);
        let e = ended.load(Ordering::SeqCst);
        let b = begun.load(Ordering::SeqCst);
        if b == e {
            return Some(e);
        }
        self.heal(slot)
    }

    /// Make an unequal slot equal if no writer on this host is between its bumps, and
    /// answer its stamp; `None` while a writer is.
    fn heal(&self, slot: usize) -> Option<u64> {
        let writers = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        if writers.get(&slot).is_some_and(|n| *n > 0) {
            return None;
        }
        if slot_lock(&self.healer, slot, RangeLock::Exclusive, Wait::No) != Some(Locked::Granted) {
            return None;
        }
        let (begun, ended) = self.counters(slot);
        let (b, e) = (begun.load(Ordering::SeqCst), ended.load(Ordering::SeqCst));
        let stamp = if b == e {
            e
        } else {
            // One past both, so no stamp taken before matches; `begun` first, as a writer
            // bumps it first.
            let healed = b.max(e) + 1;
            begun.store(healed, Ordering::SeqCst);
            ended.store(healed, Ordering::SeqCst);
            healed
        };
        slot_lock(&self.healer, slot, RangeLock::Unlock, Wait::No);
        drop(writers);
        Some(stamp)
    }

    /// Announce a write of `key`; it is announced ended when the guard drops.
    pub(crate) fn writing(&self, key: &str) -> Writing<'_> {
        let slot = Self::slot(key);
        {
            let mut writers = self.writers.lock().unwrap_or_else(|p| p.into_inner());
            let n = writers.entry(slot).or_insert(0);
            if *n == 0 {
                // Waits only while a reader heals the slot (a few microseconds). Should the
                // lock fail, the write goes on: a reader might then heal the slot under it,
                // and this write's end leaves the slot unequal again (`ended` ahead), for
                // the next reader to heal. A stamp taken in between no longer matches, so
                // no reader is ever answered stale.
                slot_lock(&self.file, slot, RangeLock::Shared, Wait::Yes);
            }
            *n += 1;
        }
        let (begun, _) = self.counters(slot);
        begun.fetch_add(1, Ordering::SeqCst);
        Writing { board: self, slot }
    }

    fn written(&self, slot: usize) {
        let (_, ended) = self.counters(slot);
        ended.fetch_add(1, Ordering::SeqCst);
        let mut writers = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = writers.get_mut(&slot) {
            *n -= 1;
            if *n == 0 {
                writers.remove(&slot);
                slot_lock(&self.file, slot, RangeLock::Unlock, Wait::No);
            }
        }
    }
}

/// Lock or unlock `slot`'s 16 bytes of the board; `None` where the lock cannot be made
/// (the board then works without healing: see the notes at the lock's callers).
fn slot_lock(file: &File, slot: usize, what: RangeLock, wait: Wait) -> Option<Locked> {
    lock_range(file, (slot * 16) as u64, 16, what, wait).ok()
}

impl Drop for ChangeBoard {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, unmapped once.
        unsafe { libc::munmap(self.map.cast(), BYTES) };
    }
}

pub(crate) struct Writing<'a> {
    board: &'a ChangeBoard,
    slot: usize,
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.board.written(self.slot);
    }
}
