//! `scion clone`: a new local store holding a remote's databases, every branch with its
//! checkpoints, and the remote recorded as `origin` with a remote-tracking branch per
//! branch.

use std::path::Path;

use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::history::HeadOp;
use scion_core::ops::receive::{Expect, Incoming, Receipt};
use scion_core::progress::{Progress, ProgressSink};
use scion_core::{BranchName, BranchRef, DbName, EngineError, RemoteName, Scion, StoreSettings};
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
    let existed = dir.exists();
    if existed
        && std::fs::read_dir(dir)
            .map_err(|e| EngineError::Io {
                path: dir.to_path_buf(),
                source: e,
            })?
            .next()
            .is_some()
    {
        return Err(RemoteError::CloneTargetExists {
            dir: dir.display().to_string(),
        });
    }
    let made = (|| {
        let spec = StoreSpec::parse(&dir.display().to_string())?;
        let local = Scion::attach(
            &spec,
            AttachOptions {
                init: Some(opts.settings),
                progress: progress.clone(),
                ..Default::default()
            },
        )?
        .scion;
        let remote = Remote::open_at(&local, opts.remote.clone(), location, progress.clone())?;
        let recorded = local.engine().add_remote(&opts.remote, location)?;
        let report = bring_all(&local, &remote, &recorded, opts, progress.0.as_ref())?;
        Ok((local, report))
    })();
    if made.is_err() {
        // Nothing of a failed clone is worth keeping: it made the directory, or found it
        // empty.
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
            let got = local.engine().receive_head(
                &b,
                &Incoming::from_ref(&theirs),
                Expect::Absent,
                receipt,
            )?;
            for (name, c) in &checkpoints {
                local.engine().receive_checkpoint(&b, name, c)?;
            }
            report.branches.push(ClonedBranch {
                branch: b.to_string(),
                version: got.version,
                checkpoints: checkpoints.len(),
            });
        }
    }
    Ok(report)
}
