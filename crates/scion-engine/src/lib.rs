//! scion's engine: one opened store and everything that lives in it (names, refs, the page
//! map, segments, commit, fork, checkpoints, leases, head history), on any host. It knows
//! nothing of this host's checkout files: the working tree (`scion-core`) builds on it, and
//! the VFS and the merge use it alone. It prints nothing and returns typed errors
//! ([`EngineError`]).

#![deny(missing_docs)]

pub mod actor;
pub mod attach;
pub mod clock;
mod commit;
mod conditional;
pub mod diff;
mod engine;
mod error;
pub mod history;
pub mod live;
mod manifest;
pub mod materialize;
mod objects;
pub mod ops;
mod page_cache;
mod pagemap;
pub mod progress;
mod publish;
mod reader;
pub mod refs;
mod retry;
pub mod sqlite_io;
pub mod turns;
mod writer;

/// The binary formats, which are their own crate (`scion-format`).
pub use scion_format as format;
/// Names of databases, branches, checkpoints, remotes and owners (`scion-format`'s).
#[doc(no_inline)]
pub use scion_format::names;
/// Patterns of branches (`scion-format`'s).
#[doc(no_inline)]
pub use scion_format::pattern;

pub use engine::{default_holder, Engine, EngineOptions, ResolvedVersion};
pub use error::{EngineError, EngineResult};
/// How new full page frames are stored (`scion-format`'s).
#[doc(no_inline)]
pub use format::PageCompression;
pub(crate) use manifest::{Manifest, MANIFEST_KEY};
pub use manifest::{StoreSettings, DEFAULT_MIN_GRACE};
#[doc(no_inline)]
pub use names::{BranchName, BranchRef, CheckpointName, DbName, Owner, RemoteName, Target};
pub use ops::fork::{ForkOptions, ForkReport};
pub use ops::lease::{LeaseChange, LeaseOutcome};
pub use page_cache::{PageCache, PageCacheStats};
#[doc(no_inline)]
pub use pattern::BranchPattern;
pub use writer::WriteStats;
