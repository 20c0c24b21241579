//! The daemon's API answered inside this process, without a socket: for front ends (the MCP
//! server) that run where no daemon does. Requests go through the same router, so answers
//! and errors are exactly the daemon's; sessions opened here live in this process.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use scion_core::Scion;
use tokio::sync::watch;
use tower::ServiceExt;

use crate::sessions::CloseReason;
use crate::state::{Config, Shared};
use crate::transport::{Access, Peer};
use crate::Metrics;

pub struct Embedded {
    router: Router,
    shared: Arc<Shared>,
    _stop: watch::Sender<bool>,
}

impl Embedded {
    pub fn new(scion: Arc<Scion>, config: Config) -> Embedded {
        let shared = Arc::new(Shared {
            scion,
            config,
            sessions: Default::default(),
            events: Default::default(),
            metrics: Arc::new(Metrics::default()),
            replays: Default::default(),
        });
        let (stop_tx, stop) = watch::channel(false);
        let router = crate::api::router(shared.clone(), Access::default(), stop);
        Embedded {
            router,
            shared,
            _stop: stop_tx,
        }
    }

    /// Answer one request: its status and JSON body (text bodies as a JSON string).
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        headers: &[(&str, &str)],
    ) -> (u16, serde_json::Value) {
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json");
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        // A path or header the HTTP types refuse is refused as a daemon would refuse it,
        // never a panic that leaves the caller waiting.
        let mut req = match builder.body(Body::from(bytes)) {
            Ok(req) => req,
            Err(e) => {
                return (
                    400,
                    serde_json::json!({"error": {
                        "code": "invalid_input",
                        "message": format!("not a request this API takes: {e}"),
                    }}),
                )
            }
        };
        // This very process is the peer: the socket's uid check passes as it would.
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        req.extensions_mut().insert(ConnectInfo(Peer::Unix {
            uid: Some(uid),
            pid: Some(std::process::id() as i32),
        }));
        let resp = match self.router.clone().oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        let status = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&bytes).into()));
        (status, value)
    }

    /// Flush and close every session opened here.
    pub async fn close_sessions(&self) {
        for id in self.shared.sessions.ids() {
            let _ = self
                .shared
                .sessions
                .close(&id, CloseReason::DaemonStopping)
                .await;
        }
    }
}
