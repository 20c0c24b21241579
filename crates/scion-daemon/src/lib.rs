//! `scion serve`: sessions with live WAL capture, the HTTP API over a unix socket (and
//! optionally TCP with a token), the janitor, events and metrics. [`Daemon::serve`] runs in
//! the foreground until SIGTERM or SIGINT, then flushes and closes every session.

mod actor;
mod answer;
pub mod api;
pub mod authorize;
pub mod client;
mod config;
pub mod embedded;
mod error;
pub mod events;
mod follow;
mod handler;
mod idempotency;
mod janitor;
pub mod metrics;
pub mod proxy;
pub mod query;
pub mod sessions;
mod state;
pub mod tokens;
pub mod transport;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use scion_core::Scion;
use tokio::sync::watch;

pub use config::{Config, FollowTarget};
pub use error::{ApiError, DaemonError, ErrorBody, ErrorEnvelope};
pub use metrics::{Metrics, StoreObserver};

use crate::sessions::CloseReason;
use crate::state::Shared;
use crate::tokens::TokenStore;
use crate::transport::{Access, Peer};

/// Where to listen.
#[derive(Debug, Clone)]
pub struct Listen {
    pub socket: PathBuf,
    /// TCP as well (needs `token`; a non-loopback address needs `allow_remote`).
    pub tcp: Option<SocketAddr>,
    pub token: Option<String>,
    pub allow_remote: bool,
    /// The file of scoped tokens (`scion token`) this daemon accepts.
    pub tokens: Option<PathBuf>,
    /// Socket peers must present a token too.
    pub socket_tokens: bool,
}

pub struct Daemon {
    shared: Arc<Shared>,
    listen: Listen,
}

impl Daemon {
    /// `metrics` must be the one whose [`StoreObserver`] was given to the store when it
    /// was attached, so that store requests are counted.
    pub fn new(
        scion: Arc<Scion>,
        config: Config,
        metrics: Arc<Metrics>,
        listen: Listen,
    ) -> Result<Daemon, DaemonError> {
        if let Some(addr) = listen.tcp {
            if listen.token.as_deref().is_none_or(str::is_empty) && listen.tokens.is_none() {
                return Err(DaemonError::Config(
                    "--listen needs --token-file (or --tokens FILE of scoped tokens): TCP clients must present a token".into(),
                ));
            }
            if !addr.ip().is_loopback() && !listen.allow_remote {
                return Err(DaemonError::Config(format!(
                    "{addr} is reachable from other hosts; pass --allow-remote to listen there"
                )));
            }
        }
        let shared = Arc::new(Shared {
            scion,
            config,
            sessions: Default::default(),
            events: Default::default(),
            metrics,
            replays: Default::default(),
        });
        Ok(Daemon { shared, listen })
    }

    /// Serve until SIGTERM or SIGINT, then close every session (each flushes first).
    pub fn serve(self) -> Result<(), DaemonError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| DaemonError::Config(format!("starting the runtime: {e}")))?;
        rt.block_on(self.run())
    }

    async fn run(self) -> Result<(), DaemonError> {
        let (stop_tx, stop) = watch::channel(false);
        let unix = transport::bind_unix(&self.listen.socket).await?;
        let access = Access {
            token: self.listen.token.clone().map(Arc::new),
            tokens: self
                .listen
                .tokens
                .clone()
                .map(|p| Arc::new(TokenStore::new(p))),
            socket_tokens: self.listen.socket_tokens,
        };
        let app = api::router(self.shared.clone(), access, stop.clone());
        let mut servers = Vec::new();
        {
            let app = app.clone();
            let mut stop = stop.clone();
            servers.push(tokio::spawn(async move {
                axum::serve(unix, app.into_make_service_with_connect_info::<Peer>())
                    .with_graceful_shutdown(async move {
                        let _ = stop.changed().await;
                    })
                    .await
            }));
        }
        if let Some(addr) = self.listen.tcp {
            let tcp = transport::bind_tcp(addr).await?;
            let mut stop = stop.clone();
            servers.push(tokio::spawn(async move {
                axum::serve(tcp, app.into_make_service_with_connect_info::<Peer>())
                    .with_graceful_shutdown(async move {
                        let _ = stop.changed().await;
                    })
                    .await
            }));
        }
        tokio::spawn(janitor::run(self.shared.clone(), stop.clone()));
        let follow_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let followers = follow::start(&self.shared, follow_stop.clone());
        tracing::info!(socket = %self.listen.socket.display(), store = %self.shared.scion.engine().location(), "serving");
        wait_for_signal().await;
        tracing::info!("stopping: closing sessions");
        let _ = stop_tx.send(true);
        follow_stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for id in self.shared.sessions.ids() {
            match self
                .shared
                .sessions
                .close(&id, CloseReason::DaemonStopping)
                .await
            {
                Ok(c) => tracing::info!(session = %id, version = c.version, "closed"),
                Err(e) => tracing::warn!(session = %id, error = %e.body.message, "close failed"),
            }
        }
        for s in servers {
            let _ = s.await;
        }
        for f in followers {
            let _ = tokio::task::spawn_blocking(move || f.join()).await;
        }
        let _ = std::fs::remove_file(&self.listen.socket);
        Ok(())
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
