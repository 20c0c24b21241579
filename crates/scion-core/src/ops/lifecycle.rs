//! Moving and removing branches: rollback, promote, destroy, protect, touch, and deleting
//! checkpoints. Each head move is one compare-and-swap of a root pointer; no page is copied.

use std::time::{Duration, SystemTime};

use scion_store::{PutMode, StoreError};
use serde::Serialize;

use crate::checkout::{CheckoutState, Sidecar};
use crate::clock::rfc3339;
use crate::error::{CoreError, CoreResult};
use crate::format::Locator;
use crate::names::{BranchName, BranchRef, CheckpointName, Target};
use crate::refs::{checkpoint_key, checkpoints_prefix, ref_key, Parent, Ref, SAFETY_META};
use crate::sqlite_io::{self, sidecar_path};
use crate::Scion;

/// Safety forks live this long unless told otherwise.
pub const DEFAULT_BACKUP_TTL: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone, Default)]
pub struct MoveOptions {
    /// Override protection, another holder's lease, and uncheckpointed changes.
    pub force: bool,
    /// Keep no safety fork (a protected branch then also needs `force`).
    pub no_backup: bool,
    pub backup_ttl: Option<Duration>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MoveReport {
    pub branch: String,
    /// The version the head now holds, and where it came from.
    pub to: String,
    pub version: u64,
    /// Version number of the head that was replaced.
    pub abandoned_version: u64,
    /// Where the replaced head was kept.
    pub safety_fork: Option<String>,
    /// The checkout was refreshed (path) or had uncheckpointed changes discarded.
    pub checkout: Option<String>,
    pub discarded_changes: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct DestroyReport {
    pub branch: String,
    pub checkpoints_removed: usize,
    pub checkout_files_removed: usize,
}

impl Scion {
    /// Repoint `b` at one of its checkpoints (or `fork`/`init`).
    pub fn rollback(
        &self,
        b: &BranchRef,
        to: &CheckpointName,
        opts: &MoveOptions,
    ) -> CoreResult<MoveReport> {
        let target = self.resolve(&Target {
            branch: b.clone(),
            checkpoint: Some(to.clone()),
        })?;
        let (r, etag) = self.read_ref(b)?;
        if opts.no_backup && r.protected && !opts.force {
            return Err(CoreError::Protected {
                branch: b.to_string(),
                action: "a rollback without a safety fork",
            });
        }
        self.move_head(
            b,
            r,
            etag,
            target.root,
            format!("{b}@{to}"),
            "pre-rollback",
            opts,
        )
    }

    /// Repoint `onto` at the head of `source` (same database).
    pub fn promote(
        &self,
        source: &BranchRef,
        onto: &BranchName,
        opts: &MoveOptions,
    ) -> CoreResult<MoveReport> {
        let target_ref = BranchRef::new(source.db.clone(), onto.clone());
        let (src, _) = self.read_ref(source)?;
        let (r, etag) = self.read_ref(&target_ref)?;
        if r.protected && !opts.force {
            return Err(CoreError::Protected {
                branch: target_ref.to_string(),
                action: "promoting onto it",
            });
        }
        self.move_head(
            &target_ref,
            r,
            etag,
            src.root,
            source.to_string(),
            "pre-promote",
            opts,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn move_head(
        &self,
        b: &BranchRef,
        r: Ref,
        etag: scion_store::ETag,
        root: Locator,
        to: String,
        backup_suffix: &str,
        opts: &MoveOptions,
    ) -> CoreResult<MoveReport> {
        self.check_not_leased(b, &r, opts.force)?;
        // The checkout must be safe to replace before anything moves.
        let path = self.checkout_path(b);
        let state = self.inspect(&path, &r.root)?.state;
        if matches!(state, CheckoutState::Dirty | CheckoutState::Unknown) && !opts.force {
            return Err(CoreError::DirtyCheckout {
                path,
                branch: b.to_string(),
            });
        }
        if path.exists() && sqlite_io::in_use(&path)? {
            return Err(CoreError::CheckoutBusy { path });
        }
        let page_count = self.reader.root(&root)?.page_count;
        let safety_fork = if opts.no_backup {
            None
        } else {
            Some(self.keep_safety_fork(
                b,
                &r,
                backup_suffix,
                opts.backup_ttl.unwrap_or(DEFAULT_BACKUP_TTL),
            )?)
        };
        let mut next = r.clone();
        next.root = root;
        next.version = r.version + 1;
        next.page_count = page_count;
        next.touched_at = rfc3339(SystemTime::now());
        self.write_ref(b, &next, &etag)?;
        let mut checkout = None;
        if state != CheckoutState::None {
            // The file is clean, stale or being discarded by force: refresh it.
            let report = self.checkout(b, true)?;
            checkout = Some(report.path.display().to_string());
        }
        Ok(MoveReport {
            branch: b.to_string(),
            to,
            version: next.version,
            abandoned_version: r.version,
            safety_fork,
            checkout,
            discarded_changes: matches!(state, CheckoutState::Dirty | CheckoutState::Unknown),
        })
    }

    /// Keep `r`'s head as `<branch>-<suffix>`, replacing an earlier one (one rolling slot).
    fn keep_safety_fork(
        &self,
        b: &BranchRef,
        r: &Ref,
        suffix: &str,
        ttl: Duration,
    ) -> CoreResult<String> {
        let name = BranchName::new(&format!("{}-{suffix}", b.branch))?;
        let fork = BranchRef::new(b.db.clone(), name);
        let now = rfc3339(SystemTime::now());
        let mut keep = Ref {
            schema: r.schema,
            root: r.root,
            version: r.version,
            page_size: r.page_size,
            page_count: r.page_count,
            fork_root: r.root,
            fork_version: r.version,
            init_root: r.init_root,
            parent: Some(Parent {
                branch: b.branch.to_string(),
                version: r.version,
                checkpoint: None,
            }),
            protected: false,
            created_at: now.clone(),
            touched_at: now,
            epoch: 0,
            lease: None,
            ttl_secs: Some(ttl.as_secs()),
            destroying_since: None,
            meta: Default::default(),
        };
        keep.meta
            .insert(SAFETY_META.to_string(), format!("{suffix} of {}", b.branch));
        let key = ref_key(&fork);
        for _ in 0..5 {
            let mode = match self.backend.get(&key) {
                Ok((bytes, etag)) => {
                    let old = Ref::decode(&bytes, &key)?;
                    if !old.meta.contains_key(SAFETY_META) {
                        // A branch of that name that is not a safety fork is never replaced.
                        return Err(CoreError::BranchExists {
                            branch: fork.to_string(),
                        });
                    }
                    PutMode::Update(etag)
                }
                Err(StoreError::NotFound { .. }) => PutMode::Create,
                Err(e) => return Err(e.into()),
            };
            match self.backend.put(&key, &keep.encode(), mode) {
                Ok(_) => return Ok(fork.to_string()),
                Err(StoreError::Conflict { .. } | StoreError::AlreadyExists { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(CoreError::Conflict {
            branch: fork.to_string(),
        })
    }

    /// Remove a branch: its ref, its checkpoints and its local checkout files. Its data
    /// goes at the next `gc` that finds it unreachable.
    pub fn destroy(&self, b: &BranchRef, force: bool) -> CoreResult<DestroyReport> {
        let mut tries = 0;
        let claimed_etag = loop {
            let (mut r, etag) = self.read_ref_any(b)?;
            if r.destroying_since.is_none() {
                if (r.protected || b.branch.as_str() == "main") && !force {
                    return Err(CoreError::Protected {
                        branch: b.to_string(),
                        action: "destroying it",
                    });
                }
                self.check_not_leased(b, &r, force)?;
                let path = self.checkout_path(b);
                if path.exists() && sqlite_io::in_use(&path)? && !force {
                    return Err(CoreError::CheckoutBusy { path });
                }
                // Claim first: from here on no operation moves or reads this branch.
                r.destroying_since = Some(rfc3339(SystemTime::now()));
            }
            match self.write_ref(b, &r, &etag) {
                Ok(e) => break e,
                Err(CoreError::Conflict { .. }) if tries < 5 => tries += 1,
                Err(e) => return Err(e),
            }
        };
        self.finish_destroy(b, &claimed_etag)
    }

    /// Claim a branch for destruction only if it is still exactly in the state `etag`
    /// names (so a reaper never destroys a branch someone touched since it looked).
    pub(crate) fn reap(
        &self,
        b: &BranchRef,
        r: &Ref,
        etag: &scion_store::ETag,
    ) -> CoreResult<Option<DestroyReport>> {
        let mut claimed = r.clone();
        claimed.destroying_since = Some(rfc3339(SystemTime::now()));
        match self.write_ref(b, &claimed, etag) {
            Ok(e) => self.finish_destroy(b, &e).map(Some),
            Err(CoreError::Conflict { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Everything after the claim: checkpoints, the ref, local files.
    pub(crate) fn finish_destroy(
        &self,
        b: &BranchRef,
        claimed_etag: &scion_store::ETag,
    ) -> CoreResult<DestroyReport> {
        let mut removed = self.delete_checkpoints(b)?;
        match self.backend.delete_if(&ref_key(b), claimed_etag) {
            Ok(()) | Err(StoreError::NotFound { .. }) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        // A checkpoint bound while the claim landed is removed too.
        removed += self.delete_checkpoints(b)?;
        let files = self.remove_checkout_files(b)?;
        Ok(DestroyReport {
            branch: b.to_string(),
            checkpoints_removed: removed,
            checkout_files_removed: files,
        })
    }

    fn delete_checkpoints(&self, b: &BranchRef) -> CoreResult<usize> {
        let list = self.backend.list(&checkpoints_prefix(b))?;
        for m in &list {
            self.backend.delete(&m.key)?;
        }
        Ok(list.len())
    }

    fn remove_checkout_files(&self, b: &BranchRef) -> CoreResult<usize> {
        let path = self.checkout_path(b);
        let mut n = 0;
        let mut paths = vec![
            path.clone(),
            sidecar_path(&path, "-wal"),
            sidecar_path(&path, "-shm"),
            Sidecar::path_for(&path),
            sidecar_path(&path, ".scion.pending"),
        ];
        let ro_dir = self.read_only_dir(&b.db);
        if let Ok(entries) = std::fs::read_dir(&ro_dir) {
            let prefix = format!("{}@", b.branch);
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    paths.push(e.path());
                }
            }
        }
        for p in paths {
            match std::fs::remove_file(&p) {
                Ok(()) => n += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(CoreError::io(p, e)),
            }
        }
        Ok(n)
    }

    pub fn set_protected(&self, b: &BranchRef, protected: bool) -> CoreResult<()> {
        self.update_ref(b, |r| {
            r.protected = protected;
            Ok(())
        })?;
        Ok(())
    }

    /// Reset the branch's activity clock, and set (`Some(Some(d))`) or clear
    /// (`Some(None)`) its TTL.
    pub fn touch(&self, b: &BranchRef, ttl: Option<Option<Duration>>) -> CoreResult<Ref> {
        let now = rfc3339(self.store_now()?);
        self.update_ref(b, |r| {
            r.touched_at = now.clone();
            if let Some(t) = ttl {
                r.ttl_secs = t.map(|d| d.as_secs().max(1));
            }
            Ok(())
        })
    }

    pub fn delete_checkpoint(&self, b: &BranchRef, name: &CheckpointName) -> CoreResult<()> {
        if name.is_reserved() {
            return Err(CoreError::ReservedName {
                name: name.to_string(),
            });
        }
        self.read_ref(b)?;
        self.read_checkpoint(b, name)?;
        self.backend.delete(&checkpoint_key(b, name))?;
        Ok(())
    }

    /// Set a new branch's TTL right after forking it.
    pub fn set_ttl(&self, b: &BranchRef, ttl: Duration) -> CoreResult<()> {
        self.touch(b, Some(Some(ttl))).map(drop)
    }
}
