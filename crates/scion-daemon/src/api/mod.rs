//! The HTTP API: JSON under `/v1`, resources not verbs, typed errors with the CLI's codes.

mod branches;
mod events;
mod history;
mod merge;
mod remotes;
pub mod routes;
mod sessions;
mod ui;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use scion_core::described::Context;
use tokio::sync::watch;

use crate::answer::json;
use crate::error::{ApiError, ApiResult};
use crate::handler::blocking;
use crate::metrics::Exposition;
use crate::state::Shared;
use crate::transport::{self, Access};

/// The OpenAPI document of this API (also in `docs/openapi.json`).
pub(crate) const OPENAPI: &str = include_str!("../../../../docs/openapi.json");

async fn healthz() -> &'static str {
    "ok\n"
}

/// Who the daemon takes the caller for: its actor, and a scoped token's name and grants.
async fn whoami(axum::Extension(caller): axum::Extension<crate::authorize::Caller>) -> Response {
    let v = match &caller {
        crate::authorize::Caller::Full { actor } => {
            serde_json::json!({"actor": actor, "token": null, "grants": ["*@*:admin"]})
        }
        crate::authorize::Caller::Scoped(t) => serde_json::json!({
            "actor": t.actor(),
            "token": t.name,
            "grants": t.grants.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "expires_at": t.expires_at,
        }),
    };
    json(&v)
}

async fn readyz(State(shared): State<Arc<Shared>>) -> ApiResult<&'static str> {
    blocking(&shared, Context::Other, |s| {
        s.engine().store_clock().map(drop)
    })
    .await?;
    Ok("ready\n")
}

/// Prometheus asks for OpenMetrics and gets it; `curl` and `promtool check metrics` get the
/// Prometheus text format.
async fn metrics(State(shared): State<Arc<Shared>>, headers: axum::http::HeaderMap) -> Response {
    let accept = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = Exposition::from_accept(accept);
    (
        [("content-type", format.content_type())],
        shared.metrics.render(format),
    )
        .into_response()
}

async fn openapi() -> Response {
    ([("content-type", "application/json")], OPENAPI).into_response()
}

/// Read every request's body before its handler runs. A handler that takes no body (a
/// session's close) would otherwise leave it unread, and the HTTP server then sometimes
/// closes the kept-alive connection after answering: the client's next request on it fails.
async fn whole_body(req: Request, next: axum::middleware::Next) -> Response {
    let (parts, body) = req.into_parts();
    match axum::body::to_bytes(body, crate::idempotency::MAX_BODY).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Err(_) => ApiError::invalid("request body over 1 MiB").into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::not_found("no_such_endpoint", "no such endpoint")
}

/// The whole API, for one listener (`access` says what TCP needs).
pub fn router(shared: Arc<Shared>, access: Access, stop: watch::Receiver<bool>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/openapi.json", get(openapi))
        .route("/v1/status", get(branches::status))
        .route("/v1/whoami", get(whoami))
        .route(
            "/v1/databases",
            get(branches::databases).post(branches::create),
        )
        .route("/v1/databases/{db}/branches", get(branches::branches))
        .route("/v1/databases/{db}/graph", get(ui::graph))
        .route("/ui", get(ui::page))
        .route("/v1/query", get(ui::query))
        .route("/v1/branches", post(branches::fork))
        .route(
            "/v1/branches/{branch}",
            get(branches::branch).delete(branches::destroy),
        )
        .route(
            "/v1/branches/{branch}/checkout",
            post(branches::checkout).delete(branches::release_checkout),
        )
        .route(
            "/v1/branches/{branch}/checkpoints",
            get(branches::checkpoints).post(branches::checkpoint),
        )
        .route("/v1/branches/{branch}/rollback", post(branches::rollback))
        .route("/v1/branches/{branch}/promote", post(branches::promote))
        .route("/v1/branches/{branch}/merge", post(merge::merge))
        .route("/v1/branches/{branch}/push", post(remotes::push))
        .route("/v1/branches/{branch}/pull", post(remotes::pull))
        .route("/v1/remotes", get(remotes::list).post(remotes::add))
        .route("/v1/remotes/{name}", axum::routing::delete(remotes::remove))
        .route("/v1/branches/{branch}/history", get(history::history))
        .route("/v1/branches/{branch}/undo", post(history::undo))
        .route("/v1/branches/{branch}/restore", post(history::restore))
        .route("/v1/branches/{branch}/touch", post(branches::touch))
        .route("/v1/branches/{branch}/protect", post(branches::protect))
        .route("/v1/diff", get(branches::diff))
        .route("/v1/export", post(branches::export))
        .route("/v1/gc", post(branches::gc))
        .route("/v1/sessions", get(sessions::list).post(sessions::open))
        .route(
            "/v1/sessions/{id}",
            get(sessions::get).delete(sessions::close),
        )
        .route("/v1/sessions/{id}/flush", post(sessions::flush))
        .route("/v1/sessions/{id}/close", post(sessions::close))
        .route("/v1/events", get(events::stream))
        // Route layers run last-added first: authorization, then replays of the caller's
        // own idempotent requests (a refused request is never stored or replayed).
        .route_layer(axum::middleware::from_fn_with_state(
            shared.replays.clone(),
            crate::idempotency::middleware,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            crate::authorize::authorize,
        ))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(whole_body))
        .layer(axum::Extension(stop))
        .layer(axum::middleware::from_fn_with_state(
            (shared.clone(), access),
            transport::guard,
        ))
        .with_state(shared)
}
