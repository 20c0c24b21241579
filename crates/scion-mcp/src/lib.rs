//! `scion mcp`: scion's operations as MCP tools (rmcp, stdio) for agents, with safe
//! defaults: an agent reads everything it is given but changes only the branches it forked
//! (see [`access`]), every fork gets a TTL, branches made through MCP are capped, `force` is
//! refused unless the server was started with it, and a read-only mode offers only the
//! reading tools.
//! Tools go through a running daemon when there is one (sessions live there), and through
//! the daemon's API answered in this process otherwise.

#[macro_use]
mod policy;
pub mod access;
pub mod api;
mod args;
mod history_tools;
mod paths;
/// Read-only SQL with limits: the daemon's, shared with the explorer's SQL box.
pub use scion_daemon::query;
mod session_tools;
mod shapes;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ServerHandler};
use serde_json::{json, Value};

pub use api::{Api, ApiFailure, DaemonMode, Identity};
use args::*;
use paths::{ApiPath, Tail};
pub use policy::McpConfig;
use policy::{done, failed, refuse, ToolResult};

/// The tools offered in `--read-only` mode.
const READING_TOOLS: &[&str] = &[
    "scion_list",
    "scion_log",
    "scion_diff",
    "scion_query",
    "scion_checkout",
    "scion_session_status",
];

/// How the server behaves.
struct Inner {
    api: Api,
    config: McpConfig,
    created: AtomicUsize,
}

#[derive(Clone)]
pub struct ScionMcp {
    inner: Arc<Inner>,
    tool_router: ToolRouter<Self>,
}

#[tool_router(router = tool_router)]
impl ScionMcp {
    /// Databases and their branches (version, checkout state, protection, TTL, live
    /// session).
    #[tool(
        name = "scion_list",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn list(&self, Parameters(a): Parameters<ListArgs>) -> ToolResult {
        let grants = &self.config().grants;
        let names: Vec<String> = match a.database {
            Some(d) => {
                answer!(grants.may_read(&d));
                vec![d]
            }
            None => {
                let v = answer!(
                    self.call("GET", &ApiPath::fixed("/v1/databases"), None)
                        .await
                );
                let all: Vec<String> =
                    serde_json::from_value(v["databases"].clone()).unwrap_or_default();
                all.into_iter()
                    .filter(|d| grants.may_read(d).is_ok())
                    .collect()
            }
        };
        let mut dbs = Vec::new();
        for name in names {
            let v = answer!(
                self.call(
                    "GET",
                    &answer!(ApiPath::database(&name, Tail::path("/branches"))),
                    None
                )
                .await
            );
            let mut branches = v["branches"].as_array().cloned().unwrap_or_default();
            if a.include_checkpoints {
                for b in &mut branches {
                    let branch = b["branch"].as_str().unwrap_or_default().to_string();
                    let path = answer!(ApiPath::branch(&name, &branch, Tail::path("/checkpoints")));
                    let c = answer!(self.call("GET", &path, None).await);
                    b["checkpoints_list"] = c["checkpoints"].clone();
                }
            }
            dbs.push(json!({"name": name, "branches": branches}));
        }
        done(json!({ "databases": dbs }))
    }

    /// Fork a branch (O(1)): `new_branch` from `branch` (default main) at its head or at
    /// checkpoint `at`. Every fork made here expires after its TTL unless touched.
    #[tool(
        name = "scion_fork",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn fork(&self, Parameters(a): Parameters<ForkArgs>) -> ToolResult {
        answer!(self.config().grants.may_read(&a.database));
        let ttl = answer!(self.ttl(a.ttl.as_deref()));
        answer!(self.claim_branch());
        let owner = self.config().grants.owner.to_string();
        let body = json!({"source": format!("{}@{}", a.database, a.branch), "name": a.new_branch, "at": a.at, "ttl": ttl, "owner": owner});
        let v = match self
            .call("POST", &ApiPath::fixed("/v1/branches"), Some(body))
            .await
        {
            Ok(v) => v,
            Err(f) => {
                self.inner.created.fetch_sub(1, Ordering::SeqCst);
                return failed(f);
            }
        };
        let mut out = json!({"database": a.database, "branch": a.branch, "new_branch": a.new_branch, "version": v["version"], "ttl": ttl, "owner": owner});
        if a.open_session {
            let body = json!({"db": a.database, "branch": a.new_branch, "idle_timeout": "30m", "owner_pid": std::process::id()});
            let s = answer!(
                self.call("POST", &ApiPath::fixed("/v1/sessions"), Some(body))
                    .await
            );
            out["session"] = json!({"session_id": s["id"], "path": s["path"]});
        }
        done(out)
    }

