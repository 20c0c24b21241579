//! The [`Engine`]: one opened store (refs, versions, segments, commit, fork, leases, head
//! history: everything that lives in the store, on any host). It knows nothing of checkout
//! files; the working tree (the `scion-core` crate) builds on it. The VFS opens an engine
//! alone ([`Engine::attach`]).

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use scion_store::{Backend, ETag, PutMode, StoreError};

use crate::clock::{rfc3339, StoreTime};
use crate::error::{EngineError, EngineResult};
use crate::format::{Locator, PageCompression};
use crate::manifest::{Manifest, StoreSettings, MANIFEST_KEY, STORE_FORMAT_VERSION};
use crate::names::{BranchName, BranchRef, CheckpointName, DbName, Target};
use crate::reader::FrameReader;
use crate::refs::{
    branch_from_key, branch_of_checkpoint_key, checkpoint_key, checkpoints_prefix,
    database_checkpoints_prefix, ref_key, refs_prefix, Checkpoint, Ref,
};

/// How an [`Engine`] runs in this process.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Who this process is when it takes or checks leases (`host/pid` unless set).
    pub holder: String,
    /// Where progress of long operations goes.
    pub progress: crate::progress::ProgressSink,
    /// Where this host's page writers take turns: lock files named as the branches'
    /// checkouts would be (the engine never opens a checkout file there).
    pub turns_dir: PathBuf,
}

impl EngineOptions {
    /// This process as the lease holder, no progress, turns taken under `turns_dir`.
    pub fn new(turns_dir: PathBuf) -> Self {
        Self {
            holder: default_holder(),
            progress: Default::default(),
            turns_dir,
        }
    }
}

/// `hostname:boot:pidns/pid`: unique per process across hosts and containers that share
/// a host name (the boot id tells hosts apart, the pid namespace containers), readable by
/// people.
pub fn default_holder() -> String {
    static PLACE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let place = PLACE.get_or_init(holder_place);
    format!("{place}/{}", std::process::id())
}

pub(crate) use scion_store::clock::host_name;

/// `hostname:boot:pidns`: where this process runs, read once.
fn holder_place() -> String {
    let host = host_name();
    let boot: String = scion_store::clock::boot_id()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_hexdigit())
        .take(8)
        .collect();
    let pidns = std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|l| {
            let l = l.to_string_lossy().to_string();
            let digits: String = l.chars().filter(|c| c.is_ascii_digit()).collect();
            (!digits.is_empty()).then_some(digits)
        })
        .unwrap_or_default();
    format!("{host}:{boot}:{pidns}")
}

/// The store room: one opened store, knowing nothing of checkout files. Every write it
/// makes is a compare-and-swap or a create-only write, so any number of engines, on any
/// hosts, share one store.
#[derive(Debug)]
pub struct Engine {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) location: String,
    /// The store's identity, from its manifest: a manifest that names another later means
    /// the store was replaced underneath this process.
    pub(crate) store_id: String,
    /// Fixed at `init`; see [`Engine::min_grace`].
    min_grace: Duration,
    /// How new full pages are stored: the manifest's setting when opened, or when last
    /// re-read ([`Engine::reload_settings`]) or changed by this process.
    pub(crate) page_compression: RwLock<PageCompression>,
    pub(crate) reader: FrameReader,
    /// Who this process is when it takes or checks leases.
    holder: String,
    pub(crate) progress: crate::progress::ProgressSink,
    /// Where this host's page writers take turns: lock files beside where the branches'
    /// checkouts would be (the working tree's directory; the engine never opens a
    /// checkout file there).
    turns_dir: PathBuf,
    /// The ancestry gc kept for versions whose segments it reclaimed, once read.
    pub(crate) kept_graph:
        std::sync::Mutex<Option<Arc<std::collections::HashMap<Locator, crate::format::Ancestry>>>>,
}

/// A version picked out by a target, and how it was named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedVersion {
    /// The version's root record.
    pub root: Locator,
    /// Its number on its branch.
    pub version: u64,
}

