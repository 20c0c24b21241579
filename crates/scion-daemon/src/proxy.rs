//! The explorer in front of a daemon that already runs (`scion ui` while `scion serve` has
//! the store's socket): a loopback listener that takes the run's token (as the daemon's own
//! TCP listener does, `?token=` on `/ui` alone), refuses every request but a GET unless
//! writable, and forwards the rest over the daemon's socket, responses streamed back (the
//! event stream included). The daemon trusts its socket's owner, which is this process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;

use scion_core::described::Exit;

use crate::error::{ApiError, DaemonError};

/// What the explorer's header tells a daemon's `/ui` page: offer no actions.
pub(crate) const READ_ONLY_HEADER: &str = "x-scion-read-only";

struct Front {
    socket: PathBuf,
    token: String,
    writable: bool,
}

/// Serve `addr` in front of the daemon on `socket` until the process is stopped.
pub fn serve(
    socket: PathBuf,
    addr: SocketAddr,
    token: String,
    writable: bool,
) -> Result<(), DaemonError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| DaemonError::Io {
            what: "starting the runtime for",
            path: socket.clone(),
            source,
        })?;
    rt.block_on(async move {
        let listener = crate::transport::bind_tcp(addr).await?;
        let front = Arc::new(Front {
            socket,
            token,
            writable,
        });
        let app = axum::Router::new().fallback(forward).with_state(front);
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .map_err(|source| DaemonError::Io {
            what: "serving",
            path: PathBuf::from(addr.to_string()),
            source,
        })
    })
}

fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    let exit = if status == StatusCode::BAD_GATEWAY {
        Exit::Transient
    } else {
        Exit::Refused
    };
    ApiError::new(exit, code, message, None)
        .with_status(status)
        .into_response()
}

async fn forward(
    State(front): State<Arc<Front>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    mut req: Request,
) -> Response {
    let ok = crate::transport::presented(&req)
        .is_some_and(|t| crate::transport::constant_time_eq(t.as_bytes(), front.token.as_bytes()));
    if !ok {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a bearer token is required: the one in the URL scion ui printed",
        );
    }
    if !front.writable && req.method() != Method::GET {
        return refuse(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this explorer answers reads only (scion ui --writable offers actions)",
        );
    }
    req.headers_mut().remove("authorization");
    if !front.writable {
        req.headers_mut()
            .insert(READ_ONLY_HEADER, HeaderValue::from_static("1"));
    }
    req.headers_mut()
        .insert("host", HeaderValue::from_static("scion"));
    match HeaderValue::from_str(&client.to_string()) {
        Ok(v) => req
            .headers_mut()
            .insert(crate::transport::FORWARDED_FROM_HEADER, v),
        Err(_) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "invalid_input",
                "no client address",
            )
        }
    };
    let stream = match UnixStream::connect(&front.socket).await {
        Ok(s) => s,
        Err(e) => {
            return refuse(
                StatusCode::BAD_GATEWAY,
                "daemon_unreachable",
                &format!(
                    "the daemon on {} does not answer: {e}",
                    front.socket.display()
                ),
            )
        }
    };
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    {
        Ok(x) => x,
        Err(e) => {
            return refuse(
                StatusCode::BAD_GATEWAY,
                "daemon_unreachable",
                &e.to_string(),
            )
        }
    };
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => http_body_util::Full::new(b.to_bytes()),
        Err(e) => return refuse(StatusCode::BAD_REQUEST, "invalid_input", &e.to_string()),
    };
    let upstream = hyper::Request::from_parts(parts, body);
    match sender.send_request(upstream).await {
        Ok(resp) => {
            let (parts, body) = resp.into_parts();
            Response::from_parts(parts, Body::new(body))
        }
        Err(e) => refuse(
            StatusCode::BAD_GATEWAY,
            "daemon_unreachable",
            &e.to_string(),
        ),
    }
}
