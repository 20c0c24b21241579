//! The operations on a store, one module each.

pub mod checkpoint;
pub mod compact;
pub mod config;
pub mod create;
pub mod export;
pub mod fork;
pub mod gc;
pub mod graph;
pub mod history;
pub mod lease;
pub mod lifecycle;
pub(crate) mod moves;
pub mod pages;
pub mod receive;
pub mod spill;
pub mod status;
pub mod transfer;
pub mod tree;
pub mod verify;
pub mod view;

/// At most this many pages of one commit are stored as deltas: each costs a read of its
/// base, which pays off for small commits and not for bulk rewrites.
pub(crate) const MAX_DELTA_PAGES: usize = 256;

/// Retry a whole write operation when its freshly drawn segment id turned out taken.
pub(crate) fn with_fresh_ids<T>(
    mut f: impl FnMut() -> crate::EngineResult<T>,
) -> crate::EngineResult<T> {
    let mut tries = 0;
    loop {
        match f() {
            Err(crate::EngineError::SegmentCollision { .. }) if tries < 3 => tries += 1,
            other => return other,
        }
    }
}
