//! Copy-on-write cloning of a clean file already materialized at the same version.

use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::{Fingerprint, RecordHeader, Sidecar};
use crate::error::{CoreError, CoreResult};
use crate::format::Locator;

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
    // Preallocated, the in-kernel copy runs about a quarter faster on ext4 (no delayed-
    // allocation reservation per write); a source that turns out shorter leaves no tail.
    let len = from.metadata().map_err(|e| CoreError::io(src, e))?.len();
    crate::materialize::preallocate(dst, len).map_err(|e| CoreError::io(src, e))?;
    let copied = std::io::copy(&mut from, &mut to).map_err(|e| CoreError::io(src, e))?;
    if copied != len {
        dst.set_len(copied).map_err(|e| CoreError::io(src, e))?;
    }
    Ok(CopyKind::Copied)
}

/// A clean file in one of `places` (other than `target`) that provably holds exactly the
/// version `root`, with its record. Headers are read first: only the file used is read
/// with its page hashes.
pub(crate) fn find_source(
    places: &[PathBuf],
    target: &Path,
    root: &Locator,
) -> CoreResult<Option<(PathBuf, Sidecar)>> {
    for dir in places {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p == target
                || p.extension().and_then(|e| e.to_str()) != Some("db")
                || super::live::is_live(&p)
            {
                continue;
            }
            let Some(fp) = Fingerprint::of(&p)? else {
                continue;
            };
            let Ok(Some(header)) = RecordHeader::proving(&p, &fp) else {
                continue;
            };
            if header.root != *root {
                continue;
            }
            let Ok(bytes) = fs::read(Sidecar::path_for(&p)) else {
                continue;
            };
            if let Ok(sidecar) = Sidecar::decode(&bytes) {
                if sidecar.root == *root && sidecar.proves_unmodified(&fp) {
                    return Ok(Some((p, sidecar)));
                }
            }
        }
    }
    Ok(None)
}

/// Set page 1's read/write format bytes (18 and 19) to WAL in a copy made from a file that
/// may be in rollback-journal mode (a read-only checkout).
pub(crate) fn mark_wal(file: &fs::File, path: &Path) -> CoreResult<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(&[2, 2], 18)
        .map_err(|e| CoreError::io(path, e))
}
