//! Writing a version out as a stock SQLite file.
//!
//! The calling thread walks the page map a group of leaf nodes at a time and queues each
//! group's full page frames, in store order, as batches of coalesced runs. The decode
//! threads (one per core, at least two) start on the first batch while the map is still
//! being read: each reads the frames of half an L2 cache's worth of pages into a buffer it
//! keeps, decodes and verifies them, and `pwrite`s those pages at their offsets before
//! reading more (lz4 reads frames, and the kernel copies pages into the page cache, while
//! they are still in the core's cache: 315 → 291 ms at 1 GiB against reading a whole batch
//! first), and hands back only the pages' hashes; the calling thread keeps the
//! whole-database checksum. Delta pages (few: only recently changed ones) follow, resolved
//! against their bases.
//!
//! The threads take turns at the file (`WriteTurn`): a buffered write holds the inode's
//! lock, and a thread that finds it taken spins in the kernel until the other's copy ends
//! (8 % of a 1 GiB checkout's CPU when both simply wrote). A thread that finds the turn
//! taken decodes its next chunk instead and writes both when its turn comes.
//!
//! The file is preallocated with `fallocate`: ext4 skips its per-write delayed-allocation
//! reservation for blocks that already exist (387 → 305 ms at 1 GiB), and a full disk
//! fails before any decoding.
//!
//! Measured alternatives: one writer thread fed by the decoders (the writer's copy into the
//! page cache was the critical path); a third decode thread on two cores (no faster: two
//! keep both busy); and decoding into a shared mapping of the output (slower, even with each
//! chunk faulted in at once by `MADV_POPULATE_WRITE`: the kernel zeroes every page it maps
//! into a new file and ext4 prepares each block on its first write fault, and a full disk
//! would kill the process with SIGBUS instead of failing the write); and mapping the
//! segments instead of reading them (7 % at the median, nothing at the minimum: lz4 takes
//! the cache misses the read's copy took, and a truncated segment or a disk error would
//! become a SIGBUS instead of an error retried from the store).

use std::fs::File;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{EngineError, EngineResult};
use crate::format::{
    decode_frame_into, page_contribution, page_hash, FrameKind, Locator, RootRecord, Slot,
};
use crate::pagemap;
use crate::progress::Progress;
use crate::reader::{FrameReader, MAX_RUN_BYTES};
use crate::sqlite_io::set_wal_mode_bytes;

/// Decode threads never number more than this: past it the turns at the file, not the
/// decoding, set the pace.
const MAX_DECODE_THREADS: usize = 8;
/// A batch, a decode thread's unit of work: adjacent frames of one segment, at most this
/// many bytes, read a chunk at a time.
const BATCH_BYTES: u64 = 4 << 20;
/// Decoded pages are written this many bytes at a time, while they are still in the
/// decoding core's cache (half of a typical per-core L2).
const WRITE_CHUNK_BYTES: usize = 512 << 10;
/// The page map is walked this many pages' worth of leaf nodes at a time.
const GROUP_PAGES: usize = 8192;

/// Journal mode written into page 1 of the output file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalMode {
    /// Bytes 18/19 = 2: a checkout, opened in WAL mode by every client.
    Wal,
    /// Bytes 18/19 = 1: a plain file, as `export` writes.
    Rollback,
}

/// Whether the caller will sync the output before reporting it written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// A cache (a checkout): the kernel writes the pages back when it likes.
    Cache,
    /// The caller syncs the file before it answers (an export): writeback of each chunk
    /// starts as soon as it is written, so the disk works while later pages are decoded
    /// and the final `fsync` waits on little (1 GiB export: 620 → 375 ms).
    Synced,
}

/// The result of materializing: the root read and the hash of every page.
pub struct Materialized {
    /// The version's root record.
    pub root: RootRecord,
    /// The hash of every page written, in page order.
    pub hashes: Vec<u64>,
}

/// Decoded pages of one batch: page indexes (0-based) in buffer order, their hashes, and
/// the pages back to back.
#[derive(Default)]
struct Batch {
    idx: Vec<u32>,
    hashes: Vec<u64>,
    pages: Vec<u8>,
}

impl crate::Engine {
    /// Write the version at `root` into `out` (at `out_path`, which must be empty),
    /// verifying every frame and the version's whole-database checksum.
    pub fn materialize(
        &self,
        root: &Locator,
        (out, out_path): (&File, &Path),
        mode: JournalMode,
        durability: Durability,
    ) -> EngineResult<Materialized> {
        materialize(
            &self.reader,
            root,
            out,
            out_path,
            mode,
            durability,
            &*self.progress,
        )
    }
}

