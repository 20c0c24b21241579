//! Object-store backends for scion.
//!
//! A backend is a flat key space of immutable-or-compare-and-swapped objects. Everything
//! durable that scion keeps (manifest, refs, checkpoints, segments) goes through the
//! [`Backend`] trait, so the engine never knows whether it talks to a local directory,
//! memory or (later) an S3 bucket.

#[cfg(feature = "cloud")]
pub mod azure;
mod backend;
pub mod cache;
mod cache_limit;
mod changes;
pub mod clock;
#[cfg(feature = "cloud")]
pub mod cloud;
pub mod counting;
mod error;
pub mod fault;
mod key;
pub mod local;
pub mod memory;
pub mod observed;
pub mod powerloss;
pub mod probe;
pub mod range_lock;
#[cfg(feature = "cloud")]
pub mod s3;
pub mod units;

#[cfg(feature = "conformance")]
pub mod conformance;

#[cfg(feature = "cloud")]
pub use azure::{AzureConfig, AzureLocation};
pub use backend::{Backend, ETag, ObjectMeta, PutMode};
pub use cache::{CacheLimit, CacheUsage, SegmentCache};
#[cfg(feature = "cloud")]
pub use cloud::{CloudBackend, Requests};
pub use counting::{CountingBackend, Counts};
pub use error::{StoreError, StoreResult};
pub use fault::{FaultPlan, FaultyBackend, LostAnswer};
pub(crate) use key::validate_key;
pub use local::LocalBackend;
pub use memory::MemoryBackend;
pub use observed::{ObservedBackend, Outcome, RequestObserver, StoreOp};
pub use probe::probe_conditional_writes;
#[cfg(feature = "cloud")]
pub use s3::{S3Config, S3Location};
