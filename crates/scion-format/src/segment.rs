//! A segment: the immutable object one commit (or one import) writes.
//!
//! ```text
//! header  32 B  "SCIONSEG" | version u16 | flags u16 | reserved u32 | id u64 | created ms u64
//! frames        page, node and root frames, back to back
//! footer        count u32, then per frame: kind u8 | key u64 | offset u64 | len u32
//! trailer 24 B  footer offset u64 | xxh3 of footer u64 | "SCIONEND"
//! ```
//! Readers fetch single frames by locator; the footer lets a segment be verified,
//! compacted or inspected on its own.

use super::bytes::{err, Cursor};
use super::frame::{encode_frame, FrameKind};
use super::{DecodeError, Locator, SegmentId};

pub(crate) const SEGMENT_FORMAT_VERSION: u16 = 1;
pub(crate) const SEGMENT_HEADER_LEN: usize = 32;
pub(crate) const SEGMENT_TRAILER_LEN: usize = 24;
const MAGIC: &[u8; 8] = b"SCIONSEG";
const END_MAGIC: &[u8; 8] = b"SCIONEND";
const INDEX_ENTRY_LEN: usize = 21;

/// One frame as a segment's index lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameIndexEntry {
    /// What the frame holds.
    pub kind: FrameKind,
    /// Its key: page number, node level, or 0 for a root record.
    pub key: u64,
    /// Where it starts in the segment, in bytes.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u32,
}

/// Accumulates frames for one segment in memory.
#[derive(Debug)]
pub struct SegmentBuilder {
    id: SegmentId,
    buf: Vec<u8>,
    index: Vec<FrameIndexEntry>,
}

impl SegmentBuilder {
    /// An empty segment `id`, stamped with its creation time.
    pub fn new(id: SegmentId, created_unix_ms: u64) -> Self {
        let mut buf = Vec::with_capacity(64 * 1024);
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&SEGMENT_FORMAT_VERSION.to_le_bytes());
        buf.extend_from_slice(&0u16.to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        buf.extend_from_slice(&id.0.to_le_bytes());
        buf.extend_from_slice(&created_unix_ms.to_le_bytes());
        SegmentBuilder {
            id,
            buf,
            index: Vec::new(),
        }
    }

    /// The segment's id.
    pub fn id(&self) -> SegmentId {
        self.id
    }

    /// Bytes written so far (header and frames).
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether no frame was added.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Append one frame; returns where it lives and its content hash.
    pub fn add(&mut self, kind: FrameKind, key: u64, raw: &[u8]) -> (Locator, u64) {
        let (frame, checksum) = encode_frame(kind, key, raw);
        self.add_encoded(kind, key, &frame);
        let loc = self.index.last().unwrap();
        (
            Locator {
                segment: self.id,
                offset: loc.offset,
                len: loc.len,
            },
            checksum,
        )
    }

    /// Append a frame encoded elsewhere (for example on another thread).
    pub fn add_encoded(&mut self, kind: FrameKind, key: u64, frame: &[u8]) -> Locator {
        let offset = self.buf.len() as u64;
        self.buf.extend_from_slice(frame);
        self.index.push(FrameIndexEntry {
            kind,
            key,
            offset,
            len: frame.len() as u32,
        });
        Locator {
            segment: self.id,
            offset,
            len: frame.len() as u32,
        }
    }

    /// Seal the segment: append footer and trailer.
    pub fn finish(mut self) -> Vec<u8> {
        let footer_offset = self.buf.len() as u64;
        let mut footer = Vec::with_capacity(4 + self.index.len() * INDEX_ENTRY_LEN);
        footer.extend_from_slice(&(self.index.len() as u32).to_le_bytes());
        for e in &self.index {
            footer.push(e.kind as u8);
            footer.extend_from_slice(&e.key.to_le_bytes());
            footer.extend_from_slice(&e.offset.to_le_bytes());
            footer.extend_from_slice(&e.len.to_le_bytes());
        }
        let checksum = xxhash_rust::xxh3::xxh3_64(&footer);
        self.buf.extend_from_slice(&footer);
        self.buf.extend_from_slice(&footer_offset.to_le_bytes());
        self.buf.extend_from_slice(&checksum.to_le_bytes());
        self.buf.extend_from_slice(END_MAGIC);
        self.buf
    }
}

