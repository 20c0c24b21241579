//! Where capture stands: the last captured commit frame of a WAL generation, and the
//! mark stored with each captured version so that a restart can resume exactly there.

use std::fmt;
use std::str::FromStr;

use scion_core::format::Locator;

use crate::walfile::{Checksum, Salts};

/// The ref meta key that carries a captured version's [`Mark`].
pub(crate) const MARK_KEY: &str = "scion.capture";

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

/// Which checkout on which machine a mark is about. Device and inode numbers name a file
/// only on one machine and only while it exists: hosts that share a store (and often the
/// same device numbering) can hold a file with the numbers another host's mark names, and
/// a deleted checkout's inode is handed to the next file made. A mark is taken only where
/// it was made: the same machine (`/etc/machine-id`, which survives reboots, so a restart
/// after a power cut still resumes), host name (a UTS namespace's own) and checkout path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place(pub u64);

impl Place {
    /// The place of the checkout at `path` on this machine.
    pub fn of(path: &std::path::Path) -> Place {
        let read = |p: &str| std::fs::read(p).unwrap_or_default();
        let mut id = read("/etc/machine-id");
        id.push(0);
        id.extend(scion_store::clock::host_name().as_bytes());
        id.push(0);
        id.extend(path.as_os_str().as_encoded_bytes());
        Place(xxhash_rust::xxh3::xxh3_64(&id))
    }
}

/// Stored with a captured version: the version it belongs to, where its checkout is, the
/// checkout file and the cursor of the last transaction the version holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub root: Locator,
    /// `None` for a mark written before marks said where they were made (format v1):
    /// such a mark is never resumed from.
    pub place: Option<Place>,
    pub file: FileId,
    pub cursor: Cursor,
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.cursor;
        write!(f, "v2 root={}", self.root)?;
        if let Some(Place(at)) = self.place {
            write!(f, " at={at:016x}")?;
        }
        write!(
            f,
            " file={}:{} salts={}:{} frame={} sum={}:{}",
            self.file.dev, self.file.ino, c.salts.0, c.salts.1, c.frame, c.checksum.0, c.checksum.1
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
        let mut fields = s.split(' ').peekable();
        let version = fields.next();
        if version != Some("v1") && version != Some("v2") {
            return Err(bad());
        }
        let root: Locator = fields
            .next()
            .and_then(|f| f.strip_prefix("root="))
            .ok_or_else(bad)?
            .parse()
            .map_err(|_| bad())?;
        let place = match fields.peek().and_then(|f| f.strip_prefix("at=")) {
            Some(at) if version == Some("v2") => {
                let at = u64::from_str_radix(at, 16).map_err(|_| bad())?;
                fields.next();
                Some(Place(at))
            }
            _ => None,
        };
        let mut get = |name: &str| {
            fields
                .next()
                .and_then(|f| f.strip_prefix(name))
                .and_then(|f| f.strip_prefix('='))
                .map(str::to_string)
                .ok_or_else(bad)
        };
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
            place,
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
            place: Some(Place(0x00ab_cdef_0123_4567)),
            file: FileId { dev: 2049, ino: 77 },
            cursor: Cursor {
                salts: Salts(u32::MAX, 3),
                frame: 12,
                checksum: Checksum(5, 6),
            },
        };
        assert_eq!(m.to_string().parse::<Mark>().unwrap(), m);
        assert!(m
            .to_string()
            .starts_with("v2 root=0000000000000001:32:44 at=00abcdef01234567 "));
        assert!("v3 root=0000000000000001:32:44".parse::<Mark>().is_err());
        // A mark from before marks named their place reads back without one.
        let v1 = "v1 root=0000000000000001:32:44 file=2049:77 salts=4294967295:3 frame=12 sum=5:6";
        assert_eq!(
            v1.parse::<Mark>().unwrap(),
            Mark {
                place: None,
                ..m.clone()
            }
        );
        assert!(
            "v1 root=0000000000000001:32:44 file=1:2 salts=1:2 frame=x sum=1:2"
                .parse::<Mark>()
                .is_err()
        );
    }
}

#[cfg(test)]
mod place_tests {
    use super::*;

    #[test]
    fn a_place_names_the_checkout_path_on_this_machine() {
        let a = Place::of(std::path::Path::new("/h0/checkouts/db/main.db"));
        assert_eq!(
            a,
            Place::of(std::path::Path::new("/h0/checkouts/db/main.db"))
        );
        assert_ne!(
            a,
            Place::of(std::path::Path::new("/h1/checkouts/db/main.db"))
        );
    }
}
