//! Copy-on-write cloning of a clean file already materialized at the same version.

use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::sidecar::{Fingerprint, RecordHeader, Sidecar};
use crate::error::{CoreError, CoreResult, EngineError, EngineResult};
use crate::format::{page_hash, Locator};
use scion_engine::format::normalize_page1;

/// How checkouts may be made from another clean file of the same version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
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
#[non_exhaustive]
pub enum CloneCapability {
    /// It can: a clean checkout is made by reflink, sharing blocks with its source.
    Supported,
    /// It cannot; checkouts are copied.
    Unsupported {
        /// Why not.
        reason: String,
    },
}

/// Try a real clone of a tiny file inside `dir`.
pub fn probe(dir: &Path) -> EngineResult<CloneCapability> {
    fs::create_dir_all(dir).map_err(|e| EngineError::io(dir, e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".scion-clone-probe")
        .tempdir_in(dir)
        .map_err(|e| EngineError::io(dir, e))?;
    let src = tmp.path().join("a");
    fs::write(&src, b"probe").map_err(|e| EngineError::io(&src, e))?;
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
pub(crate) enum CopyKind {
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
    scion_engine::materialize::preallocate(dst, len).map_err(|e| CoreError::io(src, e))?;
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
                || scion_engine::live::is_live(&p)
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

/// Duplicate the clean file `src`, whose record is `sidecar`, into the empty file `dst`,
/// and check the copy holds the recorded pages. `None` when it does not: the source was
/// written to after it was found, which is its owner's right, not damage, so the caller
/// builds the file another way.
pub(crate) fn duplicate_checked(
    src: &Path,
    sidecar: &Sidecar,
    dst: &fs::File,
    dst_path: &Path,
    policy: ClonePolicy,
) -> CoreResult<Option<CopyKind>> {
    let kind = duplicate(src, dst, policy)?;
    // A read-only source is in rollback-journal mode; a checkout is WAL.
    mark_wal(dst, dst_path)?;
    let source_unchanged = Fingerprint::of(src)?.is_some_and(|fp| sidecar.proves_unmodified(&fp));
    match verify_copy(dst_path, sidecar, source_unchanged)? {
        CopyCheck::Holds => Ok(Some(kind)),
        CopyCheck::Differs(why) => {
            tracing::debug!("copy of {} not used ({why})", src.display());
            Ok(None)
        }
    }
}

/// What checking a duplicated file against its source's record found.
#[derive(Debug, PartialEq, Eq)]
enum CopyCheck {
    /// The copy holds exactly the recorded pages.
    Holds,
    /// The copy holds something else (the source changed while it was copied).
    Differs(String),
}

/// A duplicated file is recorded clean only once its length is checked and it is known to
/// hold the source's pages. Neither a clone nor a byte copy is trusted blindly (a clone
/// snapshots the database file but not its WAL, and a source may change around it): the
/// copy is trusted without re-reading when the source's fingerprint still proves it
/// unmodified afterwards (a write would have moved its mtime, or its WAL's, away from the
/// recorded ones, which are over a second old); otherwise every page hash is checked.
fn verify_copy(path: &Path, sidecar: &Sidecar, source_unchanged: bool) -> CoreResult<CopyCheck> {
    let expected = sidecar.page_count() as u64 * sidecar.page_size as u64;
    let data_len = fs::metadata(path)
        .map_err(|e| CoreError::io(path, e))?
        .len();
    if data_len != expected {
        return Ok(CopyCheck::Differs(format!(
            "copy is {data_len} bytes, expected {expected}"
        )));
    }
    if source_unchanged {
        return Ok(CopyCheck::Holds);
    }
    use std::io::Read;
    let mut f = fs::File::open(path).map_err(|e| CoreError::io(path, e))?;
    let mut buf = vec![0u8; sidecar.page_size as usize];
    for (i, want) in sidecar.hashes.iter().enumerate() {
        f.read_exact(&mut buf).map_err(|e| CoreError::io(path, e))?;
        if i == 0 {
            normalize_page1(&mut buf);
        }
        if page_hash(&buf) != *want {
            return Ok(CopyCheck::Differs(format!(
                "copied page {} differs from its source",
                i + 1
            )));
        }
    }
    Ok(CopyCheck::Holds)
}

#[cfg(test)]
mod tests {
    use super::{
        duplicate_checked, fs, normalize_page1, verify_copy, ClonePolicy, CopyCheck, Fingerprint,
        Locator, Sidecar,
    };
    use crate::format::{page_hash, SegmentId};

    fn record_of(pages: &[Vec<u8>]) -> Sidecar {
        Sidecar {
            page_size: pages[0].len() as u32,
            root: Locator {
                segment: SegmentId(1),
                offset: 0,
                len: 1,
            },
            version: 1,
            fingerprint: Fingerprint::default(),
            stamp_ns: 0,
            hashes: pages.iter().map(|p| page_hash(p)).collect(),
        }
    }

    #[test]
    fn a_clone_is_rechecked_unless_its_source_is_provably_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let pages = vec![vec![1u8; 512], vec![2u8; 512]];
        let record = record_of(&pages);
        let copy = dir.path().join("copy.db");
        // The source changed around the clone: the copy holds other bytes.
        fs::write(&copy, [vec![1u8; 512], vec![9u8; 512]].concat()).unwrap();
        let differs = |check: CopyCheck| matches!(check, CopyCheck::Differs(_));
        assert!(
            differs(verify_copy(&copy, &record, false).unwrap()),
            "re-checked"
        );
        // A source whose record still proves it unmodified is trusted as is.
        assert_eq!(verify_copy(&copy, &record, true).unwrap(), CopyCheck::Holds);
        fs::write(&copy, pages.concat()).unwrap();
        assert_eq!(
            verify_copy(&copy, &record, false).unwrap(),
            CopyCheck::Holds
        );
        // The wrong length is refused either way.
        fs::write(&copy, vec![1u8; 512]).unwrap();
        assert!(differs(verify_copy(&copy, &record, true).unwrap()));
    }

    #[test]
    fn a_source_written_to_after_it_was_found_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.db");
        let pages = vec![vec![1u8; 512], vec![2u8; 512]];
        fs::write(&src, pages.concat()).unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(5);
        fs::File::options()
            .write(true)
            .open(&src)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let mut record = record_of(&pages);
        record.hashes[0] = {
            let mut p1 = pages[0].clone();
            normalize_page1(&mut p1);
            page_hash(&p1)
        };
        record.fingerprint = Fingerprint::of(&src).unwrap().unwrap();
        record.stamp_ns = record.fingerprint.mtime_ns + 3_000_000_000;
        assert!(record.proves_unmodified(&Fingerprint::of(&src).unwrap().unwrap()));
        let dst = tempfile::NamedTempFile::new_in(dir.path()).unwrap();
        let copied = duplicate_checked(&src, &record, dst.as_file(), dst.path(), ClonePolicy::Auto);
        assert!(copied.unwrap().is_some(), "an unchanged source is used");
        // Its owner writes to it between being found and being copied.
        fs::write(&src, [vec![1u8; 512], vec![7u8; 512]].concat()).unwrap();
        let dst = tempfile::NamedTempFile::new_in(dir.path()).unwrap();
        let copied = duplicate_checked(&src, &record, dst.as_file(), dst.path(), ClonePolicy::Auto);
        assert_eq!(
            copied.unwrap(),
            None,
            "the changed copy is not used, and is no error"
        );
        // Or grows it.
        fs::write(&src, [pages.concat(), vec![3u8; 512]].concat()).unwrap();
        let dst = tempfile::NamedTempFile::new_in(dir.path()).unwrap();
        let copied = duplicate_checked(&src, &record, dst.as_file(), dst.path(), ClonePolicy::Auto);
        assert_eq!(copied.unwrap(), None);
    }
}
