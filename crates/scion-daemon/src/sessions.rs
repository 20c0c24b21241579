//! Sessions: a branch under live capture, each run by its own thread (capture is blocking
//! I/O on SQLite connections, which must stay on one thread) that polls the WAL, flushes
//! on a schedule, renews the lease, and closes itself when its owner dies, it idles out or
//! its TTL passes. Requests reach the thread over a channel.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scion_capture::{Attach, CaptureError, FlushReport, LiveBranch, Step};
use scion_core::{BranchRef, CheckpointName, Scion};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::config::Config;
use crate::error::{ApiError, ApiResult};
use crate::events::EventKind;
use crate::events::EventLog;
use crate::metrics::Metrics;

/// How often an active session looks at its WAL; an idle one backs off to the second.
const POLL_ACTIVE: Duration = Duration::from_millis(10);
const POLL_IDLE: Duration = Duration::from_millis(100);
/// Closed sessions remembered, so that closing twice answers the same.
const CLOSED_KEPT: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    Open,
    Fenced,
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    Requested,
    OwnerExited,
    IdleTimeout,
    Ttl,
    DaemonStopping,
}

/// Where a session stands, as `GET /v1/sessions` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: String,
    pub branch: String,
    pub path: PathBuf,
    pub state: SessionState,
    pub attach: serde_json::Value,
    pub durable_version: u64,
    /// Milliseconds since the oldest captured transaction that is not yet durable.
    pub durable_age_ms: u64,
    /// Bytes committed by writers and not yet durable (captured and pending, plus
    /// published in the WAL and not yet captured).
    pub capture_lag_bytes: u64,
    pub pending_transactions: u64,
    pub transactions_captured: u64,
    /// How the session has kept the WAL short, since it opened.
    #[serde(default)]
    pub recycling: Recycling,
    pub ephemeral: bool,
    pub owner_pid: Option<u32>,
    pub ttl_secs: Option<u64>,
    pub idle_timeout_secs: Option<u64>,
    pub fenced_reason: Option<String>,
    pub last_flush_error: Option<String>,
    pub close_reason: Option<CloseReason>,
}

/// How a session kept the checkout's WAL short: PASSIVE checkpoints it ran, and with the
/// opt-in second tier (`--barrier-frames`) the write-lock barriers, the ones skipped
/// because a writer held the lock past the barrier's wait, and the longest hold.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Recycling {
    pub passive_checkpoints: u64,
    pub barriers: u64,
    pub barriers_skipped: u64,
    pub barrier_max_hold_us: u64,
}

/// What closing a session did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClosedSession {
    pub id: String,
    pub branch: String,
    pub reason: CloseReason,
    /// The durable version at close (after the final flush).
    pub version: u64,
    pub destroyed: bool,
    pub error: Option<String>,
}

pub struct SessionSpec {
    pub branch: BranchRef,
    pub ttl: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub ephemeral: bool,
    pub owner_pid: Option<u32>,
    /// Who opened it (a scoped token's `token:NAME`, or what the client named itself): the
    /// commits the session captures later record it as `by`, as a request's moves do.
    pub actor: Option<String>,
}

enum Command {
    Flush {
        checkpoint: Option<(CheckpointName, BTreeMap<String, String>)>,
        reply: oneshot::Sender<ApiResult<FlushReport>>,
    },
    Close {
        reason: CloseReason,
        reply: oneshot::Sender<ClosedSession>,
    },
}

struct Handle {
    info: Arc<Mutex<SessionInfo>>,
    tx: Sender<Command>,
}

#[derive(Default)]
pub struct Sessions {
    open: Mutex<HashMap<String, Handle>>,
    closed: Mutex<VecDeque<ClosedSession>>,
}

fn session_gone(id: &str) -> ApiError {
    ApiError::not_found("session_not_found", format!("no session {id}"))
        .with_hint("`scion session list` lists the open sessions")
}

impl ApiError {
    fn with_hint(mut self, hint: &str) -> Self {
        self.body.hint = Some(hint.to_string());
        self
    }
}

impl Sessions {
    /// The open session on `branch`, if any.
    pub(crate) fn on_branch(&self, branch: &str) -> Option<String> {
        let open = self.open.lock().expect("sessions lock");
        open.iter()
            .find(|(_, h)| h.info.lock().expect("info lock").branch == branch)
            .map(|(id, _)| id.clone())
    }

