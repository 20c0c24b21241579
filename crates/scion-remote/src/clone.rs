//! `scion clone`: a new local store holding a remote's databases, every branch with its
//! checkpoints, and the remote recorded as `origin` with a remote-tracking branch per
//! branch.
//!
//! A clone marks its store unfinished (`clone/unfinished`, naming the source) until its
//! last branch is in, so a clone killed half way is never taken for a whole one: `verify`
//! says so, and running the same clone again finishes it, keeping what was brought.

use std::path::Path;

use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::history::HeadOp;
use scion_core::ops::receive::{Expect, Incoming, Receipt, UNFINISHED_CLONE_KEY};
use scion_core::progress::{Progress, ProgressSink};
use scion_core::{BranchName, BranchRef, DbName, EngineError, RemoteName, Scion, StoreSettings};
use scion_store::{Backend, PutMode};
use serde::Serialize;

use crate::pull::fetch;
use crate::{record_tracking, tracking_branch, Remote, RemoteError, RemoteResult, Transferred};

/// What to clone.
#[derive(Debug, Clone)]
pub struct CloneOptions {
    /// The databases to bring (all when empty).
    pub dbs: Vec<DbName>,
    /// The name the new store gives the remote.
    pub remote: RemoteName,
    /// The new store's settings.
    pub settings: StoreSettings,
}

impl Default for CloneOptions {
    fn default() -> Self {
        CloneOptions {
            dbs: Vec::new(),
            remote: RemoteName::new("origin").expect("a valid name"),
            settings: StoreSettings::default(),
        }
    }
}

/// One branch a clone brought.
#[derive(Debug, Clone, Serialize)]
pub struct ClonedBranch {
    pub branch: String,
    pub version: u64,
    pub checkpoints: usize,
}

/// What a clone did.
#[derive(Debug, Clone, Serialize)]
pub struct CloneReport {
    /// The new store's directory.
    pub store: String,
    pub remote: String,
    pub location: String,
    pub databases: Vec<String>,
    pub branches: Vec<ClonedBranch>,
    pub transfer: Transferred,
}

