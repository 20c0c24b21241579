//! The one commit path. Every writer of versions (create/import, checkpoint, compact, and
//! the layers above the engine) makes a version the same way:
//!
//! 1. **stage**: [`Commit::begin`] notes the store's clock, then the caller adds pages and
//!    map nodes to [`Commit::writer`];
//! 2. **seal**: [`Commit::seal`] writes the root record and the last segment (create-only);
//! 3. **check**: before publishing, a commit older than half the store's minimum GC grace
//!    re-checks that every segment it wrote is still there (GC never deletes a segment
//!    younger than the grace, so a younger commit needs no check);
//! 4. **publish**: one compare-and-swap of the ref ([`Engine::publish_head`]) or one
//!    create-only ref write ([`Engine::publish_new_ref`]), decided by re-reading when the
//!    answer is ambiguous;
//! 5. **verify**: the new segments exist after publishing; if a GC run with a grace below
//!    the minimum (forced) removed one, the head is put back and the commit fails.
//!
//! Nothing on this path deletes a segment: a version that was never published is
//! unreachable, and GC removes it after its grace period. Deleting it here would be wrong
//! whenever the outcome of the publish is unknown.

use scion_store::ETag;

use crate::clock::StoreTime;
use crate::error::{EngineError, EngineResult};
use crate::format::{Ancestry, Locator, Parents, RootRecord, SegmentId};
use crate::history::HeadMove;
use crate::names::BranchRef;
use crate::refs::{ref_key, Ref};
use crate::retry::CasRetry;
use crate::writer::{VersionWriter, WriteStats};
use crate::Engine;

/// A version being staged.
pub(crate) struct Commit<'a> {
    pub writer: VersionWriter<'a>,
    started: StoreTime,
}

/// A version whose segments are all written, not yet published by any ref.
#[derive(Debug)]
pub(crate) struct Sealed {
    pub root: Locator,
    pub record: RootRecord,
    pub stats: WriteStats,
    pub segments: Vec<SegmentId>,
    /// The store's clock before the first segment was written: no segment of this
    /// version is older than this.
    started: StoreTime,
}

impl<'a> Commit<'a> {
    pub fn begin(scion: &'a Engine) -> EngineResult<Self> {
        Ok(Commit {
            started: scion.store_time()?,
            writer: VersionWriter::new(&scion.backend, scion.page_compression()),
        })
    }

    /// The ancestry of a version made from `parents`: its generation follows theirs (a
    /// parent written before the version graph counts as generation 0).
    pub(crate) fn ancestry(&self, scion: &Engine, parents: Parents) -> EngineResult<Ancestry> {
        ancestry_at(scion, parents, self.started)
    }

    /// Write the root record and the last segment.
    pub(crate) fn seal(self, record: RootRecord) -> EngineResult<Sealed> {
        let (root, stats, segments) = self.writer.finish(&record)?;
        Ok(Sealed {
            root,
            record,
            stats,
            segments,
            started: self.started,
        })
    }
}

/// The ancestry of a version made from `parents` at store time `at`.
pub(crate) fn ancestry_at(
    scion: &Engine,
    parents: Parents,
    at: StoreTime,
) -> EngineResult<Ancestry> {
    let mut generation = 0;
    for p in parents.iter() {
        let parent = scion.reader.root(&p)?.ancestry.map_or(0, |a| a.generation);
        generation = generation.max(parent);
    }
    Ok(Ancestry {
        parents,
        generation: generation + 1,
        made_at_ms: crate::clock::unix_ms(at.as_system_time()),
    })
}

impl Engine {
    /// Step 3: a commit that took longer than half the minimum grace proves its segments
    /// are still there before it publishes them.
    fn check_sealed(&self, b: &BranchRef, sealed: &Sealed) -> EngineResult<()> {
        let age = self.store_time()?.since(sealed.started);
        if age.saturating_mul(2) <= self.min_grace() {
            return Ok(());
        }
        if !self.segments_exist(&sealed.segments)? {
            return Err(EngineError::CommitExpired {
                branch: b.clone(),
                took_secs: age.as_secs(),
            });
        }
        Ok(())
    }

