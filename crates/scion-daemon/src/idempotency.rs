//! `Idempotency-Key` on mutating requests: a retry with the same key and the same request
//! gets the first answer again instead of doing the work twice; the same key with another
//! request is refused. Answers are kept for a day (at most 10,000 of them).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{to_bytes, Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use scion_core::described::Exit;

use crate::error::ApiError;

const HEADER: &str = "idempotency-key";
const KEEP_FOR: Duration = Duration::from_secs(24 * 3600);
const KEEP_AT_MOST: usize = 10_000;
pub(crate) const MAX_BODY: usize = 1 << 20;

enum Entry {
    InFlight {
        request: u64,
    },
    Done {
        request: u64,
        status: StatusCode,
        content_type: Option<HeaderValue>,
        body: Bytes,
        at: Instant,
    },
}

#[derive(Default)]
pub struct Replays {
    entries: Mutex<HashMap<String, Entry>>,
}

fn fingerprint(method: &Method, uri: &str, body: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    method.as_str().hash(&mut h);
    uri.hash(&mut h);
    body.hash(&mut h);
    h.finish()
}

pub async fn middleware(State(replays): State<Arc<Replays>>, req: Request, next: Next) -> Response {
    let mutating = matches!(*req.method(), Method::POST | Method::DELETE | Method::PUT);
    let Some(key) = req
        .headers()
        .get(HEADER)
        .filter(|_| mutating)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    else {
        return next.run(req).await;
    };
    if key.is_empty() || key.len() > 255 {
        return ApiError::invalid("an Idempotency-Key is 1 to 255 characters").into_response();
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_BODY).await else {
        return ApiError::invalid("request body over 1 MiB").into_response();
    };
    let request = fingerprint(&parts.method, &parts.uri.to_string(), &bytes);
    {
        let mut entries = replays.entries.lock().expect("replays lock");
        match entries.get(&key) {
            Some(Entry::Done {
                request: r,
                status,
                content_type,
                body,
                at,
            }) if at.elapsed() < KEEP_FOR => {
                if *r != request {
                    return reused();
                }
                let mut resp = Response::new(Body::from(body.clone()));
                *resp.status_mut() = *status;
                if let Some(ct) = content_type {
                    resp.headers_mut().insert("content-type", ct.clone());
                }
                resp.headers_mut()
                    .insert("idempotent-replayed", HeaderValue::from_static("true"));
                return resp;
            }
            Some(Entry::InFlight { request: r }) => {
                if *r != request {
                    return reused();
                }
                return ApiError::new(
                    Exit::Transient,
                    "request_in_progress",
                    "a request with this Idempotency-Key is still running",
                    Some("retry shortly with the same key".into()),
                )
                .into_response();
            }
            _ => {}
        }
        if entries.len() >= KEEP_AT_MOST {
            entries.retain(|_, e| matches!(e, Entry::Done { at, .. } if at.elapsed() < KEEP_FOR));
        }
        entries.insert(key.clone(), Entry::InFlight { request });
    }
    let resp = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let (parts, body) = resp.into_parts();
    let body = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let mut entries = replays.entries.lock().expect("replays lock");
    // A failure that may pass is not an answer to replay: the retry does the work.
    if parts.status == StatusCode::SERVICE_UNAVAILABLE {
        entries.remove(&key);
    } else {
        entries.insert(
            key,
            Entry::Done {
                request,
                status: parts.status,
                content_type: parts.headers.get("content-type").cloned(),
                body: body.clone(),
                at: Instant::now(),
            },
        );
    }
    Response::from_parts(parts, Body::from(body))
}

fn reused() -> Response {
    ApiError::invalid("this Idempotency-Key was used for a different request")
        .with_status(StatusCode::UNPROCESSABLE_ENTITY)
        .into_response()
}
