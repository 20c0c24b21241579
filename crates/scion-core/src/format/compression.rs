//! How full page frames are stored, chosen per store at `init` (its manifest records it).

use serde::{Deserialize, Serialize};

/// How a store keeps the full frames of pages. Either way every frame carries the hash of
/// its content and is verified on every read; a reader decodes both, whatever the store says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PageCompression {
    /// lz4 where it makes the frame smaller: about half the bytes of the database.
    #[default]
    Lz4,
    /// Pages stored as they are: the store holds about the database's size, and writing a
    /// version out is a read, a hash and a write per page, with no decompression (the
    /// fastest checkout and export on a CPU-bound machine).
    #[serde(rename = "none")]
    Uncompressed,
}

impl PageCompression {
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
        match s {
            "lz4" => Ok(PageCompression::Lz4),
            "none" => Ok(PageCompression::Uncompressed),
            other => Err(format!(
                "unknown page compression {other:?}: expected \"lz4\" or \"none\""
            )),
        }
    }
}