impl Engine {
    /// Create a new store with `settings` recorded in its manifest. Fails if one exists at
    /// the location.
    pub fn init(
        backend: Arc<dyn Backend>,
        location: &str,
        options: EngineOptions,
        settings: StoreSettings,
    ) -> EngineResult<Self> {
        let manifest = Manifest {
            format: STORE_FORMAT_VERSION,
            store_id: crate::refs::random_hex(16),
            created_at: rfc3339(backend.now()?),
            min_grace_secs: Some(settings.min_grace.as_secs()),
            page_compression: Some(settings.page_compression),
            history_retention_secs: Some(settings.history_retention.as_secs()),
            remotes: Default::default(),
            unknown: Default::default(),
        };
        let body = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
        match backend.put(MANIFEST_KEY, &body, PutMode::Create) {
            Ok(_) => {}
            Err(StoreError::AlreadyExists { .. }) => {
                return Err(EngineError::AlreadyInitialized {
                    location: location.to_string(),
                })
            }
            Err(e) => return Err(e.into()),
        }
        Ok(Self::assemble(backend, location, manifest, options))
    }

    /// Open an existing store, refusing one written by a newer scion.
    pub fn open(
        backend: Arc<dyn Backend>,
        location: &str,
        options: EngineOptions,
    ) -> EngineResult<Self> {
        let (manifest, _) = read_manifest(backend.as_ref(), location)?;
        Ok(Self::assemble(backend, location, manifest, options))
    }

    fn assemble(
        backend: Arc<dyn Backend>,
        location: &str,
        manifest: Manifest,
        options: EngineOptions,
    ) -> Self {
        Engine {
            reader: FrameReader::new(backend.clone(), &manifest.store_id),
            backend,
            location: location.to_string(),
            page_compression: RwLock::new(manifest.page_compression()),
            min_grace: manifest.min_grace(),
            store_id: manifest.store_id,
            holder: options.holder,
            progress: options.progress,
            turns_dir: options.turns_dir,
            kept_graph: Default::default(),
        }
    }

    /// The store this engine reads and writes.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Where the store is, as it was named (`/dir`, `s3://bucket/prefix`, ...).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The store's identity, from its manifest.
    pub fn store_id(&self) -> &str {
        &self.store_id
    }

    /// How this store keeps new full page frames.
    pub fn page_compression(&self) -> PageCompression {
        *self
            .page_compression
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The lock file where `b`'s page writers on this host take turns.
    pub(crate) fn turn_lock_path(&self, b: &BranchRef) -> PathBuf {
        self.turns_dir
            .join(b.db.as_str())
            .join(format!("{}.db", b.branch))
    }

    /// Read a branch's ref and the etag to compare-and-swap it with. A branch that a
    /// `destroy` has claimed is reported as being destroyed.
    pub fn read_ref(&self, b: &BranchRef) -> EngineResult<(Ref, ETag)> {
        let (r, etag) = self.read_ref_any(b)?;
        if r.destroying_since.is_some() {
            return Err(EngineError::BeingDestroyed { branch: b.clone() });
        }
        Ok((r, etag))
    }

    /// Like [`Self::read_ref`], but also returns refs claimed by a destroy.
    pub fn read_ref_any(&self, b: &BranchRef) -> EngineResult<(Ref, ETag)> {
        let key = ref_key(b);
        match self.backend.get(&key) {
            Ok((bytes, etag)) => Ok((Ref::decode(&bytes, &key)?, etag)),
            Err(StoreError::NotFound { .. }) => Err(self.missing_branch(b)?),
            Err(e) => Err(e.into()),
        }
    }

    /// The store's clock (lease expiry and TTLs are judged by it, not the caller's).
    pub(crate) fn store_now(&self) -> EngineResult<SystemTime> {
        Ok(self.backend.now()?)
    }

    /// The store's clock now, as refs and receipts record it: lease expiry and TTLs are
    /// judged by it, not the caller's ([`StoreTime::as_system_time`] for the time itself).
    pub fn store_clock(&self) -> EngineResult<StoreTime> {
        self.store_time()
    }

    pub(crate) fn store_time(&self) -> EngineResult<StoreTime> {
        Ok(StoreTime::from_store_clock(self.backend.now()?))
    }

    /// The shortest grace period `gc` may use on this store without `force`; commits that
    /// take longer than half of it re-check their segments before publishing.
    pub fn min_grace(&self) -> Duration {
        self.min_grace
    }

    /// Where progress of this engine's long operations goes.
    pub fn progress(&self) -> &crate::progress::ProgressSink {
        &self.progress
    }

    /// Who this process is when it takes or checks leases.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    fn missing_branch(&self, b: &BranchRef) -> EngineResult<EngineError> {
        if self.backend.list(&refs_prefix(&b.db))?.is_empty() {
            return Ok(EngineError::DatabaseNotFound {
                db: b.db.clone(),
                remote: None,
            });
        }
        Ok(EngineError::BranchNotFound {
            branch: b.clone(),
            remote: None,
        })
    }