    /// The path of a branch's SQLite file to open with any SQLite client; `read_only`
    /// (or `at`, a checkpoint) gives a read-only file of that version. A writable file only
    /// of a branch this agent owns (or is granted): fork other branches first.
    #[tool(
        name = "scion_checkout",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn checkout(&self, Parameters(a): Parameters<CheckoutArgs>) -> ToolResult {
        let read_only = a.read_only || a.at.is_some() || self.config().read_only;
        answer!(self.config().grants.may_read(&a.database));
        if !read_only {
            answer!(
                self.changeable(&a.database, &a.branch, "check out writable")
                    .await
            );
        }
        let v = answer!(
            self.call(
                "POST",
                &answer!(ApiPath::branch(
                    &a.database,
                    &a.branch,
                    Tail::path("/checkout")
                )),
                Some(json!({"read_only": read_only, "checkpoint": a.at}))
            )
            .await
        );
        let info = answer!(
            self.call(
                "GET",
                &answer!(ApiPath::branch(&a.database, &a.branch, Tail::none())),
                None
            )
            .await
        );
        done(
            json!({"database": a.database, "branch": a.branch, "path": v["path"], "live": info["session"].is_string() && !read_only, "read_only": read_only, "version": v["version"]}),
        )
    }

    /// Name the branch's current state as a checkpoint (through its live session when it
    /// has one).
    #[tool(
        name = "scion_checkpoint",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn checkpoint(&self, Parameters(a): Parameters<CheckpointArgs>) -> ToolResult {
        let (info, _) = answer!(self.changeable(&a.database, &a.branch, "checkpoint").await);
        let v = match info["session"].as_str() {
            Some(id) => answer!(
                self.call(
                    "POST",
                    &answer!(ApiPath::session(id, Tail::path("/flush"))),
                    Some(json!({"checkpoint": a.name, "meta": a.meta}))
                )
                .await
            ),
            None => answer!(
                self.call(
                    "POST",
                    &answer!(ApiPath::branch(
                        &a.database,
                        &a.branch,
                        Tail::path("/checkpoints")
                    )),
                    Some(json!({"name": a.name}))
                )
                .await
            ),
        };
        done(
            json!({"database": a.database, "branch": a.branch, "name": a.name, "version": v["version"], "live": info["session"].is_string()}),
        )
    }

    /// Move a branch's head back to checkpoint `to`; the move is recorded in the branch's
    /// head history (scion_undo takes it back) and the abandoned head is kept as a safety
    /// fork. A protected branch (main) needs force, which this server refuses unless
    /// allowed: work on a fork instead.
    #[tool(
        name = "scion_rollback",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn rollback(&self, Parameters(a): Parameters<RollbackArgs>) -> ToolResult {
        answer!(self.check_force(a.force));
        answer!(self.changeable(&a.database, &a.branch, "roll back").await);
        let v = answer!(
            self.call(
                "POST",
                &answer!(ApiPath::branch(
                    &a.database,
                    &a.branch,
                    Tail::path("/rollback")
                )),
                Some(json!({"to": a.to, "force": a.force}))
            )
            .await
        );
        done(
            json!({"database": a.database, "branch": a.branch, "to": a.to, "version": v["version"], "path": v["checkout"], "backup": v["safety_fork"], "history_entry": v["history_entry"]}),
        )
    }