    /// The id of the session named by `id` or by its branch (`shop@ux`, `shop` for
    /// `shop@main`), as users may name it either way.
    pub fn resolve(&self, id_or_branch: &str) -> ApiResult<String> {
        if id_or_branch.starts_with("s-") {
            return Ok(id_or_branch.to_string());
        }
        let Ok(b) = id_or_branch.parse::<scion_core::BranchRef>() else {
            return Err(session_gone(id_or_branch));
        };
        self.on_branch(&b.to_string()).ok_or_else(|| {
            ApiError::not_found("session_not_found", format!("no open session on {b}"))
        })
    }

    pub fn list(&self) -> Vec<SessionInfo> {
        let open = self.open.lock().expect("sessions lock");
        let mut v: Vec<SessionInfo> = open
            .values()
            .map(|h| h.info.lock().expect("info lock").clone())
            .collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    pub fn get(&self, id: &str) -> ApiResult<SessionInfo> {
        if let Some(h) = self.open.lock().expect("sessions lock").get(id) {
            return Ok(h.info.lock().expect("info lock").clone());
        }
        Err(session_gone(id))
    }

    pub(crate) fn ids(&self) -> Vec<String> {
        self.open
            .lock()
            .expect("sessions lock")
            .keys()
            .cloned()
            .collect()
    }

    fn sender(&self, id: &str) -> ApiResult<Sender<Command>> {
        match self.open.lock().expect("sessions lock").get(id) {
            Some(h) => Ok(h.tx.clone()),
            None => Err(session_gone(id)),
        }
    }

    pub async fn flush(
        &self,
        id: &str,
        checkpoint: Option<(CheckpointName, BTreeMap<String, String>)>,
    ) -> ApiResult<FlushReport> {
        let (reply, answer) = oneshot::channel();
        self.sender(id)?
            .send(Command::Flush { checkpoint, reply })
            .map_err(|_| session_gone(id))?;
        answer.await.map_err(|_| session_gone(id))?
    }

    /// Close `id`; closing a session that already closed answers what that close did.
    pub async fn close(&self, id: &str, reason: CloseReason) -> ApiResult<ClosedSession> {
        let tx = match self.sender(id) {
            Ok(tx) => tx,
            Err(e) => {
                let closed = self.closed.lock().expect("closed lock");
                return closed.iter().find(|c| c.id == id).cloned().ok_or(e);
            }
        };
        let (reply, answer) = oneshot::channel();
        if tx.send(Command::Close { reason, reply }).is_err() {
            return self.closed_or_gone(id);
        }
        match answer.await {
            Ok(c) => Ok(c),
            Err(_) => self.closed_or_gone(id),
        }
    }

    fn closed_or_gone(&self, id: &str) -> ApiResult<ClosedSession> {
        let closed = self.closed.lock().expect("closed lock");
        closed
            .iter()
            .find(|c| c.id == id)
            .cloned()
            .ok_or_else(|| session_gone(id))
    }

    fn finished(&self, c: ClosedSession) {
        self.open.lock().expect("sessions lock").remove(&c.id);
        let mut closed = self.closed.lock().expect("closed lock");
        closed.push_back(c);
        if closed.len() > CLOSED_KEPT {
            closed.pop_front();
        }
    }
}

/// A fresh session id: `s-` and 12 hex digits.
pub(crate) fn new_id() -> String {
    let mut b = [0u8; 6];
    getrandom::fill(&mut b).expect("the OS random source is available");
    format!(
        "s-{}",
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    )
}

fn process_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// What a session's thread uses of the daemon.
#[derive(Clone)]
pub struct SessionDeps {
    pub scion: Arc<Scion>,
    pub config: Config,
    /// The registry the session is listed in, and leaves when it closes.
    pub sessions: Arc<Sessions>,
    pub events: Arc<EventLog>,
    pub metrics: Arc<Metrics>,
}

/// Start capture of `spec.branch` (blocking: attaching may check out or reconcile) and the
/// session's thread, both acting as `spec.actor`. Returns the session's first view of itself.
pub fn start(deps: SessionDeps, id: String, spec: SessionSpec) -> ApiResult<SessionInfo> {
    let actor = spec.actor.clone();
    scion_core::actor::acting_as(actor.as_deref(), || start_as_opener(deps, id, spec))
}

fn start_as_opener(deps: SessionDeps, id: String, spec: SessionSpec) -> ApiResult<SessionInfo> {
    let holder = format!("{}#{id}", deps.scion.engine().holder());
    let mut live = LiveBranch::open(
        deps.scion.clone(),
        &spec.branch,
        &holder,
        deps.config.lease_ttl,
        false,
    )?;
    live.set_barrier_frames(deps.config.barrier_frames);
    if let Attach::Reconciled(r) = &live.attach {
        deps.metrics.reconciles.inc();
        deps.events.emit(
            EventKind::Reconciled,
            serde_json::json!({"session": id, "branch": spec.branch.to_string(), "report": r}),
        );
    }
    let info = SessionInfo {
        id: id.clone(),
        branch: spec.branch.to_string(),
        path: live.path().to_path_buf(),
        state: SessionState::Open,
        attach: serde_json::to_value(live.attach).unwrap_or_default(),
        durable_version: live.durable_version(),
        durable_age_ms: 0,
        capture_lag_bytes: 0,
        pending_transactions: 0,
        transactions_captured: 0,
        recycling: Recycling::default(),
        ephemeral: spec.ephemeral,
        owner_pid: spec.owner_pid,
        ttl_secs: spec.ttl.map(|d| d.as_secs()),
        idle_timeout_secs: spec.idle_timeout.map(|d| d.as_secs()),
        fenced_reason: None,
        last_flush_error: None,
        close_reason: None,
    };
    let shared_info = Arc::new(Mutex::new(info.clone()));
    let (tx, rx) = std::sync::mpsc::channel();
    deps.sessions.open.lock().expect("sessions lock").insert(
        id.clone(),
        Handle {
            info: shared_info.clone(),
            tx,
        },
    );
    deps.metrics.sessions_open.inc();
    let runner = Runner {
        id,
        deps,
        info: shared_info,
        spec,
        opened: Instant::now(),
        last_activity: Instant::now(),
        last_flush: Instant::now(),
        last_renew: Instant::now(),
    };
    std::thread::Builder::new()
        .name(format!("session-{}", runner.id))
        .spawn(move || {
            let actor = runner.spec.actor.clone();
            scion_core::actor::acting_as(actor.as_deref(), || runner.run(live, rx))
        })
        .map_err(|e| {
            ApiError::new(
                scion_core::described::Exit::Failure,
                "io_error",
                e.to_string(),
                None,
            )
        })?;
    Ok(info)
}

struct Runner {
    id: String,
    deps: SessionDeps,
    info: Arc<Mutex<SessionInfo>>,
    spec: SessionSpec,
    opened: Instant,
    last_activity: Instant,
    last_flush: Instant,
    last_renew: Instant,
}

impl Runner {
    fn run(mut self, mut live: LiveBranch, rx: Receiver<Command>) {
        let mut active = true;
        loop {
            let wait = if active { POLL_ACTIVE } else { POLL_IDLE };
            match rx.recv_timeout(wait) {
                Ok(Command::Flush { checkpoint, reply }) => {
                    self.last_activity = Instant::now();
                    let r = self.flush(&mut live, checkpoint);
                    let _ = reply.send(r);
                }
                Ok(Command::Close { reason, reply }) => {
                    let _ = reply.send(self.close(live, reason));
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.close(live, CloseReason::DaemonStopping);
                    return;
                }
            }
            if live.fenced().is_none() {
                match live.poll() {
                    Ok(Step::Captured { .. }) => {
                        active = true;
                        self.last_activity = Instant::now();
                    }
                    Ok(_) => active = false,
                    Err(e) => self.failed(&live, e),
                }
            }
            let dirty = live.is_dirty();
            if dirty && self.last_flush.elapsed() >= self.deps.config.flush_every {
                let _ = self.flush(&mut live, None);
            }
            if live.fenced().is_none()
                && self.last_renew.elapsed() >= self.deps.config.lease_ttl / 3
            {
                self.last_renew = Instant::now();
                if let Err(e) = live.renew() {
                    self.failed(&live, e);
                }
            }
            let reason = if self.spec.owner_pid.is_some_and(|p| !process_alive(p)) {
                Some(CloseReason::OwnerExited)
            } else if self
                .spec
                .idle_timeout
                .is_some_and(|t| self.last_activity.elapsed() >= t)
            {
                Some(CloseReason::IdleTimeout)
            } else if self.spec.ttl.is_some_and(|t| self.opened.elapsed() >= t) {
                Some(CloseReason::Ttl)
            } else {
                None
            };
            if let Some(reason) = reason {
                self.close(live, reason);
                return;
            }
            self.publish(&mut live);
        }
    }

