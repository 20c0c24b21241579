//! The working-tree room: [`Scion`], an [`Engine`] with this host's working tree of
//! checkout files on top. The CLI, the daemon and the SDKs open a `Scion`, which holds its
//! engine and hands it out by [`Scion::engine`]: a store operation is named as one
//! (`scion.engine().fork(..)`), never reached by dereferencing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use scion_engine::{default_holder, Engine, EngineOptions, EngineResult, StoreSettings};
use scion_store::Backend;

use crate::checkout::ClonePolicy;
/// Where checkouts go and how they may be cloned.
#[derive(Debug, Clone)]
pub struct ScionOptions {
    /// Where this host keeps the store's checkouts.
    pub checkouts_dir: PathBuf,
    /// The local directory holding the store, if it is one (exports never write there).
    pub store_dir: Option<PathBuf>,
    /// How checkouts may be cloned from another clean file of the same version.
    pub clone_policy: ClonePolicy,
    /// Who this process is when it takes or checks leases (`host/pid` unless set).
    pub holder: String,
    /// Where progress of long operations goes.
    pub progress: crate::progress::ProgressSink,
}

impl ScionOptions {
    /// Checkouts in `checkouts_dir`, cloned as `clone_policy` allows; this process as the
    /// lease holder, no progress.
    pub fn new(checkouts_dir: PathBuf, clone_policy: ClonePolicy) -> Self {
        Self {
            checkouts_dir,
            store_dir: None,
            clone_policy,
            holder: default_holder(),
            progress: Default::default(),
        }
    }

    /// What the working tree's engine runs with: its page writers take turns beside the
    /// checkouts, so a VFS writer and a checkout of one branch on this host meet there.
    pub(crate) fn engine_options(&self) -> EngineOptions {
        EngineOptions {
            holder: self.holder.clone(),
            progress: self.progress.clone(),
            turns_dir: self.checkouts_dir.clone(),
        }
    }
}

/// The working-tree room: the [`Engine`] of a store and this host's checkouts of it
/// (files, sidecars, locks, refresh, materialize). Operations that must not strand a
/// checkout's changes (rollback, promote, destroy, gc) judge the file here before the
/// engine moves anything.
#[derive(Debug)]
pub struct Scion {
    pub(crate) engine: Arc<Engine>,
    pub(crate) options: ScionOptions,
}

impl Scion {
    /// Create a new store with `settings` recorded in its manifest (and this host's
    /// working tree for it). Fails if one exists at the location.
    pub fn init(
        backend: Arc<dyn Backend>,
        location: &str,
        options: ScionOptions,
        settings: StoreSettings,
    ) -> EngineResult<Self> {
        let engine = Engine::init(backend, location, options.engine_options(), settings)?;
        Ok(Self::around(engine, options))
    }

    /// Open an existing store, refusing one written by a newer scion.
    pub fn open(
        backend: Arc<dyn Backend>,
        location: &str,
        options: ScionOptions,
    ) -> EngineResult<Self> {
        let engine = Engine::open(backend, location, options.engine_options())?;
        Ok(Self::around(engine, options))
    }

    /// The working tree of `options.checkouts_dir` around an opened engine.
    pub(crate) fn around(engine: Engine, options: ScionOptions) -> Self {
        Scion {
            engine: Arc::new(engine),
            options,
        }
    }

    /// The store room alone, to hand to what needs no working tree (the VFS).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Where this host keeps the store's checkouts.
    pub fn checkouts_dir(&self) -> &Path {
        &self.options.checkouts_dir
    }

    /// This working tree, making its checkouts as `policy` allows.
    pub fn with_clone_policy(mut self, policy: ClonePolicy) -> Self {
        self.options.clone_policy = policy;
        self
    }

    /// How checkouts may be cloned.
    pub fn clone_policy(&self) -> ClonePolicy {
        self.options.clone_policy
    }
}