    /// Make `target` (default main) hold `source`'s head; the old head is kept as a safety
    /// fork. A protected target needs force, which this server refuses unless allowed.
    #[tool(
        name = "scion_promote",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn promote(&self, Parameters(a): Parameters<PromoteArgs>) -> ToolResult {
        answer!(self.check_force(a.force));
        answer!(
            self.changeable(&a.database, &a.target, "promote onto")
                .await
        );
        let v = answer!(
            self.call(
                "POST",
                &answer!(ApiPath::branch(
                    &a.database,
                    &a.source,
                    Tail::path("/promote")
                )),
                Some(json!({"onto": a.target, "force": a.force}))
            )
            .await
        );
        done(
            json!({"database": a.database, "source": a.source, "target": a.target, "version": v["version"], "backup": v["safety_fork"]}),
        )
    }

    /// Bring `source`'s changes into `target` (default main), three-way at the cell. A dry
    /// run by default: the report lists every conflict (with its id and base, ours and
    /// theirs values) and violation; run again with `dry_run: false`, a `strategy` or
    /// `resolutions` to publish. Nothing is published while a conflict is left under
    /// `fail`. Rows both branches appended under the same id (`insert/insert` on an
    /// INTEGER PRIMARY KEY) are kept, the source's with new ids, with `renumber: true`.
    /// A protected target needs force, which this server refuses unless allowed.
    #[tool(
        name = "scion_merge",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn merge(&self, Parameters(a): Parameters<MergeArgs>) -> ToolResult {
        answer!(self.check_force(a.force));
        if a.dry_run {
            answer!(self.config().grants.may_read(&a.database));
        } else {
            answer!(self.changeable(&a.database, &a.target, "merge into").await);
        }
        let mut body = json!({
            "from": format!("{}@{}", a.database, a.source),
            "dry_run": a.dry_run,
            "renumber": a.renumber,
            "force": a.force,
        });
        if let Some(s) = &a.strategy {
            body["strategy"] = json!(s);
        }
        if let Some(r) = &a.resolutions {
            body["resolutions"] = json!(r);
        }
        let mut v = answer!(
            self.call(
                "POST",
                &answer!(ApiPath::branch(
                    &a.database,
                    &a.target,
                    Tail::path("/merge")
                )),
                Some(body)
            )
            .await
        );
        if !a.renumber && ids_clash(&v) {
            v["hint"] = json!("rows both branches added under the same id conflict; merge with renumber: true to keep both (the source's get new ids, listed in renumbered)");
        }
        done(v)
    }

    /// Remove a branch, its checkpoints and its checkout: only one this agent owns (or is
    /// granted). A safety fork (what a rollback or promote replaced) needs force.
    #[tool(
        name = "scion_destroy",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn destroy(&self, Parameters(a): Parameters<DestroyArgs>) -> ToolResult {
        answer!(self.check_force(a.force));
        let (status, _) = answer!(self.changeable(&a.database, &a.branch, "destroy").await);
        answer!(self.config().grants.destroy_needs_force(&status, a.force));
        answer!(
            self.call(
                "DELETE",
                &answer!(ApiPath::branch(
                    &a.database,
                    &a.branch,
                    Tail::query("", "force", a.force)
                )),
                None
            )
            .await
        );
        done(json!({"database": a.database, "branch": a.branch, "destroyed": true}))
    }

    /// Keep a branch alive: reset its TTL clock, and optionally set a new TTL. Only a branch
    /// this agent owns (or is granted); one it does not own is not made to expire sooner
    /// without force.
    #[tool(
        name = "scion_touch",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn touch(&self, Parameters(a): Parameters<TouchArgs>) -> ToolResult {
        answer!(self.check_force(a.force));
        let ttl = match a.ttl.as_deref() {
            None => None,
            Some(t) => Some(answer!(self.ttl(Some(t))).unwrap_or_default()),
        };
        let (status, standing) = answer!(self.changeable(&a.database, &a.branch, "touch").await);
        let secs = ttl
            .as_deref()
            .and_then(|t| scion_core::clock::parse_duration(t).ok())
            .map(|d| d.as_secs());
        answer!(self
            .config()
            .grants
            .ttl_change_needs_force(standing, &status, secs, a.force));
        let v = answer!(
            self.call(
                "POST",
                &answer!(ApiPath::branch(
                    &a.database,
                    &a.branch,
                    Tail::path("/touch")
                )),
                Some(json!({"ttl": ttl}))
            )
            .await
        );
        let ttl = v["ttl_secs"].as_u64().map(|t| format!("{t}s"));
        done(
            json!({"database": a.database, "branch": a.branch, "ttl": ttl, "ttl_secs": v["ttl_secs"], "touched_at": v["touched_at"]}),
        )
    }