/// Write the version at `root_loc` into `out` (which must be empty), verifying every frame
/// and the version's whole-database checksum.
pub(crate) fn materialize(
    reader: &FrameReader,
    root_loc: &Locator,
    out: &File,
    out_path: &Path,
    mode: JournalMode,
    durability: Durability,
    progress: &dyn Progress,
) -> EngineResult<Materialized> {
    let root = reader.root(root_loc)?;
    let page_size = root.page_size as usize;
    let zero_hash = page_hash(&vec![0u8; page_size]);
    let mut hashes = vec![zero_hash; root.page_count as usize];
    preallocate(out, root.page_count as u64 * page_size as u64)
        .map_err(|e| EngineError::io(out_path, e))?;
    progress.start("writing", root.page_count as u64);
    let corrupt = |why: String| EngineError::corrupt(format!("version {root_loc}"), why);

    let mut checksum = 0u64;
    let mut account = |idx: &[u32], page_hashes: &[u64]| {
        progress.advance(idx.len() as u64);
        for (idx, h) in idx.iter().zip(page_hashes) {
            hashes[*idx as usize] = *h;
            checksum = checksum.wrapping_add(page_contribution(idx + 1, *h, zero_hash));
        }
    };
    let turn = WriteTurn::default();
    let output = Output {
        file: out,
        path: out_path,
        page_size,
        mode,
        durability,
    };

    // The calling thread walks the page map a group of leaf nodes at a time and queues
    // each group's full frames, in store order, as batches; the decode threads start on
    // the first batch while the rest of the map is still being read. Delta pages wait.
    let mut deltas: Vec<(Slot, u32)> = Vec::new();
    let stop = AtomicBool::new(false);
    let threads = decode_threads();
    let (work_tx, work_rx) = std::sync::mpsc::sync_channel::<Vec<(u32, Slot)>>(2 * threads);
    let work_rx = Arc::new(Mutex::new(work_rx));
    // Written batches come back as their page numbers and hashes only.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<EngineResult<(Vec<u32>, Vec<u64>)>>();
    std::thread::scope(|scope| -> EngineResult<()> {
        for _ in 0..threads {
            let (work_rx, done_tx, stop) = (work_rx.clone(), done_tx.clone(), &stop);
            let writer = ChunkWriter {
                output: &output,
                turn: &turn,
            };
            scope.spawn(move || {
                // Buffers per thread, reused: no fresh (zeroed, faulted-in) memory per batch.
                let mut buffers = Buffers::default();
                loop {
                    let next = work_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok(items) = next else { break };
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let answer = decode_batch(reader, &items, page_size, &mut buffers, &writer);
                    let failed = answer.is_err();
                    if done_tx.send(answer).is_err() || failed {
                        // Stop the others early too.
                        stop.store(true, Ordering::SeqCst);
                        break;
                    }
                }
            });
        }
        drop((work_rx, done_tx));
        let mut result = Ok(());
        let mut settle = |written: EngineResult<(Vec<u32>, Vec<u64>)>,
                          result: &mut EngineResult<()>| {
            match written {
                Ok((idx, page_hashes)) => account(&idx, &page_hashes),
                Err(e) => {
                    if result.is_ok() {
                        *result = Err(e);
                    }
                    stop.store(true, Ordering::SeqCst);
                }
            }
        };
        let walked = pagemap::for_each_leaf_group(
            reader,
            root.node,
            root.depth,
            root.fanout_bits,
            GROUP_PAGES,
            |group| {
                if let Some((idx, _)) = group.iter().find(|(idx, _)| *idx >= root.page_count) {
                    return Err(corrupt(format!(
                        "page {} beyond page count {}",
                        idx + 1,
                        root.page_count
                    )));
                }
                let mut full = Vec::with_capacity(group.len());
                for (idx, slot) in group {
                    match slot.base {
                        None => full.push((idx, slot)),
                        Some(_) => deltas.push((slot, idx + 1)),
                    }
                }
                full.sort_unstable_by_key(|(_, s)| (s.loc.segment, s.loc.offset));
                for range in plan_batches(&full) {
                    // A closed queue means every decode thread stopped on an error, which
                    // is waiting in the answers: the walk ends there.
                    if stop.load(Ordering::SeqCst) || work_tx.send(full[range].to_vec()).is_err() {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                while let Ok(written) = done_rx.try_recv() {
                    settle(written, &mut result);
                }
                Ok(ControlFlow::Continue(()))
            },
        );
        drop(work_tx);
        if let Err(e) = walked {
            stop.store(true, Ordering::SeqCst);
            result = Err(e);
        }
        for written in done_rx {
            settle(written, &mut result);
        }
        result
    })?;

    reader.for_each_page(deltas, |frame| {
        let idx = *frame.tag - 1;
        if frame.raw.len() != page_size {
            return Err(corrupt(format!(
                "page {} is {} bytes",
                idx + 1,
                frame.raw.len()
            )));
        }
        let mut b = Batch {
            idx: vec![idx],
            hashes: vec![frame.hash],
            pages: frame.raw,
        };
        output.write(&mut b)?;
        output.start_writeback(&b);
        account(&b.idx, &b.hashes);
        Ok(())
    })?;

    progress.finish();
    if checksum != root.db_checksum {
        return Err(corrupt(
            "whole-database checksum mismatch after materializing".into(),
        ));
    }
    Ok(Materialized { root, hashes })
}

/// One decode thread per core this process may use (cgroup quotas included), at least two
/// so that one decodes while the other has its turn at the file, and at most
/// [`MAX_DECODE_THREADS`]. On two cores a third thread was measured no faster; lz4 decoding
/// costs about as much CPU as the kernel's copy into the page cache, so each core added
/// takes decoding off the one thread writing at a time.
/// Asked once per process: the answer reads cgroup files, which no checkout should repeat.
fn decode_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, MAX_DECODE_THREADS)
    })
}

