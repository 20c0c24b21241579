//! Remotes and the transfers between stores: `GET/POST /v1/remotes`, `DELETE
//! /v1/remotes/{name}`, `POST /v1/branches/{branch}/push` and `.../pull`. The answers are
//! `scion-remote`'s reports, as `scion push --json` and `scion pull --json` print them.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use scion_core::described::{Context, Exit};
use scion_core::progress::ProgressSink;
use scion_core::{BranchName, BranchRef, RemoteName, Scion};
use scion_merge::{MergeOptions, Strategy};
use scion_remote::{PullOptions, PushOptions, Remote, RemoteError};
use serde::Deserialize;

use super::branches::refuse_live;
use crate::answer::json;
use crate::answer::json_with;
use crate::error::{ApiError, ApiResult};
use crate::handler::{blocking, on_engine, parse, Body};
use crate::state::Shared;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddBody {
    name: String,
    /// A directory, `file:///path`, `s3://bucket/prefix` or `az://container/prefix`.
    location: String,
}

pub async fn list(State(shared): State<Arc<Shared>>) -> ApiResult<Response> {
    let remotes = blocking(&shared, Context::Other, |s| s.engine().remotes()).await?;
    let list: Vec<_> = remotes
        .iter()
        .map(|(n, l)| serde_json::json!({"remote": n, "location": l}))
        .collect();
    Ok(json(&list))
}

pub async fn add(
    State(shared): State<Arc<Shared>>,
    Body(body): Body<AddBody>,
) -> ApiResult<Response> {
    let name: RemoteName = parse(&body.name)?;
    let location = body.location;
    let recorded = blocking(&shared, Context::Other, move |s| {
        s.engine().add_remote(&name, &location)
    })
    .await?;
    Ok(json_with(
        StatusCode::CREATED,
        &serde_json::json!({"remote": body.name, "location": recorded}),
    ))
}

pub async fn remove(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let remote: RemoteName = parse(&name)?;
    let was = blocking(&shared, Context::Other, move |s| {
        s.engine().remove_remote(&remote)
    })
    .await?;
    Ok(json(&serde_json::json!({"removed": name, "location": was})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushBody {
    remote: String,
    /// The branch's name at the remote (default: the same).
    #[serde(default, rename = "as")]
    as_branch: Option<String>,
    #[serde(default)]
    checkpoints: bool,
    #[serde(default)]
    force_with_lease: bool,
    #[serde(default)]
    force: bool,
}

pub async fn push(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    Body(body): Body<PushBody>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    let remote: RemoteName = parse(&body.remote)?;
    let opts = PushOptions {
        as_branch: body
            .as_branch
            .as_deref()
            .map(parse::<BranchName>)
            .transpose()?,
        checkpoints: body.checkpoints,
        force_with_lease: body.force_with_lease,
        force: body.force,
    };
    let report = transfer(&shared, move |s| {
        let r = Remote::open(s, &remote, ProgressSink::default())?;
        scion_remote::push(s, &r, &b, &opts, &*ProgressSink::default())
    })
    .await?;
    Ok(json(&report))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullBody {
    remote: String,
    /// The remote's branch: a branch name, or `db@branch` of the same database (default:
    /// the `{branch}` pulled into).
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    strategy: Strategy,
    #[serde(default)]
    fetch_only: bool,
    /// As for a merge: the remote's rows under ids the local branch also used are kept,
    /// with new ids.
    #[serde(default)]
    renumber: bool,
    /// Needed to move a protected branch.
    #[serde(default)]
    force: bool,
}

pub async fn pull(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    Body(body): Body<PullBody>,
) -> ApiResult<Response> {
    let into: BranchRef = parse(&branch)?;
    let theirs: BranchRef = match &body.from {
        None => into.clone(),
        Some(f) if f.contains('@') => parse(f)?,
        Some(f) => parse(&format!("{}@{f}", into.db))?,
    };
    if theirs.db != into.db {
        return Err(ApiError::new(
            Exit::InvalidInput,
            "invalid_input",
            format!("{theirs} is a branch of another database than {into}"),
            None,
        ));
    }
    if !body.fetch_only {
        refuse_live(&shared, &into.to_string())?;
    }
    let remote: RemoteName = parse(&body.remote)?;
    let opts = PullOptions {
        into: Some(into.branch.clone()),
        merge: MergeOptions {
            strategy: body.strategy,
            allow_protected: body.force,
            renumber: body.renumber,
            ..Default::default()
        },
        fetch_only: body.fetch_only,
    };
    let report = transfer(&shared, move |s| {
        let r = Remote::open(s, &remote, ProgressSink::default())?;
        scion_remote::pull(s, &r, &theirs, &opts, &*ProgressSink::default())
    })
    .await?;
    Ok(json(&report))
}

/// Run a transfer off the async threads, its errors answered as the CLI reports them.
async fn transfer<T: Send + 'static>(
    shared: &Arc<Shared>,
    f: impl FnOnce(&Scion) -> Result<T, RemoteError> + Send + 'static,
) -> ApiResult<T> {
    on_engine(shared, f).await?.map_err(|e| match e {
        RemoteError::Engine(e) => ApiError::from(e),
        RemoteError::Core(e) => ApiError::core(&e, Context::Merge),
        RemoteError::Merge(e) => super::merge::api_error(&e),
        other => match other.describe() {
            Some(d) => ApiError::new(d.exit, d.code, other.to_string(), d.hint),
            None => ApiError::new(Exit::InvalidInput, "invalid_input", other.to_string(), None),
        },
    })
}
