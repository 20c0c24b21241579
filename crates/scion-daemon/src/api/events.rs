//! `GET /v1/events`: server-sent events, each with its sequence id; a client that
//! reconnects with `Last-Event-ID` (or `?since=`) gets what it missed, then live events.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, Stream};
use serde::Deserialize;
use tokio::sync::{broadcast, watch};

use crate::error::ApiResult;
use crate::events::Event;
use crate::handler::Query;
use crate::state::Shared;
use crate::transport::StillValid;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    since: Option<u64>,
    /// False: the stream ends after the events kept so far (default true: it stays open
    /// for live events).
    follow: Option<bool>,
}

fn sse(e: &Event) -> SseEvent {
    SseEvent::default()
        .id(e.id.to_string())
        .event(e.kind.name())
        .data(serde_json::to_string(e).unwrap_or_default())
}

struct Cursor {
    past: std::vec::IntoIter<Event>,
    live: broadcast::Receiver<Event>,
    last: u64,
    stop: watch::Receiver<bool>,
    follow: bool,
    /// For a scoped token: the stream ends once it is revoked or expires.
    token: Option<StillValid>,
}

impl Cursor {
    fn may_go_on(&self) -> bool {
        self.token.as_ref().is_none_or(StillValid::holds)
    }
}

pub async fn stream(
    State(shared): State<Arc<Shared>>,
    axum::Extension(stop): axum::Extension<watch::Receiver<bool>>,
    token: Option<axum::Extension<StillValid>>,
    headers: HeaderMap,
    Query(q): Query<EventsQuery>,
) -> ApiResult<Response> {
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .or(q.since)
        .unwrap_or_else(|| shared.events.last_id());
    let (past, live) = shared.events.subscribe(after);
    let cursor = Cursor {
        past: past.into_iter(),
        live,
        last: after,
        stop,
        follow: q.follow.unwrap_or(true),
        token: token.map(|axum::Extension(t)| t),
    };
    Ok(Sse::new(events(cursor))
        .keep_alive(KeepAlive::default())
        .into_response())
}

fn events(cursor: Cursor) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    stream::unfold(cursor, |mut c| async move {
        if !c.may_go_on() {
            return None;
        }
        if let Some(e) = c.past.next() {
            c.last = e.id;
            return Some((Ok(sse(&e)), c));
        }
        if !c.follow {
            return None;
        }
        loop {
            if *c.stop.borrow() {
                return None;
            }
            tokio::select! {
                got = c.live.recv() => match got {
                    Ok(e) if e.id <= c.last => continue,
                    Ok(_) if !c.may_go_on() => return None,
                    Ok(e) => {
                        c.last = e.id;
                        return Some((Ok(sse(&e)), c));
                    }
                    // Too slow a reader: the rest is still in the ring up to its size.
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = c.stop.changed() => return None,
                // A quiet stream still ends soon after its token is revoked.
                _ = tokio::time::sleep(std::time::Duration::from_secs(1)), if c.token.is_some() => {
                    if !c.may_go_on() {
                        return None;
                    }
                }
            }
        }
    })
}
