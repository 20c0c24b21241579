//! The event log: every state change the daemon makes or sees, numbered, kept in a ring
//! for replay (`Last-Event-ID`) and broadcast to live subscribers.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

/// How many events are kept for replay.
const KEEP: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    SessionOpened,
    Flushed,
    SessionClosed,
    Fenced,
    Forked,
    Checkpointed,
    RolledBack,
    Undone,
    Restored,
    Promoted,
    Merged,
    Destroyed,
    Reaped,
    Compacted,
    Gc,
    Reconciled,
}

impl EventKind {
    pub fn name(self) -> &'static str {
        match self {
            EventKind::SessionOpened => "session_opened",
            EventKind::Flushed => "flushed",
            EventKind::SessionClosed => "session_closed",
            EventKind::Fenced => "fenced",
            EventKind::Forked => "forked",
            EventKind::Checkpointed => "checkpointed",
            EventKind::RolledBack => "rolled_back",
            EventKind::Undone => "undone",
            EventKind::Restored => "restored",
            EventKind::Promoted => "promoted",
            EventKind::Merged => "merged",
            EventKind::Destroyed => "destroyed",
            EventKind::Reaped => "reaped",
            EventKind::Compacted => "compacted",
            EventKind::Gc => "gc",
            EventKind::Reconciled => "reconciled",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    pub id: u64,
    pub kind: EventKind,
    /// Milliseconds since the Unix epoch (this host's clock).
    pub at_ms: u64,
    pub data: serde_json::Value,
}

pub struct EventLog {
    ring: Mutex<(u64, VecDeque<Event>)>,
    live: broadcast::Sender<Event>,
}

impl Default for EventLog {
    /// Ids start from this moment's microseconds since the Unix epoch, so that they keep
    /// increasing across daemon restarts: a client resuming with `Last-Event-ID` from an
    /// earlier daemon gets every event of the new one.
    fn default() -> Self {
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        EventLog {
            ring: Mutex::new((start, VecDeque::new())),
            live: broadcast::channel(1024).0,
        }
    }
}

impl EventLog {
    pub fn emit(&self, kind: EventKind, data: serde_json::Value) -> u64 {
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        // Who the change was made for, when the request named it.
        let mut data = data;
        if let (Some(by), Some(o)) = (crate::actor::current_actor(), data.as_object_mut()) {
            o.insert("by".into(), serde_json::Value::String(by));
        }
        let mut ring = self.ring.lock().expect("event log lock");
        ring.0 += 1;
        let event = Event {
            id: ring.0,
            kind,
            at_ms,
            data,
        };
        ring.1.push_back(event.clone());
        if ring.1.len() > KEEP {
            ring.1.pop_front();
        }
        // Sent under the lock, so subscribers see events in id order.
        let _ = self.live.send(event);
        ring.0
    }

    /// Events after `after` still kept, and a receiver for every later one. Taken under
    /// one lock, so nothing falls between the two.
    pub(crate) fn subscribe(&self, after: u64) -> (Vec<Event>, broadcast::Receiver<Event>) {
        let ring = self.ring.lock().expect("event log lock");
        let past = ring.1.iter().filter(|e| e.id > after).cloned().collect();
        (past, self.live.subscribe())
    }

    pub(crate) fn last_id(&self) -> u64 {
        self.ring.lock().expect("event log lock").0
    }
}
