//! Copy-on-write cloning of a clean file already materialized at the same version.

use std::fs;
use std::path::Path;
use std::str::FromStr;

use crate::error::{CoreError, CoreResult};

/// How checkouts may be made from another clean file of the same version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClonePolicy {
    /// Clone where the filesystem can, else copy in the kernel.
    #[default]
    Auto,
    /// Clone or fail: never write a full copy of a file that could have been shared.
    Always,
    /// Never clone; copy in the kernel.
    Never,
}

impl FromStr for ClonePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ClonePolicy::Auto),
            "always" => Ok(ClonePolicy::Always),
            "never" => Ok(ClonePolicy::Never),
            other => Err(format!(
                "unknown clone policy {other:?} (auto, always, never)"
            )),
        }
    }
}

/// Whether the checkout directory's filesystem can clone files.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "clone", rename_all = "lowercase")]
pub enum CloneCapability {
    Supported,
    Unsupported { reason: String },
}

/// Try a real clone of a tiny file inside `dir`.
pub fn probe(dir: &Path) -> CoreResult<CloneCapability> {
    fs::create_dir_all(dir).map_err(|e| CoreError::io(dir, e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".scion-clone-probe")
        .tempdir_in(dir)
        .map_err(|e| CoreError::io(dir, e))?;
    let src = tmp.path().join("a");
    fs::write(&src, b"probe").map_err(|e| CoreError::io(&src, e))?;
    Ok(match reflink_copy::reflink(&src, tmp.path().join("b")) {
        Ok(()) => CloneCapability::Supported,
        Err(e) => CloneCapability::Unsupported {
            reason: match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) | Some(libc::ENOTTY) => {
                    "the filesystem has no reflink support".to_string()
                }
                _ => e.to_string(),
            },
        },
    })
}

/// How a file was duplicated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CopyKind {
    Cloned,
    Copied,
}

/// Duplicate `src` into the empty, open file `dst` under `policy`.
pub fn duplicate(src: &Path, dst: &fs::File, policy: ClonePolicy) -> CoreResult<CopyKind> {
    let mut from = fs::File::open(src).map_err(|e| CoreError::io(src, e))?;
    if policy != ClonePolicy::Never {
        match reflink_copy::reflink_file(&from, dst) {
            Ok(()) => return Ok(CopyKind::Cloned),
            Err(e) if policy == ClonePolicy::Always => {
                return Err(CoreError::CloneUnsupported {
                    reason: format!("cloning {} failed: {e}", src.display()),
                });
            }
            Err(e) => {
                tracing::debug!("clone of {} unavailable ({e}); copying", src.display());
            }
        }
    }
    // std's File-to-File copy uses copy_file_range on Linux: an in-kernel copy.
    let mut to = dst;
    // Truncate only a file that has content: ext4 treats a truncate to zero as a
    // replace-via-truncate and forces the new data to disk when the file is closed
    // (auto_da_alloc), which makes deleting the copy soon after cost a full writeback.
    if dst.metadata().map_err(|e| CoreError::io(src, e))?.len() != 0 {
        dst.set_len(0).map_err(|e| CoreError::io(src, e))?;
    }
    std::io::copy(&mut from, &mut to).map_err(|e| CoreError::io(src, e))?;
    Ok(CopyKind::Copied)
}
