//! The session tools: open, close and status of live capture on a branch's file.

use std::sync::atomic::Ordering;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::json;

use crate::args::{ForkFrom, SessionCloseArgs, SessionOpenArgs, SessionStatusArgs};
use crate::paths::{ApiPath, Tail};
use crate::policy::{done, failed, refuse, ToolResult};
use crate::ScionMcp;

#[tool_router(router = session_router, vis = "pub(crate)")]
impl ScionMcp {
    /// Open a session: the branch's file is captured live, so every commit any SQLite
    /// client makes to it becomes durable within seconds. With `fork_from`, a fresh fork
    /// (with a TTL) is made first. Idle sessions close after `idle_timeout` (30m).
    #[tool(
        name = "scion_session_open",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn session_open(&self, Parameters(a): Parameters<SessionOpenArgs>) -> ToolResult {
        answer!(self.config().grants.may_read(&a.database));
        if a.fork_from.is_none() {
            answer!(
                self.changeable(
                    &a.database,
                    a.branch.as_deref().unwrap_or("main"),
                    "open a session on"
                )
                .await
            );
        }
        let ttl = match &a.fork_from {
            Some(_) => {
                let t = answer!(self.ttl(a.ttl.as_deref()));
                answer!(self.claim_branch());
                t
            }
            None => None,
        };
        let idle = a.idle_timeout.clone().unwrap_or_else(|| "30m".into());
        let body = json!({
            "db": a.database, "branch": a.branch, "fork_from": a.fork_from.as_ref().map(ForkFrom::spec), "ttl": ttl,
            "idle_timeout": idle,
            // Sessions must not outlive the agent's server.
            "owner_pid": std::process::id(),
            "owner": a.fork_from.as_ref().map(|_| self.config().grants.owner.to_string()),
        });
        match self
            .call("POST", &ApiPath::fixed("/v1/sessions"), Some(body))
            .await
        {
            Ok(v) => done(
                json!({"session_id": v["id"], "database": a.database, "branch": v["branch"], "path": v["path"], "version": v["version"], "idle_timeout": idle}),
            ),
            Err(f) => {
                if a.fork_from.is_some() {
                    self.inner.created.fetch_sub(1, Ordering::SeqCst);
                }
                failed(f)
            }
        }
    }

    /// Flush and close a session (optionally naming the final state as a checkpoint).
    #[tool(
        name = "scion_session_close",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn session_close(&self, Parameters(a): Parameters<SessionCloseArgs>) -> ToolResult {
        let id = &a.session_id;
        let session = answer!(
            self.call("GET", &answer!(ApiPath::session(id, Tail::none())), None)
                .await
        );
        let (db, branch) = session["branch"]
            .as_str()
            .and_then(|b| b.split_once('@'))
            .unwrap_or_default();
        answer!(self.changeable(db, branch, "close the session on").await);
        if !a.flush {
            return refuse(
                "discard_not_allowed",
                "closing a session always commits what it captured",
                "close with flush (the default); drop the work afterwards with scion_rollback or scion_destroy",
            );
        }
        if let Some(name) = &a.checkpoint {
            answer!(
                self.call(
                    "POST",
                    &answer!(ApiPath::session(id, Tail::path("/flush"))),
                    Some(json!({"checkpoint": name}))
                )
                .await
            );
        }
        let v = answer!(
            self.call("DELETE", &answer!(ApiPath::session(id, Tail::none())), None)
                .await
        );
        done(
            json!({"session_id": id, "closed": true, "version": v["version"], "checkpoint": a.checkpoint}),
        )
    }

    /// Open sessions (or one): branch, state, durable version and age, capture lag.
    #[tool(
        name = "scion_session_status",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn session_status(&self, Parameters(a): Parameters<SessionStatusArgs>) -> ToolResult {
        let sessions = match &a.session_id {
            Some(id) => {
                let one = answer!(
                    self.call("GET", &answer!(ApiPath::session(id, Tail::none())), None)
                        .await
                );
                answer!(self.config().grants.may_read(database_of(&one)));
                vec![one]
            }
            None => {
                let all = answer!(
                    self.call("GET", &ApiPath::fixed("/v1/sessions"), None)
                        .await
                );
                // Only the sessions of databases this server was given.
                let grants = &self.config().grants;
                all["sessions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|s| grants.may_read(database_of(s)).is_ok())
                    .cloned()
                    .collect()
            }
        };
        done(json!({ "sessions": sessions }))
    }
}

/// The database of a session as the daemon describes it (`"branch": "db@branch"`).
fn database_of(session: &serde_json::Value) -> &str {
    session["branch"]
        .as_str()
        .and_then(|b| b.split_once('@'))
        .map_or("", |(db, _)| db)
}
