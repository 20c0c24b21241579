//! `Idempotency-Key` on mutating requests: a retry with the same key and the same request
//! gets the first answer again instead of doing the work twice; the same key with another
//! request is refused. Answers are kept for a day, at most 10,000 of them and 64 MiB of
//! bodies (the oldest go first).
//!
//! A key is the caller's: answers are kept per (caller, key), where the caller is the
//! scoped token (by its hash) or the unscoped client, so one token replaying another's key
//! gets nothing of the other's. The layer runs after authorization (it is a route layer
//! inside [`crate::authorize`]): a refused request is never stored, nor answered from the
//! store.

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
const KEEP_BYTES: usize = 64 << 20;
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

/// Whose keys a request's are: the scoped token's (by its hash), else the unscoped
/// client's. The transport's guard puts it on every request it lets through.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    Unscoped,
    Token(String),
}

impl Owner {
    fn of(req: &Request) -> Owner {
        req.extensions()
            .get::<Owner>()
            .cloned()
            .unwrap_or(Owner::Unscoped)
    }
}

type Slot = (Owner, String);

#[derive(Default)]
pub struct Replays {
    entries: Mutex<HashMap<Slot, Entry>>,
}

impl Replays {
    /// Make room for one more answer: expired ones go, then the oldest once over either
    /// bound. Answers still being worked out stay.
    fn make_room(entries: &mut HashMap<Slot, Entry>) {
        entries.retain(|_, e| match e {
            Entry::Done { at, .. } => at.elapsed() < KEEP_FOR,
            Entry::InFlight { .. } => true,
        });
        let bytes = |entries: &HashMap<Slot, Entry>| -> usize {
            entries
                .values()
                .map(|e| match e {
                    Entry::Done { body, .. } => body.len(),
                    Entry::InFlight { .. } => 0,
                })
                .sum()
        };
        if entries.len() < KEEP_AT_MOST && bytes(entries) < KEEP_BYTES {
            return;
        }
        let mut done: Vec<(Instant, usize, Slot)> = entries
            .iter()
            .filter_map(|(k, e)| match e {
                Entry::Done { at, body, .. } => Some((*at, body.len(), k.clone())),
                Entry::InFlight { .. } => None,
            })
            .collect();
        done.sort_by_key(|(at, ..)| *at);
        // Down to nine tenths, so that a full store sorts once per thousand requests.
        let (mut count, mut total) = (entries.len(), bytes(entries));
        for (_, len, k) in done {
            if count < KEEP_AT_MOST * 9 / 10 && total < KEEP_BYTES * 9 / 10 {
                break;
            }
            entries.remove(&k);
            count -= 1;
            total -= len;
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().expect("replays lock").len()
    }
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
    let slot: Slot = (Owner::of(&req), key);
    let (parts, body) = req.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_BODY).await else {
        return ApiError::invalid("request body over 1 MiB").into_response();
    };
    let request = fingerprint(&parts.method, &parts.uri.to_string(), &bytes);
    {
        let mut entries = replays.entries.lock().expect("replays lock");
        match entries.get(&slot) {
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
        Replays::make_room(&mut entries);
        entries.insert(slot.clone(), Entry::InFlight { request });
    }
    let resp = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let (parts, body) = resp.into_parts();
    let body = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let mut entries = replays.entries.lock().expect("replays lock");
    // A failure that may pass is not an answer to replay: the retry does the work.
    if parts.status == StatusCode::SERVICE_UNAVAILABLE {
        entries.remove(&slot);
    } else {
        entries.insert(
            slot,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_keys_never_grow_the_store_past_its_bound() {
        let replays = Replays::default();
        for i in 0..KEEP_AT_MOST + 500 {
            let mut entries = replays.entries.lock().unwrap();
            Replays::make_room(&mut entries);
            entries.insert(
                (Owner::Unscoped, format!("k{i}")),
                Entry::Done {
                    request: 0,
                    status: StatusCode::OK,
                    content_type: None,
                    body: Bytes::from_static(b"{}"),
                    at: Instant::now(),
                },
            );
        }
        assert!(replays.len() <= KEEP_AT_MOST, "{}", replays.len());
        // The oldest went first.
        let entries = replays.entries.lock().unwrap();
        assert!(!entries.contains_key(&(Owner::Unscoped, "k0".to_string())));
        assert!(entries.contains_key(&(Owner::Unscoped, format!("k{}", KEEP_AT_MOST + 499))));
    }

    #[test]
    fn big_answers_are_bounded_by_bytes() {
        let mut entries = HashMap::new();
        for i in 0..100 {
            Replays::make_room(&mut entries);
            entries.insert(
                (Owner::Token(format!("t{i}")), "k".to_string()),
                Entry::Done {
                    request: 0,
                    status: StatusCode::OK,
                    content_type: None,
                    body: Bytes::from(vec![b' '; 4 << 20]),
                    at: Instant::now(),
                },
            );
        }
        assert!(
            entries.len() <= KEEP_BYTES / (4 << 20) + 1,
            "{}",
            entries.len()
        );
    }
}
