//! `checkpoint`: commit what changed in a branch's checkout and bind a name to the result.

use std::collections::BTreeMap;

use serde::Serialize;

use scion_engine::ops::file_commit::{FileCommit, FileShape};

use crate::checkout::{scan, DbFiles, Fingerprint, RecordHeader, Sidecar};
use crate::error::{CoreError, CoreResult};
use crate::names::{BranchRef, CheckpointName, Target};
use crate::{Scion, WriteStats};

/// What a checkpoint did.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointReport {
    /// The checkpoint made.
    pub checkpoint: Target,
    /// The number of the version it names.
    pub version: u64,
    /// Whether a new version was committed (false: the checkout was clean).
    pub committed: bool,
    /// Pages of the checkout that differed from the head's.
    pub pages_changed: u64,
    /// The version's number of pages.
    pub page_count: u32,
    /// What it cost the store.
    pub store: WriteStats,
}

/// What a checkpoint keeps besides its name; the default keeps nothing else.
#[derive(Debug, Clone, Default)]
pub struct CheckpointOptions {
    /// The user's entries (who made it and why), shown by `checkpoints --json`.
    pub meta: BTreeMap<String, String>,
}

impl Scion {
    /// Commit the pages of `b`'s checkout that differ from the version it was made from,
    /// reading one consistent committed state (other connections may keep writing), then
    /// bind `name` to the new head. A clean checkout (or none) binds the current head.
    pub fn checkpoint(
        &self,
        b: &BranchRef,
        name: &CheckpointName,
        options: CheckpointOptions,
    ) -> CoreResult<CheckpointReport> {
        let CheckpointOptions { meta } = options;
        self.engine.check_checkpoint_name(b, name, &meta)?;
        let (r, etag) = self.engine.read_ref(b)?;
        // Another holder (a daemon's session) is committing this branch: its changes go
        // through it, and the file may hold what only it has captured.
        self.engine
            .check_lease_free_for(b, &r, self.engine.holder())?;
        let path = self.checkout_path(b);
        let (head_root, head_version, head_pages) = (r.root, r.version, r.page_count);
        let bind_head = |stats: WriteStats| -> CoreResult<CheckpointReport> {
            self.engine
                .bind_checkpoint(b, name, head_root, head_version, meta.clone())?;
            Ok(CheckpointReport {
                checkpoint: Target {
                    branch: b.clone(),
                    checkpoint: Some(name.clone()),
                },
                version: head_version,
                committed: false,
                pages_changed: 0,
                page_count: head_pages,
                store: stats,
            })
        };
        if !path.exists() {
            return bind_head(WriteStats::default());
        }
        // No scion replaces the file while it is read and its record rewritten.
        let _inspecting = DbFiles::checkout(path.clone()).inspect_lock()?;
        // A clean checkout of the head binds the name in O(1): the record's header proves
        // it, and its page hashes are not read.
        if let Some(fp) = Fingerprint::of(&path)? {
            if RecordHeader::proving(&path, &fp)?.is_some_and(|h| h.root == r.root) {
                return bind_head(WriteStats::default());
            }
        }
        let Some(mut sidecar) = Sidecar::load(&path, &r.root)? else {
            return Err(CoreError::UnknownCheckout {
                path,
                branch: b.clone(),
            });
        };
        if sidecar.root != r.root {
            return Err(CoreError::StaleCheckout {
                path,
                branch: b.clone(),
            });
        }
        // Stamp, then fingerprint, before any SQLite connection opens the file.
        let stamp = crate::checkout::now_ns();
        let fingerprint = Fingerprint::of(&path)?.unwrap_or_default();
        if sidecar.proves_unmodified(&fingerprint) {
            return bind_head(WriteStats::default());
        }
        // Moving the head: the engine holds the branch's lease from the first changed
        // page to the publish.
        let progress = self.engine.progress();
        let committed = self.engine.commit_file(b, &r, &etag, |add| {
            let (info, hashes) = scan(&path, Some(&sidecar), &**progress, |pgno, page, hash| {
                add(pgno, page, hash)
            })?;
            let shape = FileShape {
                page_size: info.page_size,
                page_count: info.page_count,
            };
            Ok((shape, hashes))
        })?;
        let sealed = match committed {
            FileCommit::Unchanged { .. } => {
                sidecar.fingerprint = fingerprint;
                sidecar.stamp_ns = stamp;
                sidecar.store(&path)?;
                return bind_head(WriteStats::default());
            }
            FileCommit::Sealed(sealed) => sealed,
        };
        let (root, version, record, stats) = (
            sealed.root(),
            sealed.version(),
            *sealed.record(),
            sealed.stats(),
        );
        let pages_changed = sealed.pages_changed;
        let new_sidecar = Sidecar {
            page_size: record.page_size,
            root,
            version,
            fingerprint,
            stamp_ns: stamp,
            hashes: sealed.hashes.clone(),
        };
        // Adopted by the next load only if the ref below really moves to `root`.
        new_sidecar.store_pending(&path)?;
        let published = match sealed.publish(format!("{b}@{name}")) {
            Ok(p) => p,
            Err(e) => {
                // The pending record is adopted only if the head really names the new version
                // (an unknown outcome is decided by the ref, not by the error). Unpublished
                // segments are left to GC.
                if let Ok((head, _)) = self.engine.read_ref(b) {
                    Sidecar::load(&path, &head.root)?;
                }
                return Err(e.into());
            }
        };
        new_sidecar.store(&path)?;
        Sidecar::load(&path, &root)?;
        published.name(name, meta)?;
        Ok(CheckpointReport {
            checkpoint: Target {
                branch: b.clone(),
                checkpoint: Some(name.clone()),
            },
            version,
            committed: true,
            pages_changed,
            page_count: record.page_count,
            store: WriteStats {
                objects: stats.objects + 2,
                ..stats
            },
        })
    }
}
