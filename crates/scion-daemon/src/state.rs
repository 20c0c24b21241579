//! What every request handler and session thread shares.

use std::sync::Arc;

use scion_core::Scion;

pub use crate::config::Config;
use crate::events::EventLog;
use crate::idempotency::Replays;
use crate::metrics::Metrics;
use crate::sessions::{SessionDeps, Sessions};

pub struct Shared {
    pub scion: Arc<Scion>,
    pub config: Config,
    pub sessions: Arc<Sessions>,
    pub events: Arc<EventLog>,
    pub metrics: Arc<Metrics>,
    pub replays: Arc<Replays>,
}

impl Shared {
    /// What a session's thread is given of the daemon: the services it reports to, never
    /// the request handlers.
    pub fn session_deps(&self) -> SessionDeps {
        SessionDeps {
            scion: self.scion.clone(),
            config: self.config.clone(),
            sessions: self.sessions.clone(),
            events: self.events.clone(),
            metrics: self.metrics.clone(),
        }
    }
}