    /// A failure of capture: fencing is final and announced once; anything else is logged
    /// and retried on the next round.
    fn failed(&self, live: &LiveBranch, e: CaptureError) {
        if let CaptureError::Fenced { reason } = &e {
            let mut info = self.info.lock().expect("info lock");
            if info.state != SessionState::Fenced {
                tracing::warn!(session = %self.id, branch = %live.branch(), %reason, "session fenced");
                info.state = SessionState::Fenced;
                info.fenced_reason = Some(reason.clone());
                self.deps.events.emit(
                    EventKind::Fenced,
                    serde_json::json!({"session": self.id, "branch": live.branch().to_string(), "reason": reason}),
                );
            }
            return;
        }
        tracing::warn!(session = %self.id, error = %e, "capture failed; retrying");
    }

    fn flush(
        &mut self,
        live: &mut LiveBranch,
        checkpoint: Option<(CheckpointName, BTreeMap<String, String>)>,
    ) -> ApiResult<FlushReport> {
        let started = Instant::now();
        self.last_flush = Instant::now();
        let named = checkpoint.is_some();
        match live.flush(checkpoint.as_ref().map(|(n, m)| (n, m.clone()))) {
            Ok(report) => {
                self.deps
                    .metrics
                    .flush_seconds
                    .observe(started.elapsed().as_secs_f64());
                if report.committed || named {
                    self.deps.metrics.committed_pages.inc_by(report.pages);
                    self.deps.metrics.committed_bytes.inc_by(report.bytes);
                    self.deps.events.emit(
                        EventKind::Flushed,
                        serde_json::json!({"session": self.id, "branch": live.branch().to_string(), "report": report}),
                    );
                }
                self.publish(live);
                Ok(report)
            }
            Err(e) => {
                let api = ApiError::capture(&e);
                self.failed(live, e);
                self.publish(live);
                Err(api)
            }
        }
    }