/// Make a new store at `dir` holding the databases of the store at `location`.
pub fn clone(
    location: &str,
    dir: &Path,
    opts: &CloneOptions,
    progress: ProgressSink,
) -> RemoteResult<(Scion, CloneReport)> {
    // Killed after its mark and before its store's manifest: nothing there is a store.
    if !dir.join("scion.json").exists() && dir.join(UNFINISHED_CLONE_KEY).exists() {
        std::fs::remove_dir_all(dir).map_err(|e| EngineError::Io {
            path: dir.to_path_buf(),
            source: e,
        })?;
    }
    let existed = dir.exists();
    let resumed = unfinished_clone_of(dir, location)?;
    // A store's own private entries (`.scion-tmp`, ...) with no manifest yet are what a
    // clone killed before its store existed leaves: nothing to keep.
    if resumed.is_none()
        && existed
        && std::fs::read_dir(dir)
            .map_err(|e| EngineError::Io {
                path: dir.to_path_buf(),
                source: e,
            })?
            .flatten()
            .any(|e| !e.file_name().to_string_lossy().starts_with('.'))
    {
        return Err(RemoteError::CloneTargetExists {
            dir: dir.display().to_string(),
        });
    }
    let made = (|| {
        let local = match resumed {
            Some(local) => local,
            None => {
                // The mark goes in before the store's manifest: no moment exists at which
                // the directory is a store that looks whole.
                let marker = serde_json::json!({"schema": 1, "location": location});
                scion_store::LocalBackend::open(dir)
                    .and_then(|b| {
                        b.put(
                            UNFINISHED_CLONE_KEY,
                            marker.to_string().as_bytes(),
                            PutMode::Create,
                        )
                    })
                    .map_err(EngineError::from)?;
                let spec = StoreSpec::parse(&dir.display().to_string())?;
                Scion::attach(
                    &spec,
                    AttachOptions {
                        init: Some(opts.settings),
                        progress: progress.clone(),
                        ..Default::default()
                    },
                )?
                .scion
            }
        };
        let remote = Remote::open_at(&local, opts.remote.clone(), location, progress.clone())?;
        let recorded = match local.engine().add_remote(&opts.remote, location) {
            Ok(r) => r,
            // Recorded by the run this one finishes.
            Err(EngineError::RemoteExists { .. }) => location.to_string(),
            Err(e) => return Err(e.into()),
        };
        let report = bring_all(&local, &remote, &recorded, opts, progress.0.as_ref())?;
        local
            .engine()
            .backend()
            .delete(UNFINISHED_CLONE_KEY)
            .map_err(EngineError::from)?;
        Ok((local, report))
    })();
    if made.is_err() && resumed_from_nothing(existed, dir) {
        // Nothing of a failed clone is worth keeping: it made the directory, or found it
        // empty. (A clone killed outright leaves its marker, and the next run finishes it.)
        if existed {
            if let Ok(entries) = std::fs::read_dir(dir) {
                for e in entries.flatten() {
                    let _ = std::fs::remove_dir_all(e.path())
                        .or_else(|_| std::fs::remove_file(e.path()));
                }
            }
        } else {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    made
}

/// The store at `dir` when it is an unfinished clone of `location` (a clone of elsewhere,
/// or a finished store, is not resumed: the caller refuses the directory).
fn unfinished_clone_of(dir: &Path, location: &str) -> RemoteResult<Option<Scion>> {
    if !dir.join("scion.json").exists() {
        return Ok(None);
    }
    let spec = StoreSpec::parse(&dir.display().to_string())?;
    let Ok(attached) = Scion::attach(&spec, AttachOptions::default()) else {
        return Ok(None);
    };
    let local = attached.scion;
    match local.engine().backend().get(UNFINISHED_CLONE_KEY) {
        Ok((bytes, _)) => {
            let marker: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            Ok((marker["location"] == location).then_some(local))
        }
        Err(_) => Ok(None),
    }
}

/// Whether a failed clone may remove what it made: only a clone that started from an
/// empty or missing directory, never one it was finishing.
fn resumed_from_nothing(existed: bool, dir: &Path) -> bool {
    !existed || !dir.join(UNFINISHED_CLONE_KEY).exists()
}

fn bring_all(
    local: &Scion,
    remote: &Remote,
    location: &str,
    opts: &CloneOptions,
    progress: &dyn Progress,
) -> RemoteResult<CloneReport> {
    let available = remote.store.engine().list_databases()?;
    for db in &opts.dbs {
        if !available.contains(db) {
            return Err(EngineError::DatabaseNotFound {
                db: db.clone(),
                remote: Some(remote.name.clone()),
            }
            .into());
        }
    }
    let dbs: Vec<DbName> = available
        .into_iter()
        .filter(|d| opts.dbs.is_empty() || opts.dbs.contains(d))
        .collect();
    let mut report = CloneReport {
        store: local.engine().location().to_string(),
        remote: remote.name.to_string(),
        location: location.to_string(),
        databases: dbs.iter().map(|d| d.to_string()).collect(),
        branches: Vec::new(),
        transfer: Transferred::default(),
    };
    for db in &dbs {
        let mut branches = remote.store.engine().list_branches(db)?;
        // `main` first: every other branch's page map is pruned against it.
        branches.retain(|(name, _)| name.tracking().is_none());
        branches.sort_by_key(|(name, _)| (name != &BranchName::main(), name.clone()));
        let main = BranchRef::new(db.clone(), BranchName::main());
        for (name, theirs) in branches {
            let b = BranchRef::new(db.clone(), name);
            // Brought by the run this one finishes.
            let here = match local.engine().read_ref(&b) {
                Ok((r, _)) => Some(r.root),
                Err(EngineError::BranchNotFound { .. } | EngineError::DatabaseNotFound { .. }) => {
                    None
                }
                Err(e) => return Err(e.into()),
            };
            let checkpoints = remote.store.engine().list_checkpoints(&b)?;
            let roots: Vec<_> = checkpoints.iter().map(|(_, c)| c.root).collect();
            let sent = fetch(local, remote, &theirs, &roots, &[&main], progress)?;
            report.transfer.add(sent.report);
            let tracking = tracking_branch(&remote.name, &b)?;
            record_tracking(local, &tracking, &theirs, remote, Some(&sent))?;
            let receipt = Receipt {
                op: HeadOp::Fetch,
                detail: format!("cloned from {} ({location})", remote.name),
                force: false,
                fast_forward: true,
                reused: &sent.reused,
                started: sent.started,
            };
            let version = match here {
                // In already, as the source has it.
                Some(root) if root == theirs.root => local.engine().read_ref(&b)?.0.version,
                // In, but the source moved since: a clone keeps nothing of its own.
                Some(root) => {
                    local
                        .engine()
                        .receive_head(
                            &b,
                            &Incoming::from_ref(&theirs),
                            Expect::Head(root),
                            Receipt {
                                force: true,
                                fast_forward: false,
                                ..receipt
                            },
                        )?
                        .version
                }
                None => {
                    local
                        .engine()
                        .receive_head(&b, &Incoming::from_ref(&theirs), Expect::Absent, receipt)?
                        .version
                }
            };
            for (name, c) in &checkpoints {
                local.engine().receive_checkpoint(&b, name, c)?;
            }
            report.branches.push(ClonedBranch {
                branch: b.to_string(),
                version,
                checkpoints: checkpoints.len(),
            });
        }
    }
    Ok(report)
}
