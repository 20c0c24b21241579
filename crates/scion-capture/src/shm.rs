//! The wal-index header in `-shm`: what SQLite has *published*. A commit frame in the
//! WAL file is committed only once the wal-index says so (`mxFrame`); reading it the way
//! SQLite's readers do (two copies equal, initialised, checksum right) gives a consistent
//! published end without taking any lock.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use crate::walfile::{checksum, Checksum, Salts};

const COPY_LEN: usize = 48;
const READ_LEN: usize = 136;

/// The published end of the WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    pub salts: Salts,
    /// The last committed frame of the current generation (0: none).
    pub max_frame: u32,
    /// The database's size in pages as of `max_frame`.
    pub page_count: u32,
    /// The cumulative checksum of frame `max_frame`.
    pub frame_checksum: Checksum,
    /// Frames already copied into the database file.
    pub backfilled: u32,
    pub page_size: u32,
}

fn ne(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

impl Published {
    /// Decode a header read; `None` when it is torn or not initialised.
    pub fn parse(b: &[u8]) -> Option<Published> {
        if b.len() < READ_LEN || b[..COPY_LEN] != b[COPY_LEN..2 * COPY_LEN] || b[12] != 1 {
            return None;
        }
        let native_big_endian = cfg!(target_endian = "big");
        let sum = checksum(native_big_endian, &b[..40], Checksum(0, 0));
        if sum != Checksum(ne(b, 40), ne(b, 44)) {
            return None;
        }
        let page_size = match u16::from_ne_bytes([b[14], b[15]]) {
            1 => 65536,
            n => n as u32,
        };
        Some(Published {
            salts: Salts(
                u32::from_be_bytes(b[32..36].try_into().expect("4 bytes")),
                u32::from_be_bytes(b[36..40].try_into().expect("4 bytes")),
            ),
            max_frame: ne(b, 16),
            page_count: ne(b, 20),
            frame_checksum: Checksum(ne(b, 24), ne(b, 28)),
            backfilled: ne(b, 96),
            page_size,
        })
    }
}

/// A descriptor of `-shm`, opened once and closed only after every SQLite connection of
/// this process to the database: closing any descriptor of the file drops the POSIX locks
/// SQLite holds on it in this process.
pub(crate) struct ShmFile {
    file: File,
}

impl ShmFile {
    pub fn new(file: File) -> ShmFile {
        ShmFile { file }
    }

    /// A consistent read of the published end, retried while a writer is mid-update.
    /// `None` when no connection has initialised the wal-index (yet).
    pub fn published(&self) -> io::Result<Option<Published>> {
        let mut b = [0u8; READ_LEN];
        for attempt in 0..200 {
            match self.file.read_exact_at(&mut b, 0) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(e),
            }
            if let Some(p) = Published::parse(&b) {
                return Ok(Some(p));
            }
            if attempt > 20 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        Ok(None)
    }
}