/// Give `out` its final length with its blocks allocated up front: buffered writes into
/// allocated (unwritten) extents skip the filesystem's per-write delayed-allocation
/// reservation, and a full disk fails here, before any decoding. A filesystem without
/// `fallocate` gets a sparse file of the same length.
pub fn preallocate(out: &File, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return Ok(());
    }
    // SAFETY: a plain syscall on a descriptor `out` owns for the duration of the call.
    let rc = unsafe { libc::fallocate(out.as_raw_fd(), 0, 0, len as libc::off_t) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL) => out.set_len(len),
        _ => Err(err),
    }
}

/// The file being written, and how.
struct Output<'a> {
    file: &'a File,
    path: &'a Path,
    page_size: usize,
    mode: JournalMode,
    durability: Durability,
}

impl Output<'_> {
    /// Write a decoded batch at its pages' offsets, one `pwrite` per run of consecutive
    /// pages (page 1 marked for WAL mode first when the output is a checkout).
    fn write(&self, b: &mut Batch) -> EngineResult<()> {
        let page_size = self.page_size;
        for run in page_runs(&b.idx) {
            if b.idx[run.start] == 0 && self.mode == JournalMode::Wal {
                set_wal_mode_bytes(&mut b.pages[run.start * page_size..][..page_size]);
            }
            self.file
                .write_all_at(
                    &b.pages[run.start * page_size..run.end * page_size],
                    b.idx[run.start] as u64 * page_size as u64,
                )
                .map_err(|e| EngineError::io(self.path, e))?;
        }
        Ok(())
    }

    /// For an output the caller will sync: ask the kernel to start writing `b`'s pages back
    /// to disk, without waiting. Advisory: a filesystem that cannot is left to the final
    /// `fsync`, which also reports any write error.
    fn start_writeback(&self, b: &Batch) {
        use std::os::fd::AsRawFd;
        if self.durability != Durability::Synced {
            return;
        }
        for run in page_runs(&b.idx) {
            let offset = b.idx[run.start] as u64 * self.page_size as u64;
            // SAFETY: a plain syscall on a descriptor `file` owns for the duration of the call.
            let _ = unsafe {
                libc::sync_file_range(
                    self.file.as_raw_fd(),
                    offset as libc::off64_t,
                    (run.len() * self.page_size) as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                )
            };
        }
    }
}

/// The runs of consecutive page indexes in `idx`, as ranges of its positions.
fn page_runs(idx: &[u32]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= idx.len() {
            return None;
        }
        let start = i;
        i += 1;
        while i < idx.len() && idx[i] == idx[i - 1] + 1 {
            i += 1;
        }
        Some(start..i)
    })
}

/// Split frames sorted by location into runs that are adjacent in one segment.
fn plan_batches(full: &[(u32, Slot)]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < full.len() {
        let start = full[i].1.loc;
        let mut end = start.end();
        let mut j = i + 1;
        while j < full.len() {
            let l = full[j].1.loc;
            if l.segment != start.segment
                || l.offset != end
                || l.end() - start.offset > BATCH_BYTES.min(MAX_RUN_BYTES)
            {
                break;
            }
            end = l.end();
            j += 1;
        }
        out.push(i..j);
        i = j;
    }
    out
}

/// Whose turn it is to write to the output file.
#[derive(Default)]
struct WriteTurn(Mutex<()>);

