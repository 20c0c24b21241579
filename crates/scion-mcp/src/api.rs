//! Where the tools' requests go: a running daemon (sessions live there), or the daemon's
//! API answered in this process when none runs. Either way the answers are the daemon's.

use std::path::PathBuf;
use std::sync::Arc;

use scion_core::Scion;
use scion_daemon::client::{ClientError, DaemonClient};
use scion_daemon::embedded::Embedded;
use scion_daemon::Config;

/// An answered request: the body, or the API's error (`code`, `message`, `hint`).
pub type Answer = Result<serde_json::Value, ApiFailure>;

#[derive(Debug, Clone)]
pub struct ApiFailure {
    pub code: String,
    pub message: String,
    pub hint: Option<String>,
    /// For a refusal of this server's access rules: the rule, and what grants the call.
    pub rule: Option<String>,
    pub grant: Option<String>,
}

impl ApiFailure {
    pub fn new(code: &str, message: impl Into<String>, hint: Option<&str>) -> Self {
        ApiFailure {
            code: code.to_string(),
            message: message.into(),
            hint: hint.map(str::to_string),
            rule: None,
            grant: None,
        }
    }
}

/// Whether tools go through a daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonMode {
    /// A daemon when one answers on the socket, else in this process.
    Auto,
    /// Only through a daemon: fail when none answers.
    Require,
    /// Always in this process (sessions then live in this process too).
    Never,
}

impl std::str::FromStr for DaemonMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DaemonMode::Auto),
            "require" => Ok(DaemonMode::Require),
            "never" => Ok(DaemonMode::Never),
            _ => Err(format!("--daemon {s:?}: expected auto, require or never")),
        }
    }
}

/// Who this server's requests are from: the actor head histories record (its owner tag),
/// and the token it presents to a daemon that asks for one.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    pub actor: Option<String>,
    pub token: Option<String>,
}

impl Identity {
    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut h = Vec::new();
        if let Some(a) = &self.actor {
            h.push(("x-scion-actor", a.clone()));
        }
        if let Some(t) = &self.token {
            h.push(("authorization", format!("Bearer {t}")));
        }
        h
    }
}

pub enum Api {
    Daemon(Arc<DaemonClient>, Identity),
    InProcess(Arc<Embedded>, Identity),
}

impl Api {
    /// Choose per `mode`: `socket` is where a daemon of this store would listen.
    pub fn connect(
        mode: DaemonMode,
        socket: PathBuf,
        scion: Arc<Scion>,
        identity: Identity,
    ) -> Result<Api, String> {
        let client = DaemonClient::new(&socket);
        let auth: Vec<(&str, String)> = identity.headers();
        let auth: Vec<(&str, &str)> = auth.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let answers = || client.raw("GET", "/healthz", None, &auth).is_ok();
        match mode {
            DaemonMode::Never => Ok(Api::InProcess(
                Arc::new(Embedded::new(scion, Config::default())),
                identity,
            )),
            DaemonMode::Require if !answers() => Err(format!(
                "no daemon answers at {}: start `scion serve`, or use --daemon auto",
                socket.display()
            )),
            DaemonMode::Auto if !answers() => Ok(Api::InProcess(
                Arc::new(Embedded::new(scion, Config::default())),
                identity,
            )),
            _ => Ok(Api::Daemon(Arc::new(client), identity)),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Api::Daemon(c, _) => format!("through the daemon at {}", c.socket().display()),
            Api::InProcess(..) => "in this process (no daemon)".to_string(),
        }
    }

    pub async fn call(&self, method: &str, path: &str, body: Option<serde_json::Value>) -> Answer {
        let (status, value) = match self {
            Api::InProcess(e, id) => {
                let h = id.headers();
                let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
                e.request(method, path, body.as_ref(), &h).await
            }
            Api::Daemon(c, id) => {
                let (c, method, path) = (c.clone(), method.to_string(), path.to_string());
                let h = id.headers();
                let reply = tokio::task::spawn_blocking(move || {
                    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    c.raw(&method, &path, body.as_ref(), &h)
                })
                .await
                .map_err(|e| ApiFailure::new("internal", e.to_string(), None))?;
                match reply {
                    Ok(r) => (r.status, r.body),
                    Err(ClientError::Connect { socket, reason }) => {
                        return Err(ApiFailure::new(
                            "daemon_unavailable",
                            format!("cannot reach the daemon at {}: {reason}", socket.display()),
                            Some("start `scion serve` again, or restart this MCP server with --daemon never"),
                        ))
                    }
                    Err(e) => return Err(ApiFailure::new("daemon_error", e.to_string(), None)),
                }
            }
        };
        if status >= 400 {
            let e = &value["error"];
            return Err(ApiFailure {
                code: e["code"].as_str().unwrap_or("error").to_string(),
                message: e["message"].as_str().unwrap_or_default().to_string(),
                hint: e["hint"].as_str().map(str::to_string),
                rule: None,
                grant: None,
            });
        }
        Ok(value)
    }

    /// Close sessions this process holds (in-process mode): they must not outlive it.
    pub(crate) async fn shutdown(&self) {
        if let Api::InProcess(e, _) = self {
            e.close_sessions().await;
        }
    }
}
