//! Where capture stands: the last captured commit frame of a WAL generation, and the
//! mark stored with each captured version so that a restart can resume exactly there.

use std::fmt;
use std::str::FromStr;

use scion_core::format::Locator;

use crate::walfile::{Checksum, Salts};

/// The ref meta key that carries a captured version's [`Mark`].
pub const MARK_KEY: &str = "scion.capture";

/// The last captured commit frame of a generation. Frame 0 means "nothing of this
/// generation yet": the chain then starts from the WAL header's own checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cursor {
    pub salts: Salts,
    pub frame: u32,
    pub checksum: Checksum,
}

/// Which file a cursor is about: a cursor says nothing about another inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

/// Stored with a captured version: the version it belongs to, the checkout file and the
/// cursor of the last transaction the version holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub root: Locator,
    pub file: FileId,
    pub cursor: Cursor,
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.cursor;
        write!(
            f,
            "v1 root={} file={}:{} salts={}:{} frame={} sum={}:{}",
            self.root,
            self.file.dev,
            self.file.ino,
            c.salts.0,
            c.salts.1,
            c.frame,
            c.checksum.0,
            c.checksum.1
        )
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unreadable capture mark {0:?}")]
pub struct BadMark(String);

fn pair(s: &str) -> Option<(u64, u64)> {
    let (a, b) = s.split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

impl FromStr for Mark {
    type Err = BadMark;

    fn from_str(s: &str) -> Result<Mark, BadMark> {
        let bad = || BadMark(s.to_string());
        let mut fields = s.split(' ');
        if fields.next() != Some("v1") {
            return Err(bad());
        }
        let mut get = |name: &str| {
            fields
                .next()
                .and_then(|f| f.strip_prefix(name))
                .and_then(|f| f.strip_prefix('='))
                .map(str::to_string)
                .ok_or_else(bad)
        };
        let root: Locator = get("root")?.parse().map_err(|_| bad())?;
        let file = pair(&get("file")?).ok_or_else(bad)?;
        let salts = pair(&get("salts")?).ok_or_else(bad)?;
        let frame: u32 = get("frame")?.parse().map_err(|_| bad())?;
        let sum = pair(&get("sum")?).ok_or_else(bad)?;
        let u32s = |(a, b): (u64, u64)| -> Result<(u32, u32), BadMark> {
            Ok((
                u32::try_from(a).map_err(|_| bad())?,
                u32::try_from(b).map_err(|_| bad())?,
            ))
        };
        let (s0, s1) = u32s(salts)?;
        let (c0, c1) = u32s(sum)?;
        Ok(Mark {
            root,
            file: FileId {
                dev: file.0,
                ino: file.1,
            },
            cursor: Cursor {
                salts: Salts(s0, s1),
                frame,
                checksum: Checksum(c0, c1),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_as_written() {
        let root: Locator = "0000000000000001:32:44".parse().unwrap();
        let m = Mark {
            root,
            file: FileId { dev: 2049, ino: 77 },
            cursor: Cursor {
                salts: Salts(u32::MAX, 3),
                frame: 12,
                checksum: Checksum(5, 6),
            },
        };
        assert_eq!(m.to_string().parse::<Mark>().unwrap(), m);
        assert!("v2 root=x".parse::<Mark>().is_err());
        assert!(
            "v1 root=0000000000000001:32:44 file=1:2 salts=1:2 frame=x sum=1:2"
                .parse::<Mark>()
                .is_err()
        );
    }
}