    /// The version a target names: a branch head, a checkpoint, or a reserved name.
    pub fn resolve(&self, t: &Target) -> EngineResult<ResolvedVersion> {
        let (r, _) = self.read_ref(&t.branch)?;
        let Some(name) = &t.checkpoint else {
            return Ok(ResolvedVersion {
                root: r.root,
                version: r.version,
            });
        };
        match name.as_str() {
            "fork" => Ok(ResolvedVersion {
                root: r.fork_root,
                version: r.fork_version,
            }),
            "init" => Ok(ResolvedVersion {
                root: r.init_root,
                version: 1,
            }),
            _ => match self.read_checkpoint(&t.branch, name) {
                Ok(c) => Ok(ResolvedVersion {
                    root: c.root,
                    version: c.version,
                }),
                // `vN` that no checkpoint is named: version N of the branch, as its head
                // history has it (the names merge refusals give versions by).
                Err(e @ EngineError::CheckpointNotFound { .. }) => {
                    match version_number(name.as_str()) {
                        Some(n) => self.version_in_history(&t.branch, n)?.ok_or(e),
                        None => Err(e),
                    }
                }
                Err(e) => Err(e),
            },
        }
    }

    /// Version `n` of `b`: a head its history recorded (kept while the history keeps it).
    fn version_in_history(&self, b: &BranchRef, n: u64) -> EngineResult<Option<ResolvedVersion>> {
        let history = self.head_history(b, None)?;
        let found = history.entries.iter().find_map(|e| match (e.new, e.old) {
            (Some(root), _) if e.new_version == n => Some(root),
            (_, Some(root)) if e.old_version == n => Some(root),
            _ => None,
        });
        Ok(found.map(|root| ResolvedVersion { root, version: n }))
    }

