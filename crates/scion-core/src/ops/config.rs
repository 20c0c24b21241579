//! Changing a store's settings after `init`.
//!
//! Only page compression may change: readers decode every codec whatever the manifest
//! says, so frames written before and after the change sit side by side, and nothing
//! already stored is rewritten (`compact` rewrites a head with the store's setting).
//! The minimum GC grace stays what `init` recorded: a commit in flight in another process
//! decides from the grace it read whether to re-check its segments, and a shorter grace
//! under it could let `gc` take what it is about to publish.

use scion_store::{PutMode, StoreError};

use crate::error::{CoreError, CoreResult};
use crate::format::PageCompression;
use crate::manifest::MANIFEST_KEY;
use crate::scion::read_manifest;
use crate::Scion;

/// What changing a setting did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCompressionChange {
    pub before: PageCompression,
    pub after: PageCompression,
}

impl Scion {
    /// Store new full page frames as `compression` says, from now on, in every process
    /// that opens the store after this (one already open keeps the setting it read).
    /// The manifest is replaced by compare-and-swap, so a concurrent change is never lost.
    pub fn set_page_compression(
        &mut self,
        compression: PageCompression,
    ) -> CoreResult<PageCompressionChange> {
        let mut tries = 0;
        loop {
            let (mut manifest, etag) = read_manifest(self.backend.as_ref(), &self.location)?;
            if manifest.store_id != self.manifest.store_id {
                return Err(CoreError::corrupt(
                    MANIFEST_KEY,
                    format!("{}: the store id changed while open", self.location),
                ));
            }
            let before = manifest.page_compression();
            if before != compression {
                manifest.page_compression = Some(compression);
                let body = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
                match self.backend.put(MANIFEST_KEY, &body, PutMode::Update(etag)) {
                    Ok(_) => {}
                    // Another process changed the manifest between our read and write.
                    Err(StoreError::Conflict { .. }) if tries < 8 => {
                        tries += 1;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            self.manifest = manifest;
            return Ok(PageCompressionChange {
                before,
                after: compression,
            });
        }
    }
}