    fn publish(&self, live: &mut LiveBranch) {
        let s = live.status();
        let mut info = self.info.lock().expect("info lock");
        info.durable_version = s.durable_version;
        info.durable_age_ms = s.durable_age_ms;
        info.capture_lag_bytes = s.pending_bytes + s.wal_lag_bytes;
        info.pending_transactions = s.pending_transactions;
        info.transactions_captured = s.transactions_captured;
        let c = live.counters();
        info.recycling = Recycling {
            passive_checkpoints: c.passive_checkpoints,
            barriers: c.barriers,
            barriers_skipped: c.barriers_skipped,
            barrier_max_hold_us: c.barrier_max_hold_us,
        };
        info.last_flush_error = s.last_flush_error.clone();
        let labels = crate::metrics::BranchLabels {
            branch: info.branch.clone(),
        };
        self.deps
            .metrics
            .capture_lag_bytes
            .get_or_create(&labels)
            .set(info.capture_lag_bytes as i64);
        self.deps
            .metrics
            .durable_age_seconds
            .get_or_create(&labels)
            .set(s.durable_age_ms as f64 / 1000.0);
    }

    fn close(&mut self, live: LiveBranch, reason: CloseReason) -> ClosedSession {
        let branch = live.branch().clone();
        let mut closed = ClosedSession {
            id: self.id.clone(),
            branch: branch.to_string(),
            reason,
            version: live.durable_version(),
            destroyed: false,
            error: None,
        };
        match live.close() {
            Ok(report) => closed.version = report.version,
            Err(e) => closed.error = Some(e.to_string()),
        }
        if self.spec.ephemeral {
            match self.deps.scion.destroy(&branch, false) {
                Ok(_) => {
                    closed.destroyed = true;
                    self.deps.events.emit(
                        EventKind::Destroyed,
                        serde_json::json!({"branch": branch.to_string(), "by": "ephemeral session", "session": self.id}),
                    );
                }
                Err(e) => {
                    closed.error.get_or_insert_with(|| e.to_string());
                }
            }
        }
        let labels = crate::metrics::BranchLabels {
            branch: branch.to_string(),
        };
        self.deps.metrics.capture_lag_bytes.remove(&labels);
        self.deps.metrics.durable_age_seconds.remove(&labels);
        self.deps.metrics.sessions_open.dec();
        {
            let mut info = self.info.lock().expect("info lock");
            info.state = SessionState::Closed;
            info.close_reason = Some(reason);
        }
        self.deps.events.emit(
            EventKind::SessionClosed,
            serde_json::to_value(&closed).unwrap_or_default(),
        );
        self.deps.sessions.finished(closed.clone());
        closed
    }
}
