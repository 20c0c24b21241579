//! Binary formats of the objects scion writes: segments, their frames, page-map nodes and
//! root records, and the locators that point into segments; and the names that become part
//! of object keys (databases, branches, checkpoints, remotes, owners) with the patterns
//! that match them. `docs/format.md` documents
//! every byte; golden files pin version 1. Nothing here does I/O or knows SQLite or a
//! store: encoders take and return bytes, decoders take bytes and never panic.
//!
//! Decoders never panic on arbitrary input: every length and index is checked, and a bad
//! byte is a [`DecodeError`].

#![deny(missing_docs)]

mod bytes;
mod compression;
mod frame;
mod locator;
mod name_types;
pub mod names;
mod node;
pub mod pattern;
mod root;
mod segment;

pub use bytes::{Cursor, DecodeError};
pub use compression::PageCompression;
pub use frame::{
    check_frame_alone, decode_frame, decode_frame_into, decode_frame_with_base, encode_frame,
    encode_page_frame, is_delta_frame, FrameKind, FRAME_HEADER_LEN,
};
pub use locator::{Locator, SegmentId};
pub use node::{Node, Slot};
pub use root::{Ancestry, Parents, RootRecord};
pub use segment::{check_segment, decode_segment_index, FrameIndexEntry, SegmentBuilder};

/// Hash of one page's bytes (page 1 in its normalized form).
pub fn page_hash(page: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(page)
}

/// One page's share of a version's `db_checksum`: a wrapping sum over present pages, so a
/// commit updates it from the pages it changes alone.
pub fn page_contribution(pgno: u32, hash: u64, zero_hash: u64) -> u64 {
    if hash == zero_hash {
        return 0;
    }
    let mut buf = [0u8; 12];
    buf[..4].copy_from_slice(&pgno.to_le_bytes());
    buf[4..].copy_from_slice(&hash.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&buf)
}

/// Bytes 18 and 19 of page 1 are SQLite's read/write format versions: 1 for a rollback
/// journal, 2 for WAL. scion stores, hashes and compares page 1 with both set to 1, so a
/// database's journal mode does not change its pages.
pub fn normalize_page1(page: &mut [u8]) {
    if page.len() >= 20 {
        page[18] = 1;
        page[19] = 1;
    }
}
