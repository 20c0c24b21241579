//! The attach-time proof that a store really enforces create-only puts and
//! compare-and-swap. A store that silently ignores preconditions would let two writers
//! overwrite each other's refs, so it is refused instead.

use crate::{Backend, ETag, PutMode, StoreError, StoreResult};

/// Run the probe under `probe/` and remove its object. On success returns the key it used
/// (already deleted). `Err(StoreError::Other)` names the missing capability.
pub fn probe_conditional_writes(b: &dyn Backend) -> StoreResult<()> {
    probe_with(b, |_| Ok(()))
}

/// The probe, calling `after_create` with the probe key once its object exists (the S3
/// backend reads the store's clock from it).
pub fn probe_with(
    b: &dyn Backend,
    after_create: impl FnOnce(&str) -> StoreResult<()>,
) -> StoreResult<()> {
    let mut r = [0u8; 8];
    getrandom::fill(&mut r).expect("the OS random source is available");
    let key = format!(
        "probe/cas-{}",
        r.iter().map(|x| format!("{x:02x}")).collect::<String>()
    );
    let refuse = |what: &str| {
        Err(StoreError::Other(format!(
            "{} does not enforce {what}; scion refuses stores without real compare-and-swap",
            b.describe()
        )))
    };
    let result = (|| {
        let first = b.put(&key, b"A", PutMode::Create)?;
        after_create(&key)?;
        match b.put(&key, b"B", PutMode::Create) {
            Err(StoreError::AlreadyExists { .. }) => {}
            Ok(_) => return refuse("create-only puts (If-None-Match: *)"),
            Err(e) => return Err(e),
        }
        if b.get(&key)?.0 != b"A" {
            return refuse("create-only puts (If-None-Match: *)");
        }
        match b.put(&key, b"C", PutMode::Update(ETag("scion-bogus-etag".into()))) {
            Err(StoreError::Conflict { .. }) => {}
            Ok(_) => return refuse("conditional updates (If-Match)"),
            Err(e) => return Err(e),
        }
        if b.get(&key)?.0 != b"A" {
            return refuse("conditional updates (If-Match)");
        }
        b.put(&key, b"D", PutMode::Update(first))?;
        if b.get(&key)?.0 != b"D" {
            return refuse("conditional updates (If-Match) with the current etag");
        }
        Ok(())
    })();
    let _ = b.delete(&key);
    result
}
