//! `verify` in the working tree: the engine's check of the whole store, and the leftovers
//! of interrupted operations in this host's checkout trees.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use scion_engine::ops::verify::*;

use crate::error::{EngineError, EngineResult};
use crate::Scion;

impl Scion {
    /// Check the whole store without changing anything ([`Engine::verify`](scion_engine::Engine::verify)), and list
    /// the leftovers of interrupted operations in this host's checkout trees.
    pub fn verify(&self) -> EngineResult<VerifyReport> {
        let mut report = self.engine.verify()?;
        for t in self.temp_leftovers()? {
            report.temp_files.push(t.path.display().to_string());
            report.temp_bytes += t.size;
        }
        Ok(report)
    }

    /// Temp files in the checkout trees (writable and read-only, and the segment cache
    /// inside the first), and those a local store writes before publishing an object.
    pub(crate) fn temp_leftovers(&self) -> EngineResult<Vec<TempFile>> {
        let mut all = temp_leftovers(&self.options.checkouts_dir)?;
        all.extend(temp_leftovers(&self.read_only_root())?);
        if let Some(store) = &self.options.store_dir {
            all.extend(temp_leftovers(&store.join(scion_store::local::TMP_DIR))?);
        }
        Ok(all)
    }
}

/// Whether a file name is one scion's interrupted checkouts (`.tmp`) or segment-cache
/// downloads (`.part`) leave behind.
fn is_temp_leftover(name: &str) -> bool {
    name.ends_with(".tmp") || name.ends_with(".part")
}

/// A temp file found in the checkout tree.
pub(crate) struct TempFile {
    pub path: PathBuf,
    pub size: u64,
    /// When its inode last changed (a checkout sets its temp file's mtime into the past,
    /// so the mtime says nothing about whether it is still being written).
    pub changed: SystemTime,
}

/// Temp files under `dir` (recursively).
fn temp_leftovers(dir: &Path) -> EngineResult<Vec<TempFile>> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(EngineError::io(&d, e)),
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else if is_temp_leftover(&entry.file_name().to_string_lossy()) {
                let changed = UNIX_EPOCH
                    + Duration::new(
                        u64::try_from(meta.ctime()).unwrap_or(0),
                        u32::try_from(meta.ctime_nsec()).unwrap_or(0),
                    );
                out.push(TempFile {
                    path: entry.path(),
                    size: meta.len(),
                    changed,
                });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
