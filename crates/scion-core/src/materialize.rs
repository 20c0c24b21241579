//! Writing a version out as a stock SQLite file.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{CoreError, CoreResult};
use crate::format::{page_contribution, page_hash, Locator, RootRecord, Slot};
use crate::pagemap;
use crate::reader::FrameReader;
use crate::sqlite_io::set_wal_mode_bytes;

/// Contiguous pages are gathered up to this size before one write.
const WRITE_CHUNK: usize = 4 << 20;

/// Journal mode written into page 1 of the output file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalMode {
    /// Bytes 18/19 = 2: a checkout, opened in WAL mode by every client.
    Wal,
    /// Bytes 18/19 = 1: a plain file, as `export` writes.
    Rollback,
}

/// The result of materializing: the root read and the hash of every page.
pub struct Materialized {
    pub root: RootRecord,
    pub hashes: Vec<u64>,
}

/// Write the version at `root_loc` into `out` (which must be empty), verifying every frame
/// and the version's whole-database checksum.
pub fn materialize(
    reader: &FrameReader,
    root_loc: &Locator,
    out: &File,
    out_path: &Path,
    mode: JournalMode,
) -> CoreResult<Materialized> {
    let root = reader.root(root_loc)?;
    let page_size = root.page_size as usize;
    let leaves = pagemap::leaves(reader, root.node, root.depth, root.fanout_bits)?;
    let zero_hash = page_hash(&vec![0u8; page_size]);
    let mut hashes = vec![zero_hash; root.page_count as usize];
    out.set_len(root.page_count as u64 * page_size as u64)
        .map_err(|e| CoreError::io(out_path, e))?;

    // Two stages on two threads: fetch, decode and verify here; write on the caller's
    // thread. Writing the file is most of the cost, so decoding hides behind it.
    let items: Vec<(Slot, u32)> = leaves
        .into_iter()
        .map(|(idx, slot)| (slot, idx + 1))
        .collect();
    let (tx, rx) = std::sync::mpsc::sync_channel::<(u64, Vec<u8>)>(8);
    let checksum = std::thread::scope(|scope| -> CoreResult<u64> {
        let hashes = &mut hashes;
        let producer = scope.spawn(move || -> CoreResult<u64> {
            let mut checksum = 0u64;
            let mut chunk: Vec<u8> = Vec::with_capacity(WRITE_CHUNK + page_size);
            let mut chunk_start: u64 = 0;
            let mut next_idx: u64 = u64::MAX;
            let gone = || CoreError::io(out_path, std::io::Error::other("writer stopped"));
            reader.for_each_page(items, |frame| {
                let idx = *frame.tag - 1;
                if idx >= root.page_count || frame.raw.len() != page_size {
                    return Err(CoreError::corrupt(
                        format!("version {root_loc}"),
                        format!("page {} does not fit the version's size", idx + 1),
                    ));
                }
                hashes[idx as usize] = frame.hash;
                checksum = checksum.wrapping_add(page_contribution(idx + 1, frame.hash, zero_hash));
                if idx as u64 != next_idx || chunk.len() >= WRITE_CHUNK {
                    if !chunk.is_empty() {
                        let full = std::mem::replace(
                            &mut chunk,
                            Vec::with_capacity(WRITE_CHUNK + page_size),
                        );
                        tx.send((chunk_start, full)).map_err(|_| gone())?;
                    }
                    chunk_start = idx as u64;
                }
                let at = chunk.len();
                chunk.extend_from_slice(&frame.raw);
                if idx == 0 && mode == JournalMode::Wal {
                    set_wal_mode_bytes(&mut chunk[at..at + page_size]);
                }
                next_idx = idx as u64 + 1;
                Ok(())
            })?;
            if !chunk.is_empty() {
                tx.send((chunk_start, chunk)).map_err(|_| gone())?;
            }
            Ok(checksum)
        });
        let mut write_result = Ok(());
        for (start, chunk) in rx {
            if let Err(e) = out.write_all_at(&chunk, start * page_size as u64) {
                write_result = Err(CoreError::io(out_path, e));
                break;
            }
        }
        let produced = producer.join().expect("materialize reader thread panicked");
        write_result?;
        produced
    })?;
    if checksum != root.db_checksum {
        return Err(CoreError::corrupt(
            format!("version {root_loc}"),
            "whole-database checksum mismatch after materializing",
        ));
    }
    Ok(Materialized { root, hashes })
}
