//! Live capture of a checkout's WAL into scion versions: what the daemon's sessions run.
//! The capturer (`capturer.rs`) follows one SQLite database's published commits without ever blocking a
//! writer; [`LiveBranch`] commits what it captured through the engine's one commit path,
//! with the cursor that lets a restart resume exactly where the durable version ends.

pub mod capturer;
pub mod cursor;
mod error;
pub mod live;
pub mod pending;
mod reconcile;
pub mod shm;
pub mod walfile;

pub use capturer::{BreakReason, Step};
pub use cursor::{Cursor, FileId, Mark, Place};
pub use error::{CaptureError, CaptureResult};
pub use live::{Attach, FlushReport, LiveBranch, LiveStatus};
pub use reconcile::ReconcileReport;
