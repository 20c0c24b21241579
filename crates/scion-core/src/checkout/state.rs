//! What a checkout file holds compared with its branch, and the refusals that protect it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::files::Expect;
use super::sidecar::{Fingerprint, Sidecar};
use crate::error::{CoreError, CoreResult, EngineResult};
use crate::format::page_hash;
use crate::names::{BranchRef, Target};
use scion_engine::sqlite_io::{self, SnapshotInfo};

/// What a checkout file holds compared with its branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CheckoutState {
    /// No checkout file.
    None,
    /// Exactly the branch head.
    Clean,
    /// Changes that were never checkpointed.
    Dirty,
    /// Unchanged, but made from an older head: the branch has moved since.
    Stale,
    /// A file without a usable scion record.
    Unknown,
}

impl std::fmt::Display for CheckoutState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CheckoutState::None => "none",
            CheckoutState::Clean => "clean",
            CheckoutState::Dirty => "dirty",
            CheckoutState::Stale => "stale",
            CheckoutState::Unknown => "unknown",
        })
    }
}

/// How `checkout` produced the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CheckoutAction {
    /// The clean, current file was already there.
    Reused,
    /// Written from the store.
    Materialized,
    /// Cloned (copy-on-write) from another clean file of the same version.
    Cloned,
    /// Copied in the kernel from another clean file of the same version.
    Copied,
    /// Brought from the older version it held by rewriting only the pages that differ.
    Patched,
}

/// What `checkout` did.
#[derive(Debug, Clone, Serialize)]
pub struct CheckoutReport {
    /// What was checked out: a branch head, or a checkpoint (read-only).
    pub branch: Target,
    /// The file.
    pub path: PathBuf,
    /// The number of the version it holds.
    pub version: u64,
    /// How the file was made or found.
    pub action: CheckoutAction,
    /// What an overwritten file held (with `force`), if anything was discarded.
    pub discarded: Option<CheckoutState>,
    /// The file is the branch's working copy: made from the current head, with changes
    /// not yet checkpointed (returned as it is, never overwritten without `force`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dirty: bool,
}

/// Refuse an operation that would strand or delete a checkout holding changes never
/// checkpointed (dirty) or changes scion cannot account for (unknown). Changes made on an
/// older head than the branch's cannot be checkpointed any more: they are a stale checkout,
/// whose hint says how to keep the file.
pub(crate) fn refuse_unsaved(judged: &Inspection, path: &Path, b: &BranchRef) -> CoreResult<()> {
    match judged.state {
        CheckoutState::Dirty if !judged.current => Err(CoreError::StaleCheckout {
            path: path.to_path_buf(),
            branch: b.clone(),
        }),
        CheckoutState::Dirty => Err(CoreError::DirtyCheckout {
            path: path.to_path_buf(),
            branch: b.clone(),
        }),
        CheckoutState::Unknown => Err(CoreError::UnknownCheckout {
            path: path.to_path_buf(),
            branch: b.clone(),
        }),
        _ => Ok(()),
    }
}

/// How many times a checkout judges a file that keeps changing under it before giving up.
pub(crate) const JUDGE_TRIES: usize = 8;

/// Result of comparing a file against its sidecar.
pub(crate) struct Inspection {
    pub state: CheckoutState,
    /// The file was made from the head it was compared with (its sidecar names it).
    pub current: bool,
    /// The file as it was when judged (None: no file); a replacement goes ahead only if
    /// it is still so.
    pub seen: Option<Fingerprint>,
    /// The hash of every page of a file judged dirty by hashing it (its record names the
    /// version it was made from): what a forced refresh needs to rewrite only the pages
    /// that differ from the new head.
    pub file_hashes: Option<Vec<u64>>,
}

impl Inspection {
    pub(crate) fn expect(&self) -> Expect {
        Expect::from_seen(self.seen)
    }
}

/// Hash every page of the file's committed state; `on_changed` sees each page that
/// differs from `old` (or every page when there is no `old`).
pub(crate) fn scan(
    path: &Path,
    old: Option<&Sidecar>,
    progress: &dyn crate::progress::Progress,
    mut on_changed: impl FnMut(u32, &[u8], u64) -> EngineResult<()>,
) -> EngineResult<(SnapshotInfo, Vec<u64>)> {
    let mut hashes = Vec::new();
    let info = sqlite_io::read_snapshot(path, false, progress, |pgno, page| {
        let h = page_hash(page);
        hashes.push(h);
        let same = old
            .filter(|o| o.page_size as usize == page.len())
            .and_then(|o| o.hashes.get(pgno as usize - 1))
            == Some(&h);
        if !same {
            on_changed(pgno, page, h)?;
        }
        Ok(())
    })?;
    Ok((info, hashes))
}
