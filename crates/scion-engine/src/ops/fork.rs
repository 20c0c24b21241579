//! `fork`: a new branch at an existing version. One small create-only write; no page is
//! copied, whatever the database's size.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{EngineError, EngineResult};
use crate::names::{BranchName, BranchRef, CheckpointName, Owner, Target};
use crate::refs::{check_user_meta, Parent, Ref, REF_SCHEMA};
use crate::Engine;

/// What a fork made.
#[derive(Debug, Clone, Serialize)]
pub struct ForkReport {
    /// The new branch.
    pub branch: BranchRef,
    /// What it was forked from (a branch head or a checkpoint).
    pub from: Target,
    /// The version's number where it came from.
    pub version: u64,
    /// The bytes of the one ref written: a fork's whole cost at the store.
    pub ref_bytes: u64,
}

/// What a fork takes besides its source and its name; the default forks the source's
/// head with nothing else.
#[derive(Debug, Clone, Default)]
pub struct ForkOptions {
    /// Fork at this checkpoint of the source instead of its head.
    pub at: Option<CheckpointName>,
    /// Let `gc` reap the branch after this long without a commit or touch.
    pub ttl: Option<std::time::Duration>,
    /// The user's entries (who made it and why).
    pub meta: BTreeMap<String, String>,
    /// The front end that made it (an agent's or a token's tag): it may change the branch.
    pub owner: Option<Owner>,
    /// A branch made for one test or one attempt: once destroyed or reaped its head
    /// history goes with it, so `gc` reclaims its pages at once (`restore` cannot bring
    /// it back).
    pub ephemeral: bool,
}

impl Engine {
    /// A new branch `new` at the source's head (or the checkpoint `options.at` names), in
    /// one create-only write whatever the database's size: no page is copied.
    pub fn fork(
        &self,
        source: &BranchRef,
        new: &BranchName,
        options: ForkOptions,
    ) -> EngineResult<ForkReport> {
        let ForkOptions {
            at,
            ttl,
            meta,
            owner,
            ephemeral,
        } = options;
        let at = at.as_ref();
        new.check_new()?;
        check_user_meta(&meta)?;
        let target = Target {
            branch: source.clone(),
            checkpoint: at.cloned(),
        };
        let (src_ref, _) = self.read_ref(source)?;
        let version = match at {
            None => crate::ResolvedVersion {
                root: src_ref.root,
                version: src_ref.version,
            },
            Some(_) => self.resolve(&target)?,
        };
        let page_count = if version.root == src_ref.root {
            src_ref.page_count
        } else {
            self.reader.root(&version.root)?.page_count
        };
        let now = self.store_time()?;
        let mut r = Ref {
            schema: REF_SCHEMA,
            root: version.root,
            version: version.version,
            page_size: src_ref.page_size,
            page_count,
            fork_root: version.root,
            fork_version: version.version,
            init_root: src_ref.init_root,
            parent: Some(Parent {
                branch: source.branch.to_string(),
                version: version.version,
                checkpoint: at.map(|c| c.to_string()),
            }),
            protected: false,
            created_at: now,
            touched_at: now,
            epoch: 0,
            lease: None,
            ttl_secs: ttl.map(|d| d.as_secs().max(1)),
            destroying_since: None,
            safety: None,
            meta,
            history: Vec::new(),
            history_before: None,
            checkouts: Vec::new(),
            nonce: Default::default(),
        };
        r.set_owner(owner.as_ref());
        r.set_ephemeral(ephemeral);
        let new_ref = BranchRef::new(source.db.clone(), new.clone());
        let etag = self.create_ref(&new_ref, &mut r)?;
        // A GC that found the version unreachable (its source destroyed meanwhile) may have
        // swept it: never leave a branch pointing at deleted data.
        if !self.backend.exists(&version.root.segment.key())? {
            let _ = self.remove_own_ref(&new_ref, &r, &etag);
            return Err(EngineError::Conflict {
                branch: new_ref.clone(),
            });
        }
        Ok(ForkReport {
            branch: new_ref.clone(),
            from: target.clone(),
            version: version.version,
            ref_bytes: r.encode().len() as u64,
        })
    }
}
