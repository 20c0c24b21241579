//! The head-history tools: log, undo and restore.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::json;

use crate::args::{LogArgs, RestoreArgs, UndoArgs};
use crate::paths::{ApiPath, Tail};
use crate::policy::{done, failed, ToolResult};
use crate::ScionMcp;

#[tool_router(router = history_router, vis = "pub(crate)")]
impl ScionMcp {
    /// A branch's head history, newest first: every commit, rollback, promote, undo and
    /// restore with the versions before and after, when, and by whom. Works for a
    /// destroyed branch while its history lasts.
    #[tool(
        name = "scion_log",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn log(&self, Parameters(a): Parameters<LogArgs>) -> ToolResult {
        answer!(self.config().grants.may_read(&a.database));
        let limit = a.limit.unwrap_or(20);
        let v = answer!(
            self.call(
                "GET",
                &answer!(ApiPath::branch(
                    &a.database,
                    &a.branch,
                    Tail::query("/history", "limit", limit)
                )),
                None
            )
            .await
        );
        done(
            json!({"database": a.database, "branch": a.branch, "live": v["live"], "owner": v["owner"], "entries": v["entries"], "more": v["more"]}),
        )
    }

    /// Take back the latest move of a branch's head (a rollback, promote, commit, ...)
    /// that is not undone yet; repeat to go further back. Only on a branch this agent owns
    /// (or is granted). A protected branch needs force, which this server refuses unless
    /// allowed.
    #[tool(
        name = "scion_undo",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn undo(&self, Parameters(a): Parameters<UndoArgs>) -> ToolResult {
        answer!(self.check_force(a.force));
        answer!(
            self.changeable(&a.database, &a.branch, "undo a move of")
                .await
        );
        let v = answer!(
            self.call(
                "POST",
                &answer!(ApiPath::branch(&a.database, &a.branch, Tail::path("/undo"))),
                Some(json!({"force": a.force}))
            )
            .await
        );
        done(
            json!({"database": a.database, "branch": a.branch, "version": v["version"], "to": v["to"], "history_entry": v["history_entry"], "path": v["checkout"]}),
        )
    }

    /// Put a branch's head back to the result of an entry of its head history (default:
    /// bring a destroyed branch back as it was, or redo the latest undo). Only on a branch
    /// this agent owns (or is granted), destroyed ones included.
    #[tool(
        name = "scion_restore",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn restore(&self, Parameters(a): Parameters<RestoreArgs>) -> ToolResult {
        answer!(self.check_force(a.force));
        let grants = &self.config().grants;
        answer!(grants.may_read(&a.database));
        // The history names the owner of a destroyed branch too.
        let h = answer!(
            self.call(
                "GET",
                &answer!(ApiPath::branch(
                    &a.database,
                    &a.branch,
                    Tail::query("/history", "limit", 1usize)
                )),
                None
            )
            .await
        );
        answer!(grants.may_change(&a.database, &a.branch, h["owner"].as_str(), "restore"));
        let v = answer!(
            self.call(
                "POST",
                &answer!(ApiPath::branch(
                    &a.database,
                    &a.branch,
                    Tail::path("/restore")
                )),
                Some(json!({"to": a.to, "force": a.force}))
            )
            .await
        );
        done(
            json!({"database": a.database, "branch": a.branch, "version": v["version"], "to": v["to"], "history_entry": v["history_entry"], "path": v["checkout"]}),
        )
    }
}
