//! How full page frames are stored, chosen per store at `init` (its manifest records it).

use serde::{Deserialize, Serialize};

/// How a store keeps the full frames of pages. Either way every frame carries the hash of
/// its content and is verified on every read; a reader decodes both, whatever the store says.
/// Its names (`lz4`, `none`) are spelled once, in [`PageCompression::as_str`]: the manifest,
/// the CLI and the Python package all go through it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum PageCompression {
    /// lz4 where it makes the frame smaller: about half the bytes of the database.
    #[default]
    Lz4,
    /// Pages stored as they are: the store holds about the database's size, and writing a
    /// version out is a read, a hash and a write per page, with no decompression (the
    /// fastest checkout and export on a CPU-bound machine).
    Uncompressed,
}

impl PageCompression {
    /// Every setting there is.
    pub const ALL: [PageCompression; 2] = [PageCompression::Lz4, PageCompression::Uncompressed];

    /// The setting as `config` and the manifest spell it (`lz4`, `none`).
    pub fn as_str(self) -> &'static str {
        match self {
            PageCompression::Lz4 => "lz4",
            PageCompression::Uncompressed => "none",
        }
    }
}

impl std::fmt::Display for PageCompression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for PageCompression {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| {
                let known: Vec<String> = Self::ALL
                    .iter()
                    .map(|c| format!("{:?}", c.as_str()))
                    .collect();
                format!(
                    "unknown page compression {s:?}: expected {}",
                    known.join(" or ")
                )
            })
    }
}

impl From<PageCompression> for &'static str {
    fn from(c: PageCompression) -> Self {
        c.as_str()
    }
}

impl TryFrom<String> for PageCompression {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_itself() {
        for c in PageCompression::ALL {
            assert_eq!(c.as_str().parse::<PageCompression>(), Ok(c));
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            assert_eq!(serde_json::from_str::<PageCompression>(&json).unwrap(), c);
        }
        let e = "zstd".parse::<PageCompression>().unwrap_err();
        assert_eq!(
            e,
            r#"unknown page compression "zstd": expected "lz4" or "none""#
        );
    }
}
