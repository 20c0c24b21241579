//! Where the daemon listens and who may talk to it: a unix socket (0600, in a 0700
//! directory) whose peers must be this user, and optionally TCP with a bearer token.

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

use crate::error::{ApiError, DaemonError};
use crate::state::Shared;

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

/// Bind the unix socket: its directory is made 0700 if missing (and must not be open to
/// others), a stale socket nobody answers on is replaced, a live one is refused.
pub async fn bind_unix(path: &Path) -> Result<UnixListener, DaemonError> {
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

/// Who may use the TCP listener.
#[derive(Clone)]
pub struct Access {
    pub token: Option<Arc<String>>,
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Refuse peers of another user on the socket, and TCP requests without the token.
pub async fn guard(
    State((shared, access)): State<(Arc<Shared>, Access)>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Request,
    next: Next,
) -> Response {
    match peer {
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
        }
        Peer::Tcp(_) => {
            let given = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            let ok = match (&access.token, given) {
                (Some(t), Some(g)) => constant_time_eq(t.as_bytes(), g.as_bytes()),
                _ => false,
            };
            if !ok {
                let (reason, message) = if given.is_none() {
                    (
                        "missing_token",
                        "a bearer token is required (Authorization: Bearer <token>)",
                    )
                } else {
                    (
                        "wrong_token",
                        "invalid token: the bearer token given is not this daemon's",
                    )
                };
                shared.metrics.refuse(reason);
                return ApiError::new(Exit::Refused, "unauthorized", message, None)
                    .with_status(axum::http::StatusCode::UNAUTHORIZED)
                    .into_response();
            }
        }
    }
    next.run(req).await
}
