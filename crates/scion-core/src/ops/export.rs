//! `export`: write a version to a plain SQLite file anywhere, atomically.

use std::fs;
use std::path::Path;

use serde::Serialize;

use crate::error::{CoreError, CoreResult};
use crate::materialize::{materialize_to_temp, JournalMode};
use crate::names::Target;
use crate::sqlite_io::{self, sidecar_path};
use crate::Scion;

#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    pub source: String,
    pub path: String,
    pub version: u64,
    pub bytes: u64,
}

impl Scion {
    /// Write the version `t` names to `out` (rollback-journal mode, no sidecar). The file
    /// appears complete or not at all; an existing file is replaced only with `force`.
    pub fn export(&self, t: &Target, out: &Path, force: bool) -> CoreResult<ExportReport> {
        let v = self.resolve(t)?;
        if out.exists() && !force {
            return Err(CoreError::OutputExists {
                path: out.to_path_buf(),
            });
        }
        let dir = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => std::env::current_dir().map_err(|e| CoreError::io(".", e))?,
        };
        let (tmp, m) = materialize_to_temp(
            &self.reader,
            &v.root,
            &dir,
            ".scion-export.",
            JournalMode::Rollback,
            &*self.options.progress,
        )?;
        tmp.as_file()
            .sync_all()
            .map_err(|e| CoreError::io(tmp.path(), e))?;
        if force && out.exists() {
            if sqlite_io::in_use(out)? {
                return Err(CoreError::CheckoutBusy {
                    path: out.to_path_buf(),
                });
            }
            for suffix in ["-wal", "-shm", "-journal"] {
                let _ = fs::remove_file(sidecar_path(out, suffix));
            }
            tmp.persist(out).map_err(|e| CoreError::io(out, e.error))?;
        } else {
            tmp.persist_noclobber(out).map_err(|e| {
                if e.error.kind() == std::io::ErrorKind::AlreadyExists {
                    CoreError::OutputExists {
                        path: out.to_path_buf(),
                    }
                } else {
                    CoreError::io(out, e.error)
                }
            })?;
        }
        fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| CoreError::io(&dir, e))?;
        Ok(ExportReport {
            source: t.to_string(),
            path: out.display().to_string(),
            version: v.version,
            bytes: m.root.page_count as u64 * m.root.page_size as u64,
        })
    }
}
