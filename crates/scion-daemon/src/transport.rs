//! Where the daemon listens and who may talk to it: a unix socket (0600, in a 0700
//! directory) whose peers must be this user, and optionally TCP with a bearer token: the
//! daemon's own (every route) or a scoped one (its grants).

use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use scion_core::described::Exit;
use tokio::net::{TcpListener, UnixListener};

use crate::actor::ACTOR;
use crate::authorize::Caller;
use crate::error::{ApiError, DaemonError};
use crate::state::Shared;
use crate::tokens::{Presented, TokenStore};

/// Who is on the other end of a connection.
#[derive(Debug, Clone, Copy)]
pub enum Peer {
    Unix { uid: Option<u32>, pid: Option<i32> },
    Tcp(SocketAddr),
}

impl Connected<IncomingStream<'_, UnixListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, UnixListener>) -> Self {
        let cred = stream.io().peer_cred().ok();
        Peer::Unix {
            uid: cred.map(|c| c.uid()),
            pid: cred.and_then(|c| c.pid()),
        }
    }
}

impl Connected<IncomingStream<'_, TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        Peer::Tcp(*stream.remote_addr())
    }
}

/// `SCION_SOCKET`, else `$XDG_RUNTIME_DIR/scion-<uid>/<hash>.sock`, else (no runtime
/// directory) `$XDG_STATE_HOME/scion/run/<hash>.sock` (`~/.local/state/scion/run`), the
/// hash naming the store. Never a shared directory such as `/tmp`: another user could make
/// the directory first, and `scion serve` would then refuse it.
pub fn default_socket(store_location: &str) -> PathBuf {
    if let Some(p) = std::env::var_os("SCION_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    };
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let dir = match var("XDG_RUNTIME_DIR") {
        Some(run) => run.join(format!("scion-{uid}")),
        None => var("XDG_STATE_HOME")
            .or_else(|| var("HOME").map(|h| h.join(".local/state")))
            .map(|state| state.join("scion/run"))
            .unwrap_or_else(|| std::env::temp_dir().join(format!("scion-{uid}"))),
    };
    let hash = scion_core::attach::stable_hash(store_location);
    dir.join(format!("{:012x}.sock", hash & 0xffff_ffff_ffff))
}

/// Listen on a TCP address (the API's, or the explorer's loopback port), its failure naming
/// the address.
pub(crate) async fn bind_tcp(
    addr: std::net::SocketAddr,
) -> Result<tokio::net::TcpListener, DaemonError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| DaemonError::Io {
            what: "listening on",
            path: std::path::PathBuf::from(addr.to_string()),
            source,
        })
}

/// Bind the unix socket: its directory is made 0700 if missing (and must not be open to
/// others), a stale socket nobody answers on is replaced, a live one is refused.
pub(crate) async fn bind_unix(path: &Path) -> Result<UnixListener, DaemonError> {
    let io = |what, path: &Path| {
        let path = path.to_path_buf();
        move |source| DaemonError::Io { what, path, source }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io("creating the socket directory", dir))?;
    }
    let mode = std::fs::metadata(dir)
        .map_err(io("reading the socket directory", dir))?
        .permissions()
        .mode();
    if mode & 0o022 != 0 {
        return Err(DaemonError::Config(format!(
            "the socket directory {} is writable by others (mode {:o}); use a private directory",
            dir.display(),
            mode & 0o777
        )));
    }
    if path.exists() {
        if tokio::net::UnixStream::connect(path).await.is_ok() {
            return Err(DaemonError::AlreadyServing(path.to_path_buf()));
        }
        std::fs::remove_file(path).map_err(io("removing the stale socket", path))?;
    }
    let listener = UnixListener::bind(path).map_err(io("binding", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io("restricting", path))?;
    Ok(listener)
}