/// Read a whole segment's header and frame index, checking that every frame lies inside
/// the frame area. Frames themselves are verified when read.
pub fn decode_segment_index(
    data: &[u8],
) -> Result<(SegmentId, u64, Vec<FrameIndexEntry>), DecodeError> {
    if data.len() < SEGMENT_HEADER_LEN + SEGMENT_TRAILER_LEN {
        return err(format!("segment of {} bytes is too short", data.len()));
    }
    let mut h = Cursor::new(&data[..SEGMENT_HEADER_LEN]);
    if h.take(8)? != MAGIC {
        return err("not a scion segment (bad magic)");
    }
    let version = h.u16()?;
    if version != SEGMENT_FORMAT_VERSION {
        return err(format!("unknown segment format version {version}"));
    }
    let _flags = h.u16()?;
    let _reserved = h.u32()?;
    let id = SegmentId(h.u64()?);
    let created = h.u64()?;
    let tail = &data[data.len() - SEGMENT_TRAILER_LEN..];
    let mut t = Cursor::new(tail);
    let footer_offset = t.u64()?;
    let checksum = t.u64()?;
    if t.take(8)? != END_MAGIC {
        return err("segment trailer is missing (torn or truncated segment)");
    }
    let footer_end = (data.len() - SEGMENT_TRAILER_LEN) as u64;
    if footer_offset < SEGMENT_HEADER_LEN as u64 || footer_offset > footer_end {
        return err("segment footer offset out of range");
    }
    let footer = &data[footer_offset as usize..footer_end as usize];
    if xxhash_rust::xxh3::xxh3_64(footer) != checksum {
        return err("segment footer checksum mismatch");
    }
    let mut f = Cursor::new(footer);
    let count = f.u32()? as usize;
    if count.checked_mul(INDEX_ENTRY_LEN) != Some(f.remaining()) {
        return err("segment footer length does not match its frame count");
    }
    let mut index = Vec::with_capacity(count);
    for _ in 0..count {
        let kind_b = f.u8()?;
        let kind = FrameKind::from_u8(kind_b)
            .ok_or_else(|| DecodeError(format!("unknown frame kind {kind_b}")))?;
        let key = f.u64()?;
        let offset = f.u64()?;
        let len = f.u32()?;
        if offset < SEGMENT_HEADER_LEN as u64
            || offset
                .checked_add(len as u64)
                .is_none_or(|e| e > footer_offset)
        {
            return err("frame index entry points outside the frame area");
        }
        index.push(FrameIndexEntry {
            kind,
            key,
            offset,
            len,
        });
    }
    Ok((id, created, index))
}

/// Check a whole segment received from another store before it is written: the header
/// names `id`, the trailer and footer are intact, and every frame passes
/// [`check_frame_alone`](crate::frame::check_frame_alone). Returns the frame count.
pub fn check_segment(data: &[u8], id: SegmentId) -> Result<usize, DecodeError> {
    let (found, _, index) = decode_segment_index(data)?;
    if found != id {
        return err(format!("segment {found} arrived under the id {id}"));
    }
    let mut scratch = Vec::new();
    for e in &index {
        let frame = &data[e.offset as usize..(e.offset + e.len as u64) as usize];
        crate::frame::check_frame_alone_in(frame, e.kind, e.key, &mut scratch)
            .map_err(|x| DecodeError(format!("frame at offset {}: {}", e.offset, x.0)))?;
    }
    Ok(index.len())
}
