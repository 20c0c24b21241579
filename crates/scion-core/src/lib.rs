//! scion's engine: names, refs, the page map, segments, commit, fork, checkpoints,
//! checkouts and export. It prints nothing and returns typed errors ([`CoreError`]).

pub mod attach;
pub mod checkout;
pub mod clock;
mod commit;
mod conditional;
pub mod described;
pub mod diff;
mod error;
pub mod format;
pub mod history;
mod manifest;
mod materialize;
pub mod names;
mod objects;
pub mod ops;
pub mod pagemap;
pub mod progress;
pub mod publish;
pub mod reader;
pub mod refs;
mod retry;
mod scion;
pub mod sqlite_io;
pub mod writer;

pub use checkout::{CheckoutAction, CheckoutReport, CheckoutState, ClonePolicy};
pub use error::{CoreError, CoreResult};
pub use format::PageCompression;
pub use manifest::{
    Manifest, StoreSettings, DEFAULT_MIN_GRACE, MANIFEST_KEY, STORE_FORMAT_VERSION,
};
pub use names::{BranchName, BranchRef, CheckpointName, DbName, Target};
pub use scion::{default_holder, ResolvedVersion, Scion, ScionOptions};
