//! scion's core, in two rooms: the [`Engine`] (names, refs, the page map, segments, commit,
//! fork, checkpoints, leases, head history: the store alone) and [`Scion`], the engine
//! with this host's checkout files on top (checkout, refresh, export, and the operations
//! that must judge a checkout before they move a head). It prints nothing and returns
//! typed errors: [`EngineError`] from the engine, [`CoreError`] from the working tree.

pub mod actor;
pub mod attach;
pub mod checkout;
pub mod clock;
mod commit;
mod conditional;
pub mod described;
pub mod diff;
mod error;
pub mod history;
mod manifest;
mod materialize;
mod name_types;
pub mod names;
mod objects;
pub mod ops;
mod page_cache;
mod pagemap;
pub mod pattern;
pub mod progress;
mod publish;
mod reader;
pub mod refs;
mod retry;
mod scion;
mod sqlite_io;
pub mod turns;
mod writer;

/// The binary formats, which are their own crate (`scion-format`).
pub use scion_format as format;

pub use checkout::{CheckoutAction, CheckoutReport, CheckoutState, ClonePolicy};
pub use error::{CoreError, CoreResult, EngineError, EngineResult};
pub use format::PageCompression;
pub(crate) use manifest::{Manifest, MANIFEST_KEY};
pub use manifest::{StoreSettings, DEFAULT_MIN_GRACE};
pub use names::{BranchName, BranchRef, CheckpointName, DbName, Owner, RemoteName, Target};
pub use ops::checkpoint::CheckpointOptions;
pub use ops::fork::{ForkOptions, ForkReport};
pub use page_cache::{PageCache, PageCacheStats};
pub use pattern::BranchPattern;
pub use scion::{Engine, EngineOptions, ResolvedVersion, Scion, ScionOptions};
pub use writer::WriteStats;
