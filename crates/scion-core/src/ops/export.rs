//! `export`: write a version to a plain SQLite file anywhere, atomically.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::checkout::{DbFiles, Expect, Install};
use crate::error::{CoreError, CoreResult};
use crate::names::Target;
use crate::Scion;
use scion_engine::materialize::{Durability, JournalMode};

/// What an export wrote.
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    /// The version exported.
    pub source: Target,
    /// The file written.
    pub path: String,
    /// The version's number.
    pub version: u64,
    /// The file's size in bytes.
    pub bytes: u64,
}

impl Scion {
    /// Write the version `t` names to `out` (rollback-journal mode, no sidecar). The file
    /// appears complete or not at all. An existing file, or SQLite journal files left
    /// beside the target (which SQLite would replay onto the new file), are replaced only
    /// with `force`. Targets inside the store or its checkout trees are refused.
    pub fn export(&self, t: &Target, out: &Path, force: bool) -> CoreResult<ExportReport> {
        self.refuse_managed_path(out)?;
        let v = self.engine.resolve(t)?;
        let files = DbFiles::export(out.to_path_buf());
        if out.is_dir() {
            return Err(CoreError::OutputIsDirectory {
                path: out.to_path_buf(),
            });
        }
        if !force {
            if out.symlink_metadata().is_ok() {
                return Err(CoreError::OutputExists {
                    path: out.to_path_buf(),
                });
            }
            let leftovers = files.leftover_journals();
            if !leftovers.is_empty() {
                return Err(CoreError::JournalLeftovers {
                    path: out.to_path_buf(),
                    files: names(&leftovers),
                });
            }
        }
        let tmp = files.temp()?;
        let m = self.engine.materialize(
            &v.root,
            (tmp.as_file(), tmp.path()),
            JournalMode::Rollback,
            Durability::Synced,
        )?;
        let expect = if force {
            Expect::Anything
        } else {
            Expect::Absent
        };
        if let Install::Changed(_) = files.install(tmp, expect, None)? {
            return Err(CoreError::OutputExists {
                path: out.to_path_buf(),
            });
        }
        let shown = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
        Ok(ExportReport {
            source: t.clone(),
            path: shown.display().to_string(),
            version: v.version,
            bytes: m.root.page_count as u64 * m.root.page_size as u64,
        })
    }

    /// Refuse a path inside a tree scion manages: the local store, the checkouts and the
    /// read-only checkouts.
    pub(crate) fn refuse_managed_path(&self, out: &Path) -> CoreResult<()> {
        let Some(target) = resolved(out) else {
            return Ok(());
        };
        let read_only = self.read_only_root();
        let trees = self
            .options
            .store_dir
            .iter()
            .chain([&self.options.checkouts_dir, &read_only]);
        for tree in trees {
            if let Ok(tree) = tree.canonicalize() {
                if target.starts_with(&tree) {
                    return Err(CoreError::InsideStore {
                        path: out.to_path_buf(),
                        tree,
                    });
                }
            }
        }
        Ok(())
    }
}

/// `path` with its directory resolved (symlinks and `..` included); None if the directory
/// does not exist (then it is inside nothing that exists either).
fn resolved(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some(dir.canonicalize().ok()?.join(name))
}

fn names(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(", ")
}