    fn segments_exist(&self, segments: &[SegmentId]) -> EngineResult<bool> {
        for id in segments {
            if !self.backend.exists(&id.key())? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Publish the first ref of a new database (or branch) at a sealed version.
    pub(crate) fn publish_new_ref(
        &self,
        b: &BranchRef,
        sealed: &Sealed,
        r: &mut Ref,
    ) -> EngineResult<ETag> {
        self.check_sealed(b, sealed)?;
        let etag = self.create_ref(b, r)?;
        if !self.segments_exist(&sealed.segments)? {
            // Only our own, still unchanged ref is removed: nobody has built on it.
            let _ = self.remove_own_ref(b, r, &etag);
            return Err(EngineError::CommitLost { branch: b.clone() });
        }
        Ok(etag)
    }

    /// Move `b`'s head from `base` (read with `etag`) by compare-and-swap, with `apply`
    /// making the new state from the current one. When only fields that do not name the
    /// head changed meanwhile (a touch, protect, TTL change), `apply` is re-applied to the
    /// fresh ref; when the head, its epoch or its lease holder changed, another writer won
    /// and this is a [`EngineError::Conflict`].
    ///
    /// The move is recorded in the new ref's head history as `mv` says (spilling older
    /// entries into a history object when the ref holds too many). `apply` sees every ref
    /// the move would replace, re-read ones too, and may refuse it: what it refuses is not
    /// published.
    pub(crate) fn publish_head(
        &self,
        b: &BranchRef,
        base: &Ref,
        etag: ETag,
        sealed: Option<&Sealed>,
        mv: &HeadMove,
        apply: impl Fn(&mut Ref) -> EngineResult<()>,
    ) -> EngineResult<(Ref, ETag)> {
        if let Some(s) = sealed {
            self.check_sealed(b, s)?;
        }
        // A remote-tracking branch shows what the remote held at the last pull, nothing else.
        if b.branch.tracking().is_some() && mv.op != crate::history::HeadOp::Fetch {
            return Err(EngineError::TrackingBranch { branch: b.clone() });
        }
        let at = self.store_time()?;
        let (mut current, mut etag) = (base.clone(), etag);
        let mut retry = CasRetry::new();
        loop {
            let mut next = current.clone();
            apply(&mut next)?;
            self.record_move(b, &current, &mut next, mv, at)?;
            match self.write_ref(b, &mut next, &etag) {
                Ok(new_etag) => {
                    if let Some(s) = sealed {
                        self.verify_published(b, &mut current, &new_etag, s)?;
                    }
                    return Ok((next, new_etag));
                }
                Err(EngineError::Conflict { .. }) if retry.again() => {
                    let (fresh, fresh_etag) = self.read_ref(b)?;
                    if !fresh.same_head(base) {
                        return Err(EngineError::Conflict { branch: b.clone() });
                    }
                    (current, etag) = (fresh, fresh_etag);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Step 5: after publishing, every new segment exists; otherwise put `previous` back.
    fn verify_published(
        &self,
        b: &BranchRef,
        previous: &mut Ref,
        published: &ETag,
        sealed: &Sealed,
    ) -> EngineResult<()> {
        if self.segments_exist(&sealed.segments)? {
            return Ok(());
        }
        match self.write_ref(b, previous, published) {
            Ok(_) => Err(EngineError::CommitLost {
                branch: b.clone(),
            }),
            Err(_) => Err(EngineError::corrupt(
                ref_key(b),
                format!(
                    "the head names version {} whose segments a GC below the minimum grace removed; restore it from a checkpoint",
                    sealed.root
                ),
            )),
        }
    }
}
