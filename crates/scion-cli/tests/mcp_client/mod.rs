//! A real MCP client (rmcp's) driving `scion mcp` over stdio, for the tests.
#![allow(dead_code)]

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

use crate::served::{self, Served};

pub type Client = RunningService<RoleClient, ()>;

pub async fn connect(s: &Served, args: &[&str]) -> Client {
    let mut cmd = tokio::process::Command::new(served::bin());
    cmd.arg("mcp")
        .args(args)
        .current_dir(&s.dir)
        .env("HOME", &s.dir)
        .env("SCION_STORE", &s.store)
        .env("SCION_SOCKET", &s.socket)
        .env("SCION_LOG", "warn");
    ().serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

pub async fn call(c: &Client, tool: &'static str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone());
    c.call_tool(params).await.unwrap()
}

pub fn ok(r: &CallToolResult) -> &Value {
    assert_ne!(r.is_error, Some(true), "{r:?}");
    r.structured_content.as_ref().unwrap()
}

pub fn refused(r: &CallToolResult) -> String {
    assert_eq!(r.is_error, Some(true), "expected a refusal: {r:?}");
    r.structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("a refusal without structured content: {r:?}"))["code"]
        .as_str()
        .unwrap()
        .to_string()
}

pub async fn tool_names(c: &Client) -> Vec<String> {
    let mut names: Vec<String> = c
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}
