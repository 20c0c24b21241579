//! A client of the daemon over its unix socket: what the CLI's `session` and `events`
//! commands (and tests) use. Blocking calls, each on a small runtime of its own.

use std::path::{Path, PathBuf};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;

use crate::error::{ErrorBody, ErrorEnvelope};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the daemon at {}: {reason}", socket.display())]
    Connect {
        socket: PathBuf,
        /// Why, in words that name the cause (no daemon ever ran here, a stale socket, a
        /// directory other users can write to, ...).
        reason: String,
    },
    #[error("talking to the daemon: {0}")]
    Http(String),
    /// The daemon answered with an error.
    #[error("{}", .body.message)]
    Api { status: u16, body: ErrorBody },
}

/// An answer: status and JSON body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: serde_json::Value,
    /// `Idempotent-Replayed: true`: the answer of an earlier request with the same key.
    pub replayed: bool,
}

/// One server-sent event.
#[derive(Debug, Clone, Default)]
pub struct SseEvent {
    pub id: Option<u64>,
    pub event: String,
    pub data: String,
}

pub struct DaemonClient {
    socket: PathBuf,
}

fn http(e: impl std::fmt::Display) -> ClientError {
    ClientError::Http(e.to_string())
}

impl DaemonClient {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        DaemonClient {
            socket: socket.into(),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn runtime() -> Result<tokio::runtime::Runtime, ClientError> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(http)
    }

    async fn connect(
        &self,
    ) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, ClientError> {
        let stream = UnixStream::connect(&self.socket)
            .await
            .map_err(|e| ClientError::Connect {
                socket: self.socket.clone(),
                reason: why_unreachable(&self.socket, &e),
            })?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(http)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    fn build(
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        headers: &[(&str, &str)],
    ) -> Result<hyper::Request<Full<Bytes>>, ClientError> {
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "scion");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let bytes = match body {
            Some(v) => {
                req = req.header("content-type", "application/json");
                Bytes::from(serde_json::to_vec(v).map_err(http)?)
            }
            None => Bytes::new(),
        };
        req.body(Full::new(bytes)).map_err(http)
    }

    /// Send one request; an error status is [`ClientError::Api`].
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        headers: &[(&str, &str)],
    ) -> Result<Reply, ClientError> {
        let reply = self.raw(method, path, body, headers)?;
        if reply.status >= 400 {
            return Err(
                match serde_json::from_value::<ErrorEnvelope>(reply.body.clone()) {
                    Ok(e) => ClientError::Api {
                        status: reply.status,
                        body: e.error,
                    },
                    Err(_) => ClientError::Http(format!("status {}: {}", reply.status, reply.body)),
                },
            );
        }
        Ok(reply)
    }

    /// Send one request and return whatever came back, error statuses included.
    pub fn raw(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        headers: &[(&str, &str)],
    ) -> Result<Reply, ClientError> {
        let req = Self::build(method, path, body, headers)?;
        Self::runtime()?.block_on(async {
            let mut sender = self.connect().await?;
            let resp = sender.send_request(req).await.map_err(http)?;
            let status = resp.status().as_u16();
            let replayed = resp.headers().contains_key("idempotent-replayed");
            let bytes = resp.into_body().collect().await.map_err(http)?.to_bytes();
            let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
                serde_json::Value::String(String::from_utf8_lossy(&bytes).into())
            });
            Ok(Reply {
                status,
                body,
                replayed,
            })
        })
    }

    /// Read `/v1/events` (after event `since`, or from now), handing each event to
    /// `on_event` until it returns `false` or the stream ends: after the events kept so far
    /// unless `follow`, else when the daemon ends it.
    pub fn events(
        &self,
        since: Option<u64>,
        follow: bool,
        mut on_event: impl FnMut(SseEvent) -> bool,
    ) -> Result<(), ClientError> {
        let mut path = match since {
            Some(id) => format!("/v1/events?since={id}"),
            None => "/v1/events?".to_string(),
        };
        if !follow {
            path.push_str(if since.is_some() {
                "&follow=false"
            } else {
                "follow=false"
            });
        }
        let req = Self::build("GET", &path, None, &[("accept", "text/event-stream")])?;
        Self::runtime()?.block_on(async {
            let mut sender = self.connect().await?;
            let resp = sender.send_request(req).await.map_err(http)?;
            if !resp.status().is_success() {
                return Err(ClientError::Http(format!("status {}", resp.status())));
            }
            let mut body = resp.into_body();
            let mut buf = String::new();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(http)?;
                let Some(data) = frame.data_ref() else {
                    continue;
                };
                buf.push_str(&String::from_utf8_lossy(data));
                while let Some(end) = buf.find("\n\n") {
                    let block: String = buf.drain(..end + 2).collect();
                    let mut e = SseEvent::default();
                    for line in block.lines() {
                        if let Some(v) = line.strip_prefix("id:") {
                            e.id = v.trim().parse().ok();
                        } else if let Some(v) = line.strip_prefix("event:") {
                            e.event = v.trim().to_string();
                        } else if let Some(v) = line.strip_prefix("data:") {
                            e.data.push_str(v.trim_start());
                        }
                    }
                    if e.event.is_empty() && e.data.is_empty() {
                        continue;
                    }
                    if !on_event(e) {
                        return Ok(());
                    }
                }
            }
            Ok(())
        })
    }
}

/// What keeps a client from the daemon's socket, said so that the fix is plain.
pub(crate) fn why_unreachable(socket: &std::path::Path, e: &std::io::Error) -> String {
    use std::os::unix::fs::PermissionsExt;
    let dir = socket.parent().unwrap_or(std::path::Path::new("."));
    let open_to_others = std::fs::metadata(dir)
        .map(|m| m.permissions().mode() & 0o022 != 0)
        .unwrap_or(false);
    if open_to_others {
        return format!(
            "its directory {} is writable by other users, so `scion serve` refuses to listen there; point SCION_SOCKET (or --socket) at a private directory",
            dir.display()
        );
    }
    match e.kind() {
        std::io::ErrorKind::NotFound if !dir.exists() => format!(
            "no daemon has listened here ({} does not exist)",
            dir.display()
        ),
        std::io::ErrorKind::NotFound => "no daemon is listening (there is no socket)".into(),
        std::io::ErrorKind::ConnectionRefused => {
            "the socket is stale: the daemon that made it has stopped".into()
        }
        std::io::ErrorKind::PermissionDenied => {
            "permission denied: the socket belongs to another user".into()
        }
        _ => e.to_string(),
    }
}
