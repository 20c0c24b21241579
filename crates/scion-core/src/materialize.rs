//! Writing a version out as a stock SQLite file.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{CoreError, CoreResult};
use crate::format::{page_contribution, page_hash, FrameKind, Locator, RootRecord};
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

    let mut checksum = 0u64;
    let mut chunk: Vec<u8> = Vec::with_capacity(WRITE_CHUNK + page_size);
    let mut chunk_start: u64 = 0;
    let mut next_idx: u64 = u64::MAX;
    let flush = |chunk: &mut Vec<u8>, start: u64| -> CoreResult<()> {
        if !chunk.is_empty() {
            out.write_all_at(chunk, start * page_size as u64)
                .map_err(|e| CoreError::io(out_path, e))?;
            chunk.clear();
        }
        Ok(())
    };
    let items: Vec<(Locator, u32)> = leaves.into_iter().map(|(idx, loc)| (loc, idx)).collect();
    reader.for_each_frame(items, FrameKind::Page, |idx| *idx as u64 + 1, |frame| {
        let idx = *frame.tag;
        if idx >= root.page_count {
            return Err(CoreError::corrupt(
                format!("version {root_loc}"),
                format!("page {} beyond page count {}", idx + 1, root.page_count),
            ));
        }
        if frame.raw.len() != page_size {
            return Err(CoreError::corrupt(
                format!("version {root_loc}"),
                format!("page {} is {} bytes, page size {page_size}", idx + 1, frame.raw.len()),
            ));
        }
        hashes[idx as usize] = frame.hash;
        checksum = checksum.wrapping_add(page_contribution(idx + 1, frame.hash, zero_hash));
        if idx as u64 != next_idx || chunk.len() >= WRITE_CHUNK {
            flush(&mut chunk, chunk_start)?;
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
    flush(&mut chunk, chunk_start)?;
    if checksum != root.db_checksum {
        return Err(CoreError::corrupt(
            format!("version {root_loc}"),
            "whole-database checksum mismatch after materializing",
        ));
    }
    Ok(Materialized { root, hashes })
}