/// How a decode thread writes its chunks: one thread at a time; writeback (which can
/// wait for the disk's queue) is started after the turn is passed on.
struct ChunkWriter<'a> {
    output: &'a Output<'a>,
    turn: &'a WriteTurn,
}

impl ChunkWriter<'_> {
    /// Write `chunks` if the file is free, answering whether they were written.
    fn try_write(&self, chunks: &mut [Batch]) -> EngineResult<bool> {
        let turn = match self.turn.0.try_lock() {
            Ok(t) => t,
            Err(std::sync::TryLockError::WouldBlock) => return Ok(false),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        };
        self.write_in_turn(turn, chunks)?;
        Ok(true)
    }

    /// Write `chunks`, waiting for the turn.
    fn write(&self, chunks: &mut [Batch]) -> EngineResult<()> {
        let turn = self.turn.0.lock().unwrap_or_else(|p| p.into_inner());
        self.write_in_turn(turn, chunks)
    }

    fn write_in_turn(
        &self,
        turn: std::sync::MutexGuard<'_, ()>,
        chunks: &mut [Batch],
    ) -> EngineResult<()> {
        chunks.iter_mut().try_for_each(|c| self.output.write(c))?;
        drop(turn);
        chunks.iter().for_each(|c| self.output.start_writeback(c));
        Ok(())
    }
}

/// What a decode thread keeps from batch to batch.
#[derive(Default)]
struct Buffers {
    /// The frames of one chunk, as read.
    frames: Vec<u8>,
    /// Decoded pages on their way to the file: a second chunk is decoded while the other
    /// thread has the file.
    chunks: [Batch; 2],
}

/// Decode one run of adjacent frames and write its pages, a chunk at a time: each chunk's
/// frames are read just before they are decoded and its pages written just after, so both
/// are still in the CPU cache when they are used. Answer the pages' indexes and hashes.
fn decode_batch(
    reader: &FrameReader,
    items: &[(u32, Slot)],
    page_size: usize,
    buffers: &mut Buffers,
    writer: &ChunkWriter,
) -> EngineResult<(Vec<u32>, Vec<u64>)> {
    let chunk_pages = (WRITE_CHUNK_BYTES / page_size).max(1);
    let mut hashes = Vec::with_capacity(items.len());
    let mut idx = Vec::with_capacity(items.len());
    // Whether chunks[0] holds decoded pages that wait for the file.
    let mut waiting = false;
    for part in items.chunks(chunk_pages) {
        let chunk = &mut buffers.chunks[usize::from(waiting)];
        let start = part[0].1.loc;
        let len = part.last().unwrap().1.loc.end() - start.offset;
        reader.run_into(&start, len, &mut buffers.frames)?;
        if decode_chunk(part, page_size, &buffers.frames, chunk).is_err() {
            // A local copy may be what is damaged: read the chunk again from the store, once.
            reader.evict(start.segment);
            reader.run_into(&start, len, &mut buffers.frames)?;
            decode_chunk(part, page_size, &buffers.frames, chunk)?;
        }
        idx.extend_from_slice(&chunk.idx);
        hashes.extend_from_slice(&chunk.hashes);
        if waiting {
            writer.write(&mut buffers.chunks)?;
            waiting = false;
        } else {
            waiting = !writer.try_write(&mut buffers.chunks[..1])?;
        }
    }
    if waiting {
        writer.write(&mut buffers.chunks[..1])?;
    }
    Ok((idx, hashes))
}

/// Decode and verify the adjacent frames of `part` (read into `frames`) into `chunk`.
fn decode_chunk(
    part: &[(u32, Slot)],
    page_size: usize,
    frames: &[u8],
    chunk: &mut Batch,
) -> EngineResult<()> {
    let start = part[0].1.loc;
    chunk.idx.clear();
    chunk.hashes.clear();
    // Only growth is zeroed; a recycled buffer's old bytes are all overwritten below.
    chunk.pages.resize(part.len() * page_size, 0);
    for (k, (i, slot)) in part.iter().enumerate() {
        let lo = (slot.loc.offset - start.offset) as usize;
        let frame = &frames[lo..lo + slot.loc.len as usize];
        let hash = decode_frame_into(
            frame,
            FrameKind::Page,
            *i as u64 + 1,
            &mut chunk.pages[k * page_size..(k + 1) * page_size],
        )
        .map_err(|e| {
            EngineError::corrupt(format!("{} at {}", slot.loc.segment.key(), slot.loc), e.0)
        })?;
        chunk.hashes.push(hash);
        chunk.idx.push(*i);
    }
    Ok(())
}