/// Who may call: the daemon's own token (every route), scoped tokens from a token file
/// (their grants), and whether socket peers must present one too.
#[derive(Clone, Default)]
pub struct Access {
    pub token: Option<Arc<String>>,
    pub tokens: Option<Arc<TokenStore>>,
    /// Socket peers present a token like TCP clients (`scion serve --socket-tokens`).
    pub socket_tokens: bool,
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The TCP client a request `scion ui`'s proxy forwarded came from: the daemon then answers
/// it as it answers its own TCP clients, so routes that name paths on the daemon's host
/// (export, create `from` a file) stay socket-only whatever fronts the daemon.
pub(crate) const FORWARDED_FROM_HEADER: &str = "x-scion-forwarded-from";

/// The TCP client the explorer's proxy names, when it forwarded the request.
fn forwarded_from(req: &Request) -> Option<SocketAddr> {
    req.headers()
        .get(FORWARDED_FROM_HEADER)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// The scoped token a request presented, to ask again later whether it still holds.
#[derive(Clone)]
pub(crate) struct StillValid {
    store: Arc<TokenStore>,
    presented: String,
}

impl StillValid {
    /// Whether the token is still in the token file and not expired.
    pub(crate) fn holds(&self) -> bool {
        matches!(self.store.check(&self.presented), Ok(Presented::Valid(_)))
    }
}

/// Why a bearer token does not hold: the metrics' reason, and the message.
struct Unauthorized(&'static str, String);

impl Unauthorized {
    fn answer(self, shared: &Shared) -> Response {
        shared.metrics.refuse(self.0);
        ApiError::new(Exit::Refused, "unauthorized", self.1, None)
            .with_status(axum::http::StatusCode::UNAUTHORIZED)
            .into_response()
    }
}

fn unauthorized(reason: &'static str, message: &str) -> Unauthorized {
    Unauthorized(reason, message.to_string())
}

/// The actor a full-access client names itself (`X-Scion-Actor`), if it is a valid one.
fn named_actor(req: &Request) -> Option<String> {
    let v = req.headers().get("x-scion-actor")?.to_str().ok()?;
    scion_core::Owner::new(v).ok().map(|o| o.to_string())
}

/// The token a browser puts in the explorer page's address (`/ui?token=...`): a page load
/// carries no header. Only that page takes it; the API wants the header.
fn page_token(req: &Request) -> Option<&str> {
    if req.uri().path() != "/ui" {
        return None;
    }
    req.uri()
        .query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
}

/// Who presented which bearer token: the daemon's own, a scoped one, or none that holds.
/// The token a request presents: its bearer header, or the explorer page's `?token=`.
pub(crate) fn presented(req: &Request) -> Option<&str> {
    req.headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| page_token(req))
}

fn bearer(access: &Access, req: &Request) -> Result<Caller, Unauthorized> {
    let given = presented(req);
    let Some(given) = given.filter(|g| !g.is_empty()) else {
        return Err(unauthorized(
            "missing_token",
            "a bearer token is required (Authorization: Bearer <token>)",
        ));
    };
    if let Some(t) = access.token.as_ref().filter(|t| !t.is_empty()) {
        if constant_time_eq(t.as_bytes(), given.as_bytes()) {
            return Ok(Caller::Full {
                actor: named_actor(req),
            });
        }
    }
    if let Some(store) = &access.tokens {
        match store.check(given) {
            Ok(Presented::Valid(t)) => return Ok(Caller::Scoped(t)),
            Ok(Presented::Expired(name)) => {
                return Err(unauthorized(
                    "token_expired",
                    &format!("token {name} has expired: create a new one with scion token create"),
                ))
            }
            Ok(Presented::Unknown) => {}
            Err(e) => {
                tracing::warn!("reading the token file: {e}");
                return Err(unauthorized(
                    "token_file",
                    "the daemon cannot read its token file",
                ));
            }
        }
    }
    Err(unauthorized(
        "wrong_token",
        "invalid token: the bearer token given is not this daemon's, or was revoked",
    ))
}

/// Refuse peers of another user on the socket, and requests without a valid token where
/// one is needed; then answer the request as its caller (see [`crate::authorize`]).
pub async fn guard(
    State((shared, access)): State<(Arc<Shared>, Access)>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    mut req: Request,
    next: Next,
) -> Response {
    let caller = match peer {
        Peer::Unix { uid, .. } => {
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            if uid != Some(me) {
                shared.metrics.refuse("other_uid");
                return ApiError::new(
                    Exit::Refused,
                    "forbidden",
                    "this daemon serves only its own user",
                    None,
                )
                .with_status(axum::http::StatusCode::FORBIDDEN)
                .into_response();
            }
            if access.socket_tokens {
                match bearer(&access, &req) {
                    Ok(c) => c,
                    Err(u) => return u.answer(&shared),
                }
            } else {
                Caller::Full {
                    actor: named_actor(&req),
                }
            }
        }
        Peer::Tcp(_) => match bearer(&access, &req) {
            Ok(c) if shared.config.tcp_read_only && req.method() != axum::http::Method::GET => {
                drop(c);
                shared.metrics.refuse("read_only");
                return ApiError::new(
                    Exit::Refused,
                    "forbidden",
                    "this daemon answers reads only over TCP",
                    Some("start `scion ui --writable` to act on branches from the page".into()),
                )
                .with_status(axum::http::StatusCode::FORBIDDEN)
                .into_response();
            }
            Ok(c) => c,
            Err(u) => return u.answer(&shared),
        },
    };
    // A request the explorer's proxy forwarded from a TCP client is that client's: every
    // check of the peer after this one (socket-only routes) sees TCP.
    if let (Peer::Unix { .. }, Some(client)) = (peer, forwarded_from(&req)) {
        req.extensions_mut().insert(ConnectInfo(Peer::Tcp(client)));
    }
    let actor = caller.actor();
    // A scoped token may be revoked while a long answer (the events stream) is under way.
    if let (Caller::Scoped(_), Some(store), Some(given)) =
        (&caller, &access.tokens, presented(&req))
    {
        let still = StillValid {
            store: store.clone(),
            presented: given.to_string(),
        };
        req.extensions_mut().insert(still);
    }
    let replays = match &caller {
        Caller::Scoped(t) => crate::idempotency::Owner::Token(t.sha256.clone()),
        Caller::Full { .. } => crate::idempotency::Owner::Unscoped,
    };
    req.extensions_mut().insert(replays);
    req.extensions_mut().insert(caller);
    ACTOR.scope(actor, next.run(req)).await
}