    /// Rows added, removed and changed per table (and schema changes) between two versions
    /// of a database, `branch[@checkpoint]` each.
    #[tool(
        name = "scion_diff",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn diff(&self, Parameters(a): Parameters<DiffArgs>) -> ToolResult {
        answer!(self.config().grants.may_read(&a.database));
        let (from, to) = (
            format!("{}@{}", a.database, a.left),
            format!("{}@{}", a.database, a.right),
        );
        let limit = a.limit.clamp(1, 1000).to_string();
        let mut query = vec![("from", from.as_str()), ("to", to.as_str())];
        if let Some(t) = &a.table {
            query.push(("table", t));
        }
        if a.rows {
            query.extend([("rows", "true"), ("limit", limit.as_str())]);
        }
        if a.sql {
            query.push(("sql", "true"));
        }
        if a.working {
            query.push(("working", "true"));
        }
        let path = ApiPath::with_query("/v1/diff", &query);
        let mut v = answer!(self.call("GET", &path, None).await);
        let too_big = v.to_string().len() > a.max_bytes.max(1024);
        if too_big {
            if let Some(tables) = v["tables"].as_array_mut() {
                for t in tables {
                    t.as_object_mut().map(|o| o.remove("rows"));
                }
            }
            v["sql"] = Value::Null;
        }
        v["truncated"] = json!(too_big);
        done(v)
    }

