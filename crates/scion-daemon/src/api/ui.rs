//! The branch explorer: `GET /ui`, one page with its script and styles inline (nothing is
//! fetched from another origin: its Content-Security-Policy allows this origin alone), and
//! `GET /v1/databases/{db}/graph`, the tree it draws (what `scion log --graph --json`
//! prints). A browser cannot put a bearer token on a page load, so `/ui` alone also takes
//! the token as `?token=`; the page then moves it out of its address and sends it as a
//! bearer token on every API call.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use scion_core::described::Context;
use scion_core::DbName;

use super::{blocking, json, parse};
use crate::error::ApiResult;
use crate::state::Shared;

const PAGE: &str = include_str!("../ui/index.html");

/// What the page may load and talk to: this origin, and its own inline script and styles.
const POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                      connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
                      frame-ancestors 'none'";

/// The page, told whether it may offer actions (the daemon refuses them over TCP when it
/// answers reads only, whatever a page shows).
pub async fn page(State(shared): State<Arc<Shared>>) -> Response {
    let writable = if shared.config.tcp_read_only {
        "0"
    } else {
        "1"
    };
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        PAGE.replacen(
            "data-writable=\"0\"",
            &format!("data-writable=\"{writable}\""),
            1,
        ),
    )
        .into_response()
}

pub async fn graph(
    State(shared): State<Arc<Shared>>,
    Path(db): Path<String>,
) -> ApiResult<Response> {
    let db: DbName = parse(&db)?;
    let tree = blocking(&shared, Context::Other, move |s| {
        s.branch_tree_json(&db, None)
    })
    .await?;
    Ok(json(&tree))
}
