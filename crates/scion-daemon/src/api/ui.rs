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

use crate::answer::json;
use crate::error::ApiResult;
use crate::handler::{blocking, parse};
use crate::state::Shared;

const PAGE: &str = include_str!("../ui/index.html");

/// What the page may load and talk to: this origin, and its own inline script and styles.
const POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                      connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
                      frame-ancestors 'none'";

/// The page, told whether it may offer actions (the daemon refuses them over TCP when it
/// answers reads only, whatever a page shows).
pub async fn page(State(shared): State<Arc<Shared>>, headers: axum::http::HeaderMap) -> Response {
    // `scion ui` in front of a running daemon says so on the socket, whose peer is trusted.
    let read_only =
        shared.config.tcp_read_only || headers.contains_key(crate::proxy::READ_ONLY_HEADER);
    let writable = if read_only { "0" } else { "1" };
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

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryParams {
    /// `db@branch` or `db@branch@checkpoint`.
    target: String,
    sql: String,
    #[serde(default = "default_rows")]
    max_rows: usize,
}

fn default_rows() -> usize {
    500
}

/// The time a query may run, as the MCP tool's.
const QUERY_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// `GET /v1/query?target=&sql=`: read-only SQL on a version, from its read-only checkout,
/// with the MCP query tool's limits (5 s, the rows asked for up to 10,000, 16 MiB). A
/// statement that would write is refused by SQLite's authorizer, not by reading the SQL.
pub async fn query(
    State(shared): State<Arc<Shared>>,
    axum::extract::Query(q): axum::extract::Query<QueryParams>,
) -> ApiResult<Response> {
    let target: scion_core::Target = parse(&q.target)?;
    let name = q.target.clone();
    let checkout = blocking(&shared, Context::Other, move |s| {
        s.checkout_read_only(&target)
    })
    .await?;
    let limits = crate::query::Limits {
        max_rows: q.max_rows.clamp(1, 10_000),
        max_bytes: 16 << 20,
        time: QUERY_TIME,
    };
    let path = checkout.path.clone();
    let (columns, rows) = tokio::task::spawn_blocking(move || {
        crate::query::run(&path, &[], &name, &q.sql, &[], limits)
    })
    .await
    .map_err(|e| {
        crate::error::ApiError::new(
            scion_core::described::Exit::Failure,
            "internal",
            e.to_string(),
            None,
        )
    })?;
    Ok(json(&serde_json::json!({
        "columns": columns,
        "rows": rows.rows,
        "row_count": rows.row_count,
        "truncated": rows.truncated,
        "error": rows.error,
        "read_only_refused": rows.wrote,
    })))
}
