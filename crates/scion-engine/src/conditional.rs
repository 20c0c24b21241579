//! The engine's conditional writes of objects that must not be written twice (refs and
//! leases, checkpoints, segments, head-history objects, the GC state, the manifest's
//! first write) go through [`put_exact`]. A change of the manifest needs no re-read of
//! its own: it re-applies itself to a fresh read, and an applied change is then a no-op.
//!
//! A conditional write can land while its answer is lost: a timeout after the store
//! applied it, or a proxy that retries a write which had landed and relays the store's
//! `412`. Read naively, that "conflict" makes a writer delete data it has just published.
//! Every object written here is unique (refs and checkpoints carry a fresh nonce, segments
//! a random id), so after any precondition failure or transient error the writer re-reads
//! the object: if it holds exactly the bytes this call wrote, the write succeeded.

use scion_store::{Backend, ETag, PutMode, StoreError, StoreResult};

/// Write `body` to `key` under `mode`, deciding an ambiguous answer by what the store
/// holds afterwards. Returns the etag of the state this call wrote.
pub(crate) fn put_exact(
    backend: &dyn Backend,
    key: &str,
    body: &[u8],
    mode: PutMode,
) -> StoreResult<ETag> {
    let err = match backend.put(key, body, mode) {
        Ok(etag) => return Ok(etag),
        Err(e @ (StoreError::Conflict { .. } | StoreError::AlreadyExists { .. })) => e,
        Err(e) if e.is_retryable() => e,
        Err(e) => return Err(e),
    };
    match backend.get(key) {
        Ok((held, etag)) if held == body => {
            tracing::debug!("{key}: the write landed although its answer said {err}");
            Ok(etag)
        }
        // Not ours (or gone): the original answer stands.
        Ok(_) | Err(StoreError::NotFound { .. }) => Err(err),
        // Cannot tell: report the original failure, which the caller treats as unknown.
        Err(_) => Err(err),
    }
}
