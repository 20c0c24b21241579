//! scion's working tree: [`Scion`], an [`Engine`] of a store with this host's checkout
//! files on top (checkout, refresh, export, and the operations that must judge a checkout
//! before they move a head). It is also the face the CLI, the daemon and the SDKs use: the
//! engine's modules are re-exported here under the same names. It prints nothing and
//! returns typed errors: [`EngineError`] from the engine, [`CoreError`] from the working
//! tree.

#![deny(missing_docs)]

pub mod attach;
pub mod checkout;
pub mod described;
pub mod diff;
mod error;
pub mod ops;
mod scion;

pub use scion_engine::{
    actor, clock, format, history, live, names, pattern, progress, refs, turns,
};

pub use checkout::{CheckoutAction, CheckoutReport, CheckoutState, ClonePolicy};
pub use error::{CoreError, CoreResult};
pub use ops::checkpoint::CheckpointOptions;
pub use scion::{Scion, ScionOptions};
pub use scion_engine::{
    BranchName, BranchPattern, BranchRef, CheckpointName, DbName, Engine, EngineError,
    EngineOptions, EngineResult, ForkOptions, ForkReport, LeaseChange, LeaseOutcome, Owner,
    PageCache, PageCacheStats, PageCompression, RemoteName, ResolvedVersion, StoreSettings, Target,
    WriteStats, DEFAULT_MIN_GRACE,
};
