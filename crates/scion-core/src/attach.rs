//! Attaching to a store with this host's working tree: the engine's attach
//! ([`scion_engine::attach`]), and a [`Scion`] around it.

use std::sync::Arc;

pub use scion_engine::attach::*;
use scion_engine::{Engine, EngineResult};
use scion_store::CountingBackend;

use crate::checkout::ClonePolicy;
use crate::{Scion, ScionOptions};

/// An attached store and the request counter that sits right on it (a segment served
/// from the local cache is not a request).
pub struct Attached {
    /// The store with this host's working tree.
    pub scion: Scion,
    /// The requests made to the store, counted.
    pub counter: Arc<CountingBackend>,
}

impl Scion {
    /// Open (or, with `options.init`, create) the store `spec` names, with this host's
    /// working tree of checkouts (made as [`ClonePolicy::Auto`] allows; see
    /// [`Scion::with_clone_policy`]).
    pub fn attach(spec: &StoreSpec, options: AttachOptions) -> EngineResult<Attached> {
        let AttachedEngine {
            engine,
            counter,
            checkouts_dir,
            store_dir,
        } = Engine::attach(spec, options)?;
        let mut o = ScionOptions::new(checkouts_dir, ClonePolicy::Auto);
        o.store_dir = store_dir;
        o.holder = engine.holder().to_string();
        o.progress = engine.progress().clone();
        Ok(Attached {
            scion: Scion::around(engine, o),
            counter,
        })
    }
}
