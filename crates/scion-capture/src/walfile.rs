//! The `-wal` file: its header, frames and checksum chain (SQLite's file format,
//! "The Write-Ahead Log"). Reading it takes no lock, so a fresh descriptor per scan is fine.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

pub const WAL_HEADER_LEN: usize = 32;
pub const FRAME_HEADER_LEN: usize = 24;
const MAGIC_LE: u32 = 0x377f_0682;
const MAGIC_BE: u32 = 0x377f_0683;

/// The two salts of a WAL generation, as SQLite stores them (big-endian words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Salts(pub u32, pub u32);

/// A cumulative checksum (the pair of running sums).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Checksum(pub u32, pub u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WalHeader {
    pub big_endian_checksums: bool,
    pub page_size: u32,
    pub salts: Salts,
    /// The header's own checksum: the seed of frame 1's.
    pub checksum: Checksum,
}

fn be(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// Fold `data` (a multiple of 8 bytes) into the running checksum `seed`.
pub fn checksum(big_endian: bool, data: &[u8], seed: Checksum) -> Checksum {
    let (mut s0, mut s1) = (seed.0, seed.1);
    for pair in data.chunks_exact(8) {
        let (x0, x1) = if big_endian {
            (be(pair, 0), be(pair, 4))
        } else {
            (
                u32::from_le_bytes(pair[0..4].try_into().expect("4 bytes")),
                u32::from_le_bytes(pair[4..8].try_into().expect("4 bytes")),
            )
        };
        s0 = s0.wrapping_add(x0).wrapping_add(s1);
        s1 = s1.wrapping_add(x1).wrapping_add(s0);
    }
    Checksum(s0, s1)
}

impl WalHeader {
    /// A header that is complete and checks; `None` for a missing, short, foreign or
    /// half-written one.
    pub fn parse(b: &[u8]) -> Option<WalHeader> {
        if b.len() < WAL_HEADER_LEN {
            return None;
        }
        let big_endian_checksums = match be(b, 0) {
            MAGIC_LE => false,
            MAGIC_BE => true,
            _ => return None,
        };
        let page_size = match be(b, 8) {
            1 => 65536,
            n if (512..=32768).contains(&n) && n.is_power_of_two() => n,
            _ => return None,
        };
        let stored = Checksum(be(b, 24), be(b, 28));
        if checksum(big_endian_checksums, &b[..24], Checksum(0, 0)) != stored {
            return None;
        }
        Some(WalHeader {
            big_endian_checksums,
            page_size,
            salts: Salts(be(b, 16), be(b, 20)),
            checksum: stored,
        })
    }
}

/// One frame of a WAL, header fields decoded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameHeader {
    pub pgno: u32,
    /// The database's size in pages after the commit; 0 on frames that do not commit.
    pub commit_size: u32,
    pub salts: Salts,
    pub checksum: Checksum,
}

impl FrameHeader {
    pub fn parse(b: &[u8]) -> FrameHeader {
        FrameHeader {
            pgno: be(b, 0),
            commit_size: be(b, 4),
            salts: Salts(be(b, 8), be(b, 12)),
            checksum: Checksum(be(b, 16), be(b, 20)),
        }
    }
}

/// The byte offset of frame `n` (1-based).
pub(crate) fn frame_offset(n: u32, page_size: u32) -> u64 {
    WAL_HEADER_LEN as u64 + (n as u64 - 1) * (FRAME_HEADER_LEN as u64 + page_size as u64)
}

/// An open `-wal`, read with positioned reads.
pub(crate) struct WalFile {
    file: File,
}

impl WalFile {
    /// `None` when there is no `-wal` file.
    pub fn open(path: &Path) -> io::Result<Option<WalFile>> {
        match File::open(path) {
            Ok(file) => Ok(Some(WalFile { file })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn header(&self) -> io::Result<Option<WalHeader>> {
        let mut b = [0u8; WAL_HEADER_LEN];
        match self.read_exact_at(&mut b, 0)? {
            true => Ok(WalHeader::parse(&b)),
            false => Ok(None),
        }
    }

    /// Frames `first..=last` as one buffer; `false` if the file is shorter.
    pub fn frames(&self, first: u32, last: u32, page_size: u32) -> io::Result<Option<Vec<u8>>> {
        let start = frame_offset(first, page_size);
        let end = frame_offset(last + 1, page_size);
        let mut buf = vec![0; (end - start) as usize];
        Ok(self.read_exact_at(&mut buf, start)?.then_some(buf))
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<bool> {
        match self.file.read_exact_at(buf, offset) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// A verified run of frames: each frame's header and page, in order.
pub(crate) struct VerifiedFrames<'a> {
    pub frames: Vec<(FrameHeader, &'a [u8])>,
    /// The checksum after the last frame.
    pub end: Checksum,
}

/// Chain-verify `buf` (whole frames of `page_size`) from `seed`, each frame carrying
/// `salts`. `None` at the first frame that fails: the run is not what SQLite published.
pub(crate) fn verify_frames<'a>(
    buf: &'a [u8],
    header: &WalHeader,
    salts: Salts,
    seed: Checksum,
) -> Option<VerifiedFrames<'a>> {
    let step = FRAME_HEADER_LEN + header.page_size as usize;
    let mut sum = seed;
    let mut frames = Vec::with_capacity(buf.len() / step);
    for frame in buf.chunks_exact(step) {
        let h = FrameHeader::parse(&frame[..FRAME_HEADER_LEN]);
        if h.salts != salts {
            return None;
        }
        sum = checksum(header.big_endian_checksums, &frame[..8], sum);
        sum = checksum(header.big_endian_checksums, &frame[FRAME_HEADER_LEN..], sum);
        if sum != h.checksum {
            return None;
        }
        frames.push((h, &frame[FRAME_HEADER_LEN..]));
    }
    Some(VerifiedFrames { frames, end: sum })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_folds_pairs_of_words() {
        let data = [1u8, 0, 0, 0, 2, 0, 0, 0];
        assert_eq!(checksum(false, &data, Checksum(0, 0)), Checksum(1, 3));
        assert_eq!(
            checksum(true, &data, Checksum(0, 0)),
            Checksum(0x0100_0000, 0x0300_0000)
        );
    }

    #[test]
    fn a_header_with_a_bad_checksum_is_no_header() {
        let mut h = [0u8; 32];
        h[0..4].copy_from_slice(&MAGIC_LE.to_be_bytes());
        h[4..8].copy_from_slice(&3007000u32.to_be_bytes());
        h[8..12].copy_from_slice(&4096u32.to_be_bytes());
        let sum = checksum(false, &h[..24], Checksum(0, 0));
        h[24..28].copy_from_slice(&sum.0.to_be_bytes());
        h[28..32].copy_from_slice(&sum.1.to_be_bytes());
        assert!(WalHeader::parse(&h).is_some());
        h[17] ^= 1;
        assert!(WalHeader::parse(&h).is_none());
        assert!(WalHeader::parse(&h[..31]).is_none());
    }
}
