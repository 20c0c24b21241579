//! `POST /v1/branches/{branch}/merge`: another branch's changes brought into `{branch}`.
//! The answer is the merge's report whatever its outcome: a merge stopped by conflicts or
//! violations is `200` with `"outcome": "conflicts"` and nothing published (it is data, not
//! a failure); errors are the API's usual ones.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;
use scion_core::{BranchRef, Target};
use scion_merge::{Granularity, MergeError, MergeOptions, Resolution, SchemaPolicy, Strategy};
use serde::Deserialize;

use super::branches::refuse_live;
use crate::answer::json;
use crate::error::{ApiError, ApiResult};
use crate::events::EventKind;
use crate::handler::{on_engine, parse, Body};
use crate::state::Shared;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeBody {
    /// The source: a branch of the same database (`feature`), or a full target
    /// (`db@feature`, `db@feature@checkpoint`).
    from: String,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    strategy: Strategy,
    #[serde(default)]
    conflict_granularity: Granularity,
    #[serde(default)]
    schema_policy: SchemaPolicy,
    /// By conflict id: `"ours"`, `"theirs"`, or the value(s) to write.
    #[serde(default)]
    resolutions: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    allow_violations: bool,
    base: Option<String>,
    /// Rows both sides inserted under one INTEGER PRIMARY KEY are kept as two rows: the
    /// source's get new ids, and its references to them follow.
    #[serde(default)]
    renumber: bool,
    /// Needed to merge into a protected branch.
    #[serde(default)]
    force: bool,
}

pub(crate) fn api_error(e: &MergeError) -> ApiError {
    let d = e.describe();
    let mut err = ApiError::new(d.exit, d.code, e.to_string(), d.hint);
    err.body.retryable = e.is_retryable();
    err
}

pub async fn merge(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    Body(body): Body<MergeBody>,
) -> ApiResult<Response> {
    let dst: BranchRef = parse(&branch)?;
    let src: Target = if body.from.contains('@') {
        parse(&body.from)?
    } else {
        parse(&format!("{}@{}", dst.db, body.from))?
    };
    let opts = MergeOptions {
        dry_run: body.dry_run,
        strategy: body.strategy,
        granularity: body.conflict_granularity,
        schema_policy: body.schema_policy,
        resolutions: body
            .resolutions
            .into_iter()
            .map(|(id, v)| (id, Resolution::from_json(v)))
            .collect(),
        allow_violations: body.allow_violations,
        base: body.base.as_deref().map(parse).transpose()?,
        allow_protected: body.force,
        renumber: body.renumber,
    };
    if !opts.dry_run {
        refuse_live(&shared, &dst.to_string())?;
    }
    let report = on_engine(&shared, move |s| {
        scion_merge::merge(s.engine(), &mut s.working_files(), &src, &dst, &opts)
    })
    .await?
    .map_err(|e| api_error(&e))?;
    if report.published.is_some() {
        shared.events.emit(
            EventKind::Merged,
            serde_json::to_value(&report).unwrap_or_default(),
        );
    }
    Ok(json(&report))
}
