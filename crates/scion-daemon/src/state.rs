//! What every request handler and session thread shares.

use std::sync::Arc;
use std::time::Duration;

use scion_core::Scion;

use crate::events::EventLog;
use crate::idempotency::Replays;
use crate::metrics::Metrics;
use crate::sessions::Sessions;

/// How the daemon runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Commit what sessions captured at least this often while they are dirty.
    pub flush_every: Duration,
    /// How long a session's branch lease lasts; renewed every third of it.
    pub lease_ttl: Duration,
    /// How often the janitor reaps expired branches.
    pub janitor_every: Duration,
    /// How often the janitor runs GC (`None`: never).
    pub gc_every: Option<Duration>,
    /// The opt-in second tier of WAL recycling: above this many frames, a brief write
    /// lock (at most 10 ms waiting for it) lets the WAL restart under nonstop writers.
    pub barrier_frames: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            flush_every: Duration::from_secs(5),
            lease_ttl: Duration::from_secs(60),
            janitor_every: Duration::from_secs(60),
            gc_every: Some(Duration::from_secs(3600)),
            barrier_frames: None,
        }
    }
}

pub struct Shared {
    pub scion: Arc<Scion>,
    pub config: Config,
    pub sessions: Sessions,
    pub events: EventLog,
    pub metrics: Arc<Metrics>,
    pub replays: Replays,
}
