use std::fmt;
use std::str::FromStr;

use super::DecodeError;

/// A segment's id: 64 random bits, written as 16 lowercase hex digits in its key
/// `segments/{id}`. A create-only put that finds an id taken makes the writer pick another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SegmentId(pub u64);

impl SegmentId {
    /// A fresh random id (never 0, which marks "no segment").
    pub fn random() -> Self {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b).expect("the OS random source is available");
        // Zero marks "no segment" in root records of empty versions.
        SegmentId(u64::from_le_bytes(b).max(1))
    }

    /// The segment's object key, `segments/{id}`.
    pub fn key(&self) -> String {
        format!("segments/{self}")
    }

    /// The id in a segment's object key; `None` for any other key.
    pub fn from_key(key: &str) -> Option<Self> {
        key.strip_prefix("segments/")?.parse().ok()
    }
}

impl fmt::Display for SegmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl FromStr for SegmentId {
    type Err = DecodeError;
    fn from_str(s: &str) -> Result<Self, DecodeError> {
        if s.len() != 16
            || !s
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(DecodeError(format!("bad segment id {s:?}")));
        }
        u64::from_str_radix(s, 16)
            .map(SegmentId)
            .map_err(|e| DecodeError(e.to_string()))
    }
}

/// Where one frame (a page, a node or a root record) lives: a byte range of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Locator {
    /// The segment holding the frame.
    pub segment: SegmentId,
    /// Where the frame starts in it, in bytes.
    pub offset: u64,
    /// The frame's length in bytes.
    pub len: u32,
}

impl Locator {
    /// One past the last byte. Decoders refuse locators whose end overflows, so this
    /// saturates only for values no decoder produced.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.len as u64)
    }

    /// A locator whose byte range fits in `u64`.
    pub(crate) fn checked(
        segment: SegmentId,
        offset: u64,
        len: u32,
    ) -> Result<Locator, DecodeError> {
        if offset.checked_add(len as u64).is_none() {
            return Err(DecodeError(format!(
                "locator {segment}:{offset}:{len} ends past 2^64"
            )));
        }
        Ok(Locator {
            segment,
            offset,
            len,
        })
    }
}

/// Text form used in JSON objects: `{segment}:{offset}:{len}`.
impl fmt::Display for Locator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.segment, self.offset, self.len)
    }
}

impl FromStr for Locator {
    type Err = DecodeError;
    fn from_str(s: &str) -> Result<Self, DecodeError> {
        let mut it = s.split(':');
        let (Some(seg), Some(off), Some(len), None) = (it.next(), it.next(), it.next(), it.next())
        else {
            return Err(DecodeError(format!("bad locator {s:?}")));
        };
        let num = |x: &str| {
            if x.is_empty() || x.len() > 20 || !x.bytes().all(|b| b.is_ascii_digit()) {
                return Err(DecodeError(format!("bad number in locator {s:?}")));
            }
            x.parse::<u64>().map_err(|e| DecodeError(e.to_string()))
        };
        let len =
            u32::try_from(num(len)?).map_err(|_| DecodeError("locator length too large".into()))?;
        Locator::checked(seg.parse()?, num(off)?, len)
    }
}
