//! Every ref compare-and-swap the engine makes goes through `Scion::write_ref`,
//! `Scion::create_ref` or `Scion::update_ref_with`, which retries as `retry::CasRetry`
//! says; each is a `put_exact`, as every conditional write is.

use scion_store::{ETag, PutMode, StoreError};

use crate::conditional::put_exact;
use crate::error::{EngineError, EngineResult};
use crate::names::BranchRef;
use crate::refs::{ref_key, Ref};
use crate::retry::CasRetry;
use crate::Engine;

impl Engine {
    /// Create a branch's ref. `AlreadyExists` comes back as [`EngineError::BranchExists`].
    pub(crate) fn create_ref(&self, b: &BranchRef, r: &mut Ref) -> EngineResult<ETag> {
        let body = r.encode_fresh();
        match put_exact(self.backend.as_ref(), &ref_key(b), &body, PutMode::Create) {
            Ok(e) => Ok(e),
            Err(StoreError::AlreadyExists { .. }) => {
                Err(EngineError::BranchExists { branch: b.clone() })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Remove a ref this process just created (`r`, written with `etag`) because what it
    /// names turned out to be gone. It is claimed first, by compare-and-swap, as a destroy
    /// claims a branch: no writer publishes onto a claimed ref, so the delete that follows
    /// (a HEAD then a DELETE on S3, which has no conditional delete) cannot remove another
    /// writer's commit that landed in between. A claim that loses its race leaves the ref
    /// to whoever moved it.
    pub(crate) fn remove_own_ref(&self, b: &BranchRef, r: &Ref, etag: &ETag) -> EngineResult<()> {
        let mut claimed = r.clone();
        claimed.destroying_since = Some(self.store_time()?);
        let claimed_etag = match self.write_ref(b, &mut claimed, etag) {
            Ok(e) => e,
            Err(EngineError::Conflict { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        match self.backend.delete_if(&ref_key(b), &claimed_etag) {
            Ok(()) | Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Compare-and-swap a ref from the state `etag` names. `r` gets the nonce written.
    pub(crate) fn write_ref(&self, b: &BranchRef, r: &mut Ref, etag: &ETag) -> EngineResult<ETag> {
        let body = r.encode_fresh();
        match put_exact(
            self.backend.as_ref(),
            &ref_key(b),
            &body,
            PutMode::Update(etag.clone()),
        ) {
            Ok(e) => Ok(e),
            Err(StoreError::Conflict { .. }) => Err(EngineError::Conflict { branch: b.clone() }),
            Err(e) => Err(e.into()),
        }
    }

    /// Apply an idempotent change to a live branch's ref, re-reading and re-applying when
    /// another writer moved it in between.
    pub(crate) fn update_ref(
        &self,
        b: &BranchRef,
        change: impl FnMut(&mut Ref) -> EngineResult<()>,
    ) -> EngineResult<Ref> {
        self.update_ref_with(b, false, change).map(|(r, _)| r)
    }

    /// Read-modify-write of a ref: read, change, compare-and-swap; on a conflict, start
    /// over from a fresh read as [`CasRetry`] says. `change` may refuse by returning an
    /// error, which ends the loop. With `claimed`, refs that a destroy has claimed are read
    /// too.
    pub(crate) fn update_ref_with<E: From<EngineError>>(
        &self,
        b: &BranchRef,
        claimed: bool,
        mut change: impl FnMut(&mut Ref) -> Result<(), E>,
    ) -> Result<(Ref, ETag), E> {
        let mut retry = CasRetry::new();
        loop {
            let (mut r, etag) = if claimed {
                self.read_ref_any(b)?
            } else {
                self.read_ref(b)?
            };
            change(&mut r)?;
            match self.write_ref(b, &mut r, &etag) {
                Ok(etag) => return Ok((r, etag)),
                Err(EngineError::Conflict { .. }) if retry.again() => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use scion_store::MemoryBackend;

    use crate::{BranchRef, DbName, Engine, EngineError, EngineOptions};

    #[test]
    fn removing_an_own_ref_never_removes_a_write_that_landed_first() {
        let dir = tempfile::tempdir().unwrap();
        let s = Engine::init(
            Arc::new(MemoryBackend::new()),
            "mem",
            EngineOptions::new(dir.path().join("co")),
            Default::default(),
        )
        .unwrap();
        s.create(&DbName::new("shop").unwrap(), None).unwrap();
        let main: BranchRef = "shop".parse().unwrap();
        s.fork(&main, &"x".parse().unwrap(), Default::default())
            .unwrap();
        let b: BranchRef = "shop@x".parse().unwrap();
        let (r, etag) = s.read_ref(&b).unwrap();
        // Another writer moved the ref between our create and our clean-up.
        s.touch(&b, None).unwrap();
        s.remove_own_ref(&b, &r, &etag).unwrap();
        assert!(s.read_ref(&b).is_ok(), "the other writer's state is kept");
        // Unmoved, it is claimed (no writer publishes onto a claim) and removed.
        let (r, etag) = s.read_ref(&b).unwrap();
        s.remove_own_ref(&b, &r, &etag).unwrap();
        assert!(matches!(
            s.read_ref_any(&b),
            Err(EngineError::BranchNotFound { .. })
        ));
    }

    /// On S3 (moto), whose delete is not conditional: a write racing the removal of a
    /// ref this process made either lands first (and the ref stays) or is refused (and the
    /// ref goes); a write that reported success is never deleted.
    #[test]
    fn a_write_racing_the_removal_of_an_own_ref_on_s3_is_never_deleted() {
        let Ok(bucket) = std::env::var("SCION_S3_TEST_BUCKET") else {
            panic!("S3 tests need ./scripts/test (it starts moto and sets SCION_S3_TEST_BUCKET)");
        };
        let dir = tempfile::tempdir().unwrap();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let loc =
            scion_store::S3Location::parse(&format!("s3://{bucket}/own-ref-{nanos:x}")).unwrap();
        let s3 =
            scion_store::CloudBackend::attach_s3(loc, &scion_store::S3Config::from_env().unwrap())
                .unwrap();
        let s = Engine::init(
            Arc::new(s3),
            "s3",
            EngineOptions::new(dir.path().join("co")),
            Default::default(),
        )
        .unwrap();
        s.create(&DbName::new("shop").unwrap(), None).unwrap();
        let main: BranchRef = "shop".parse().unwrap();
        let (mut kept, mut removed) = (0, 0);
        for round in 0..24 {
            let b: BranchRef = format!("shop@r{round}").parse().unwrap();
            s.fork(
                &main,
                &format!("r{round}").parse().unwrap(),
                Default::default(),
            )
            .unwrap();
            let (r, etag) = s.read_ref(&b).unwrap();
            let wrote = std::thread::scope(|t| {
                // Either side starts first by a few milliseconds, in turn.
                let delay = std::time::Duration::from_millis(round % 6);
                let (scion, branch) = (&s, &b);
                let writer = t.spawn(move || {
                    if round % 2 == 0 {
                        std::thread::sleep(delay);
                    }
                    scion.touch(branch, None).is_ok()
                });
                if round % 2 == 1 {
                    std::thread::sleep(delay);
                }
                s.remove_own_ref(&b, &r, &etag).unwrap();
                writer.join().unwrap()
            });
            let exists = s.read_ref_any(&b).is_ok();
            assert!(
                !wrote || exists,
                "round {round}: a write that landed was deleted"
            );
            if exists {
                kept += 1;
            } else {
                removed += 1;
            }
        }
        eprintln!("own-ref removal raced by a write: {kept} kept, {removed} removed");
    }
}
