//! The server's rules, and how tools answer: its configuration (TTLs, the branch cap, force,
//! read-only), the checks made before any request, and the shape of results and refusals.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::CallToolResult;
use serde_json::{json, Value};

use crate::access::{Grants, Standing};
use crate::api::{self, Api, ApiFailure};
use crate::paths::{ApiPath, Tail};
use crate::{Inner, ScionMcp, READING_TOOLS};

#[derive(Debug, Clone)]
pub struct McpConfig {
    /// The TTL every fork made through MCP gets when none is given.
    pub default_ttl: Duration,
    /// The longest TTL an agent may ask for.
    pub max_ttl: Duration,
    /// Whether `ttl: "none"` (a branch that is never reaped) is allowed.
    pub allow_no_ttl: bool,
    /// Whether `force` may be used at all.
    pub allow_force: bool,
    /// Branches (forks and session forks) this server may create.
    pub max_branches: usize,
    pub read_only: bool,
    pub query_time: Duration,
    /// Whose branches this server's agent may change, and what else it is granted.
    pub grants: Grants,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            default_ttl: Duration::from_secs(24 * 3600),
            max_ttl: Duration::from_secs(7 * 24 * 3600),
            allow_no_ttl: false,
            allow_force: false,
            max_branches: 200,
            read_only: false,
            query_time: Duration::from_secs(5),
            grants: Grants::default(),
        }
    }
}

pub(crate) type ToolResult = Result<CallToolResult, rmcp::ErrorData>;

/// A tool's failure as the agent sees it: the code first, the hint last.
pub(crate) fn failed(f: ApiFailure) -> ToolResult {
    let text = match &f.hint {
        Some(h) => format!("{}: {} (hint: {h})", f.code, f.message),
        None => format!("{}: {}", f.code, f.message),
    };
    let mut body = json!({"code": f.code, "message": f.message, "hint": f.hint});
    if let Some(rule) = &f.rule {
        body["rule"] = json!(rule);
        body["grant"] = json!(f.grant);
    }
    let mut r = CallToolResult::structured_error(body);
    r.content = vec![rmcp::model::ContentBlock::text(text)];
    Ok(r)
}

pub(crate) fn done(v: Value) -> ToolResult {
    Ok(CallToolResult::structured(v))
}

pub(crate) fn refuse(code: &str, message: impl Into<String>, hint: &str) -> ToolResult {
    failed(ApiFailure::new(code, message, Some(hint)))
}

macro_rules! answer {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(f) => return failed(f),
        }
    };
}

impl ScionMcp {
    pub fn new(api: Api, config: McpConfig) -> ScionMcp {
        let mut tool_router = Self::tool_router() + Self::history_router() + Self::session_router();
        if config.read_only {
            for t in tool_router.list_all() {
                if !READING_TOOLS.contains(&t.name.as_ref()) {
                    tool_router.remove_route(&t.name);
                }
            }
        }
        ScionMcp {
            inner: Arc::new(Inner {
                api,
                config,
                created: AtomicUsize::new(0),
            }),
            tool_router,
        }
    }

    /// Close what this server holds (sessions opened in this process) before it exits.
    pub(crate) async fn shutdown(&self) {
        self.inner.api.shutdown().await;
    }

    pub(crate) fn config(&self) -> &McpConfig {
        &self.inner.config
    }

    pub(crate) async fn call(
        &self,
        method: &str,
        path: &ApiPath,
        body: Option<Value>,
    ) -> api::Answer {
        self.inner.api.call(method, path.as_str(), body).await
    }

    /// The TTL a new branch gets: the default when none is asked for, never more than the
    /// maximum, "none" only when allowed.
    pub(crate) fn ttl(&self, asked: Option<&str>) -> Result<Option<String>, ApiFailure> {
        let c = self.config();
        let secs = |d: Duration| format!("{}s", d.as_secs());
        match asked {
            None => Ok(Some(secs(c.default_ttl))),
            Some("none") if c.allow_no_ttl => Ok(None),
            Some("none") => Err(ApiFailure::new(
                "ttl_required",
                "branches made through MCP expire: \"none\" is not allowed here",
                Some("give a TTL such as \"2h\" (the server caps it), or ask the human to start `scion mcp --allow-no-ttl`"),
            )),
            Some(t) => {
                let d = scion_core::clock::parse_duration(t).map_err(|e| {
                    ApiFailure::new("invalid_duration", e.to_string(), Some("durations look like 30m, 2h, 7d"))
                })?;
                Ok(Some(secs(d.min(c.max_ttl))))
            }
        }
    }

    /// The status of `db@branch` (as `GET /v1/branches/…` answers it) and how it stands
    /// for this server, when its agent may `what` it; the refusal naming the rule otherwise.
    pub(crate) async fn changeable(
        &self,
        db: &str,
        branch: &str,
        what: &str,
    ) -> Result<(Value, Standing), ApiFailure> {
        let grants = &self.config().grants;
        grants.may_read(db)?;
        let status = self
            .call("GET", &ApiPath::branch(db, branch, Tail::none())?, None)
            .await?;
        let standing = grants.may_change(db, branch, status["owner"].as_str(), what)?;
        Ok((status, standing))
    }

    pub(crate) fn check_force(&self, force: bool) -> Result<(), ApiFailure> {
        if force && !self.config().allow_force {
            return Err(crate::access::force_not_allowed());
        }
        Ok(())
    }

    pub(crate) fn claim_branch(&self) -> Result<(), ApiFailure> {
        let max = self.config().max_branches;
        if self.inner.created.fetch_add(1, Ordering::SeqCst) >= max {
            self.inner.created.fetch_sub(1, Ordering::SeqCst);
            return Err(ApiFailure::new(
                "limit_exceeded",
                format!("this MCP server has already created {max} branches"),
                Some(
                    "destroy branches you no longer need, or ask the human to raise --max-branches",
                ),
            ));
        }
        Ok(())
    }
}