    pub(crate) fn read_checkpoint(
        &self,
        b: &BranchRef,
        name: &CheckpointName,
    ) -> EngineResult<Checkpoint> {
        let key = checkpoint_key(b, name);
        match self.backend.get(&key) {
            Ok((bytes, _)) => Checkpoint::decode(&bytes, &key),
            Err(StoreError::NotFound { .. }) => Err(EngineError::CheckpointNotFound {
                checkpoint: Target {
                    branch: b.clone(),
                    checkpoint: Some(name.clone()),
                },
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Bind checkpoint `name` of `b` to a version (number `version`), with `meta`, by a
    /// create-only write: a name already bound is [`EngineError::CheckpointExists`].
    pub fn bind_checkpoint(
        &self,
        b: &BranchRef,
        name: &CheckpointName,
        root: Locator,
        version: u64,
        meta: std::collections::BTreeMap<String, String>,
    ) -> EngineResult<Checkpoint> {
        let mut c = Checkpoint {
            schema: crate::refs::CHECKPOINT_SCHEMA,
            root,
            version,
            created_at: self.store_time()?,
            meta,
            nonce: Default::default(),
        };
        let body = c.encode_fresh();
        match crate::conditional::put_exact(
            self.backend.as_ref(),
            &checkpoint_key(b, name),
            &body,
            PutMode::Create,
        ) {
            Ok(_) => Ok(c),
            Err(StoreError::AlreadyExists { .. }) => Err(EngineError::CheckpointExists {
                checkpoint: Target {
                    branch: b.clone(),
                    checkpoint: Some(name.clone()),
                },
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Refuse a checkpoint name that is reserved or already bound on `b`, or user entries
    /// `meta` a checkpoint cannot keep: the checks before a checkpoint does any work.
    pub fn check_checkpoint_name(
        &self,
        b: &BranchRef,
        name: &CheckpointName,
        meta: &std::collections::BTreeMap<String, String>,
    ) -> EngineResult<()> {
        crate::refs::check_user_meta(meta)?;
        if name.is_reserved() {
            return Err(EngineError::ReservedName {
                name: name.to_string(),
            });
        }
        if self.backend.exists(&checkpoint_key(b, name))? {
            return Err(EngineError::CheckpointExists {
                checkpoint: Target {
                    branch: b.clone(),
                    checkpoint: Some(name.clone()),
                },
            });
        }
        Ok(())
    }

    /// Every database in the store, in name order.
    pub fn list_databases(&self) -> EngineResult<Vec<DbName>> {
        let mut dbs: Vec<DbName> = Vec::new();
        for m in self.backend.list("refs/")? {
            let mut parts = m.key.split('/').skip(1);
            if let Some(Ok(db)) = parts.next().map(DbName::new) {
                if dbs.last() != Some(&db) {
                    dbs.push(db);
                }
            }
        }
        dbs.dedup();
        Ok(dbs)
    }

    /// Every branch of `db` with its ref, in name order (a branch being destroyed
    /// included).
    pub fn list_branches(&self, db: &DbName) -> EngineResult<Vec<(BranchName, Ref)>> {
        let mut out = Vec::new();
        for m in self.backend.list(&refs_prefix(db))? {
            let Some(branch) = branch_from_key(db, &m.key) else {
                continue;
            };
            match self.backend.get(&m.key) {
                Ok((bytes, _)) => {
                    let r = Ref::decode(&bytes, &m.key)?;
                    // A branch claimed by a destroy is already gone for every reader.
                    if r.destroying_since.is_none() {
                        out.push((branch, r));
                    }
                }
                // Destroyed between list and get.
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        if out.is_empty() {
            return Err(EngineError::DatabaseNotFound {
                db: db.clone(),
                remote: None,
            });
        }
        Ok(out)
    }

    /// How many checkpoints `b` has: one listing, none read.
    pub fn count_checkpoints(&self, b: &BranchRef) -> EngineResult<usize> {
        Ok(self.backend.list(&checkpoints_prefix(b))?.len())
    }

    /// How many checkpoints each branch of `db` has (branches with none are absent): one
    /// listing for the whole database, however many branches it holds, none read.
    pub fn count_checkpoints_by_branch(
        &self,
        db: &DbName,
    ) -> EngineResult<std::collections::BTreeMap<BranchName, usize>> {
        let mut counts = std::collections::BTreeMap::new();
        for m in self.backend.list(&database_checkpoints_prefix(db))? {
            if let Some(branch) = branch_of_checkpoint_key(db, &m.key) {
                *counts.entry(branch).or_insert(0) += 1;
            }
        }
        Ok(counts)
    }

    /// Every checkpoint of `b`, oldest version first.
    pub fn list_checkpoints(
        &self,
        b: &BranchRef,
    ) -> EngineResult<Vec<(CheckpointName, Checkpoint)>> {
        self.read_ref(b)?;
        let prefix = checkpoints_prefix(b);
        let mut out = Vec::new();
        for m in self.backend.list(&prefix)? {
            let Some(Ok(name)) = m.key.strip_prefix(&prefix).map(CheckpointName::new) else {
                continue;
            };
            match self.backend.get(&m.key) {
                Ok((bytes, _)) => out.push((name, Checkpoint::decode(&bytes, &m.key)?)),
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        out.sort_by(|a, b| {
            (a.1.version, &a.1.created_at, &a.0).cmp(&(b.1.version, &b.1.created_at, &b.0))
        });
        Ok(out)
    }
}

/// The store's manifest and its etag (for a compare-and-swap that replaces it); a store
/// without one is not initialized.
pub(crate) fn read_manifest(
    backend: &dyn Backend,
    location: &str,
) -> EngineResult<(Manifest, ETag)> {
    match backend.get(MANIFEST_KEY) {
        Ok((bytes, etag)) => Ok((Manifest::decode(&bytes, location)?, etag)),
        Err(StoreError::NotFound { .. }) => Err(EngineError::NotInitialized {
            location: location.to_string(),
        }),
        Err(e) => Err(e.into()),
    }
}

/// `v12` as 12: how a version number is written after a branch (`shop@main@v12`).
pub(crate) fn version_number(name: &str) -> Option<u64> {
    let digits = name.strip_prefix('v')?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}