    /// Read-only SQL on one or more versions of a database (`branch[@checkpoint]` targets,
    /// up to 8), side by side; `attach` puts other versions beside each target under a
    /// schema name, to compare branches in one statement (`JOIN base.items`). Rows and
    /// bytes are capped and the query has a time limit.
    #[tool(
        name = "scion_query",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn query(&self, Parameters(a): Parameters<QueryArgs>) -> ToolResult {
        answer!(self.config().grants.may_read(&a.database));
        if a.targets.is_empty() || a.targets.len() > 8 {
            return refuse(
                "invalid_input",
                "targets: 1 to 8 versions",
                "name versions as branch or branch@checkpoint",
            );
        }
        if a.attach.len() > 8 {
            return refuse(
                "invalid_input",
                "attach: at most 8 versions",
                "compare fewer versions at once",
            );
        }
        if let Some(bad) = a.attach.keys().find(|n| !query::is_schema_name(n)) {
            return refuse(
                "invalid_input",
                format!("attach: {bad:?} is not a schema name"),
                "name each attached version with letters, digits and '_' (not main or temp)",
            );
        }
        let mut attached = Vec::new();
        for (name, version) in &a.attach {
            let (branch, checkpoint) = match version.split_once('@') {
                Some((b, c)) => (b.to_string(), Some(c.to_string())),
                None => (version.clone(), None),
            };
            let co = answer!(
                self.call(
                    "POST",
                    &answer!(ApiPath::branch(
                        &a.database,
                        &branch,
                        Tail::path("/checkout")
                    )),
                    Some(json!({"read_only": true, "checkpoint": checkpoint}))
                )
                .await
            );
            let path = std::path::PathBuf::from(co["path"].as_str().unwrap_or_default());
            attached.push((name.clone(), path));
        }
        let limits = query::Limits {
            max_rows: a.max_rows.clamp(1, 10_000),
            max_bytes: a.max_bytes.clamp(1024, 16 << 20),
            time: self.config().query_time,
        };
        let mut columns = Vec::new();
        let mut results = Vec::new();
        for target in &a.targets {
            let (branch, checkpoint) = match target.split_once('@') {
                Some((b, c)) => (b.to_string(), Some(c.to_string())),
                None => (target.clone(), None),
            };
            let co = answer!(
                self.call(
                    "POST",
                    &answer!(ApiPath::branch(
                        &a.database,
                        &branch,
                        Tail::path("/checkout")
                    )),
                    Some(json!({"read_only": true, "checkpoint": checkpoint}))
                )
                .await
            );
            let path = std::path::PathBuf::from(co["path"].as_str().unwrap_or_default());
            let (sql, params, t) = (a.sql.clone(), a.params.clone(), target.clone());
            let beside = attached.clone();
            let (cols, rows) = tokio::task::spawn_blocking(move || {
                query::run(&path, &beside, &t, &sql, &params, limits)
            })
            .await
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))?;
            if rows.wrote {
                return refuse(
                    "read_only_tool",
                    format!("scion_query only reads, and this statement does more than read {target}: {}", a.sql),
                    "to change a branch, take its file with scion_checkout (or open a session with scion_session_open) and write to it with any SQLite client",
                );
            }
            if columns.is_empty() {
                columns = cols;
            }
            results.push(rows);
        }
        done(json!({ "columns": columns, "results": results }))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for ScionMcp {
    /// Every call goes through one door: branch names normalized on the way in and out
    /// (`shapes`), and arguments a tool cannot read answered as a refusal naming its
    /// fields rather than as a protocol error.
    async fn call_tool(
        &self,
        mut request: rmcp::model::CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        if let Some(args) = request.arguments.as_mut() {
            shapes::normalize_arguments(args);
        }
        let name = request.name.clone();
        let tcc = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        let unreadable = |message: &str| {
            let tool = self.tool_router.get(&name)?;
            let failure = shapes::bad_arguments(&name, message, &tool.input_schema);
            Some(failed(failure).map(Into::into))
        };
        match self.tool_router.call(tcc).await {
            Ok(rmcp::model::CallToolResponse::Complete(mut r)) => {
                // The router answers arguments it could not read as a bare error text.
                if r.is_error == Some(true) && r.structured_content.is_none() {
                    if let Some(rmcp::model::ContentBlock::Text(t)) = r.content.first() {
                        if t.text.starts_with("failed to deserialize parameters") {
                            if let Some(answer) = unreadable(&t.text) {
                                return answer;
                            }
                        }
                    }
                }
                if let Some(v) = r.structured_content.as_mut() {
                    shapes::normalize_answer(v);
                }
                Ok(rmcp::model::CallToolResponse::Complete(r))
            }
            Err(e) if e.code == rmcp::model::ErrorCode::INVALID_PARAMS => {
                unreadable(&e.message).unwrap_or(Err(e))
            }
            other => other,
        }
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("scion", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Branch SQLite databases: fork before risky work (scion_fork, O(1)), work on the fork's file (scion_checkout gives its path), compare (scion_diff, scion_query), then merge it (scion_merge) or drop it (scion_destroy). You may read every branch, but change only the branches you fork (they are recorded as owned by {}); changes to any other branch are refused. Forks expire after {} unless touched. Tools run {}.",
                self.config().grants.owner,
                scion_core::clock::format_duration(self.config().default_ttl.as_secs()),
                self.inner.api.describe()
            ))
    }
}

/// Whether a merge report has an unresolved `insert/insert` conflict in a table keyed by
/// an INTEGER PRIMARY KEY (two new rows under one id), which `renumber` keeps apart.
fn ids_clash(report: &serde_json::Value) -> bool {
    let keyed_by_id = |table: &serde_json::Value| {
        report["tables"].as_array().is_some_and(|all| {
            all.iter()
                .any(|t| t["table"] == *table && t["keyed_by_id"] == true)
        })
    };
    report["conflicts"].as_array().is_some_and(|all| {
        all.iter().any(|c| {
            c["kind"] == "insert/insert"
                && c["resolution"] == "unresolved"
                && keyed_by_id(&c["table"])
        })
    })
}

/// Serve MCP on stdin/stdout until the client goes away, then close what this server holds.
pub async fn serve_stdio(server: ScionMcp) -> Result<(), String> {
    use rmcp::ServiceExt;
    let running = server
        .clone()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| e.to_string())?;
    let ended = running.waiting().await.map_err(|e| e.to_string());
    server.shutdown().await;
    ended.map(drop)
}
