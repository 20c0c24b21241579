//! A branch's head history over HTTP: read it, undo the latest move, restore any entry
//! (or a destroyed branch). The engine's protection rules apply as for rollback.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;
use scion_core::described::Context;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::BranchRef;
use serde::Deserialize;

use super::branches::refuse_live;
use crate::answer::json;
use crate::error::ApiResult;
use crate::events::EventKind;
use crate::handler::{blocking, parse, MaybeBody, Query};
use crate::state::Shared;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    limit: Option<usize>,
}

pub async fn history(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    Query(q): Query<HistoryQuery>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    let limit = Some(q.limit.unwrap_or(50));
    let h = blocking(&shared, Context::Other, move |s| {
        s.engine().head_history(&b, limit)
    })
    .await?;
    Ok(json(&h))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct UndoBody {
    #[serde(default)]
    force: bool,
}

pub async fn undo(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    MaybeBody(body): MaybeBody<UndoBody>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    refuse_live(&shared, &branch)?;
    let opts = MoveOptions {
        force: body.force,
        ..Default::default()
    };
    let report = blocking(&shared, Context::Rollback, move |s| s.undo(&b, &opts)).await?;
    shared.events.emit(
        EventKind::Undone,
        serde_json::to_value(&report).unwrap_or_default(),
    );
    Ok(json(&report))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RestoreBody {
    /// The history entry whose result to restore.
    to: Option<u64>,
    #[serde(default)]
    force: bool,
}

pub async fn restore(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    MaybeBody(body): MaybeBody<RestoreBody>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    refuse_live(&shared, &branch)?;
    let opts = MoveOptions {
        force: body.force,
        ..Default::default()
    };
    let to = body.to;
    let report = blocking(&shared, Context::Rollback, move |s| {
        s.restore(&b, to, &opts)
    })
    .await?;
    shared.events.emit(
        EventKind::Restored,
        serde_json::to_value(&report).unwrap_or_default(),
    );
    Ok(json(&report))
}
