//! Changing a store's settings after `init`.
//!
//! Page compression and the head history's retention may change. Readers decode every
//! codec whatever the manifest says, so frames written before and after a compression
//! change sit side by side, and nothing already stored is rewritten (`compact` rewrites a head with the store's setting).
//! A process that keeps a store open (the daemon) follows a change made by another when it
//! re-reads the manifest ([`Engine::reload_settings`](crate::Engine::reload_settings)).
//! The minimum GC grace stays what `init` recorded: a commit in flight in another process
//! decides from the grace it read whether to re-check its segments, and a shorter grace
//! under it could let `gc` take what it is about to publish.

use std::time::Duration;

use scion_store::{ETag, PutMode, StoreError};

use crate::engine::read_manifest;
use crate::error::{EngineError, EngineResult};
use crate::format::PageCompression;
use crate::manifest::{Manifest, MANIFEST_KEY};
use crate::names::RemoteName;
use crate::Engine;

/// What changing a setting did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCompressionChange {
    /// The setting before.
    pub before: PageCompression,
    /// The setting now.
    pub after: PageCompression,
}

impl Engine {
    /// Store new full page frames as `compression` says, from now on, in this process
    /// and every process that opens the store after this or re-reads its settings (one
    /// already open keeps the setting it read until then). The manifest is replaced by
    /// compare-and-swap, so a concurrent change is never lost.
    pub fn set_page_compression(
        &self,
        compression: PageCompression,
    ) -> EngineResult<PageCompressionChange> {
        let before = self.change_manifest(|m| {
            let before = m.page_compression();
            m.page_compression = Some(compression);
            before
        })?;
        self.follow(compression);
        Ok(PageCompressionChange {
            before,
            after: compression,
        })
    }

    /// How long `gc` keeps every head the head history names, as the store says now.
    pub fn history_retention(&self) -> EngineResult<Duration> {
        Ok(self.current_manifest()?.0.history_retention())
    }

    /// Keep heads named by the history for `retention` from the next `gc` on (in every
    /// process: `gc` reads the setting each time it runs). Returns the setting before.
    pub fn set_history_retention(&self, retention: Duration) -> EngineResult<Duration> {
        self.change_manifest(|m| {
            let before = m.history_retention();
            m.history_retention_secs = Some(retention.as_secs());
            before
        })
    }

    /// Change the manifest by compare-and-swap, re-applying `change` to a fresh read when
    /// another process changed it in between; nothing is written when nothing changes.
    fn change_manifest<T>(&self, mut change: impl FnMut(&mut Manifest) -> T) -> EngineResult<T> {
        let mut retry = crate::retry::CasRetry::new();
        loop {
            let (mut manifest, etag) = self.current_manifest()?;
            let before = manifest.clone();
            let out = change(&mut manifest);
            if manifest == before {
                return Ok(out);
            }
            let body = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
            match self.backend.put(MANIFEST_KEY, &body, PutMode::Update(etag)) {
                Ok(_) => return Ok(out),
                Err(StoreError::Conflict { .. }) if retry.again() => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The other stores this one pushes to and pulls from, by name.
    pub fn remotes(&self) -> EngineResult<std::collections::BTreeMap<String, String>> {
        Ok(self.current_manifest()?.0.remotes)
    }

    /// Where remote `name` lives.
    pub fn remote_location(&self, name: &RemoteName) -> EngineResult<String> {
        self.remotes()?
            .remove(name.as_str())
            .ok_or_else(|| EngineError::RemoteNotFound {
                remote: name.clone(),
            })
    }

    /// Add remote `name` at `location` (any store location; a relative path is made
    /// absolute). Returns the location as recorded.
    pub fn add_remote(&self, name: &RemoteName, location: &str) -> EngineResult<String> {
        let recorded = crate::attach::StoreSpec::parse(location)?.location();
        let mut taken = None;
        self.change_manifest(|m| match m.remotes.get(name.as_str()) {
            Some(at) => taken = Some(at.clone()),
            None => {
                taken = None;
                m.remotes.insert(name.to_string(), recorded.clone());
            }
        })?;
        match taken {
            Some(location) if location != recorded => Err(EngineError::RemoteExists {
                remote: name.clone(),
                location,
            }),
            _ => Ok(recorded),
        }
    }

    /// Forget remote `name`; returns where it was. Its remote-tracking branches stay
    /// until destroyed.
    pub fn remove_remote(&self, name: &RemoteName) -> EngineResult<String> {
        let removed = self.change_manifest(|m| m.remotes.remove(name.as_str()))?;
        removed.ok_or_else(|| EngineError::RemoteNotFound {
            remote: name.clone(),
        })
    }

    /// Re-read the store's settings, for a process that keeps the store open while
    /// another may run `scion config`. `Some` when the page compression changed since this
    /// process last looked.
    pub fn reload_settings(&self) -> EngineResult<Option<PageCompressionChange>> {
        let (manifest, _) = self.current_manifest()?;
        let (before, after) = (self.page_compression(), manifest.page_compression());
        self.follow(after);
        Ok((before != after).then_some(PageCompressionChange { before, after }))
    }

    /// The manifest as stored now, which must still be this store's.
    pub(crate) fn current_manifest(&self) -> EngineResult<(Manifest, ETag)> {
        let (manifest, etag) = read_manifest(self.backend.as_ref(), &self.location)?;
        if manifest.store_id != self.store_id {
            return Err(EngineError::corrupt(
                MANIFEST_KEY,
                format!("{}: the store id changed while open", self.location),
            ));
        }
        Ok((manifest, etag))
    }

    fn follow(&self, compression: PageCompression) {
        *self
            .page_compression
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = compression;
    }
}
