//! Sessions: open (optionally forking first), flush, close, list.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use scion_core::described::Context;
use scion_core::ForkOptions;
use scion_core::{BranchName, BranchRef, CheckpointName, DbName, Owner};
use serde::Deserialize;

use crate::answer::{json, json_with};
use crate::error::{ApiError, ApiResult};
use crate::events::EventKind;
use crate::handler::{blocking, duration, parse, Body, MaybeBody};
use crate::sessions::{self, CloseReason, SessionSpec};
use crate::state::Shared;
use crate::transport::Peer;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenBody {
    db: String,
    /// The branch to capture; with `fork_from`, the new branch's name (default: the
    /// session's id).
    branch: Option<String>,
    /// Fork this branch of `db` first (`main`, or `main@checkpoint`).
    fork_from: Option<String>,
    /// Close the session (and, for a fork, let the branch be reaped) after this long.
    ttl: Option<String>,
    /// Close the session after this long without a captured commit or a request.
    idle_timeout: Option<String>,
    /// Destroy the branch when the session closes.
    #[serde(default)]
    ephemeral: bool,
    /// With `fork_from`: mark the new branch ephemeral (its history goes with it when it
    /// is destroyed or reaped) without destroying it on close, as a test fork that may be
    /// kept for a look is.
    #[serde(default)]
    fork_ephemeral: bool,
    /// With `fork_from`: entries kept on the new branch.
    #[serde(default)]
    meta: BTreeMap<String, String>,
    /// Close the session when this process exits; `"peer"` binds it to the process on
    /// the other end of the unix socket.
    owner_pid: Option<serde_json::Value>,
    /// With `fork_from`: who the new branch belongs to (an agent's tag, see `scion mcp`).
    owner: Option<String>,
}

fn owner_process(peer: &Peer, v: &Option<serde_json::Value>) -> ApiResult<Option<u32>> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) if s == "peer" => match peer {
            Peer::Unix { pid: Some(p), .. } => Ok(Some(*p as u32)),
            _ => Err(ApiError::invalid(
                "owner_pid \"peer\" needs a unix socket connection with peer credentials",
            )),
        },
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0)
            .map(Some)
            .ok_or_else(|| ApiError::invalid("owner_pid is a process id")),
        _ => Err(ApiError::invalid("owner_pid is a process id or \"peer\"")),
    }
}

pub async fn open(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Body(body): Body<OpenBody>,
) -> ApiResult<Response> {
    let db: DbName = parse(&body.db)?;
    let id = sessions::new_id();
    let ttl = body.ttl.as_deref().map(duration).transpose()?;
    let idle_timeout = body.idle_timeout.as_deref().map(duration).transpose()?;
    let owner_pid = owner_process(&peer, &body.owner_pid)?;
    let branch_owner = body.owner.as_deref().map(parse::<Owner>).transpose()?;
    let branch_name: BranchName = match (&body.branch, &body.fork_from) {
        (Some(b), _) => parse(b)?,
        (None, Some(_)) => parse(&id)?,
        (None, None) => parse("main")?,
    };
    let branch = BranchRef::new(db.clone(), branch_name.clone());
    if body.ephemeral && body.fork_from.is_none() {
        return Err(ApiError::invalid(
            "an ephemeral session destroys its branch on close: open it on a fork (fork_from)",
        ));
    }
    super::branches::refuse_live(&shared, &branch.to_string())?;
    if body.fork_from.is_none()
        && (!body.meta.is_empty() || branch_owner.is_some() || body.fork_ephemeral)
    {
        return Err(ApiError::invalid(
            "meta, owner and fork_ephemeral are kept on a new branch: open the session on a fork (fork_from)",
        ));
    }
    let mut forked = None;
    if let Some(from) = &body.fork_from {
        let meta = body.meta.clone();
        let (src, at) = match from.split_once('@') {
            Some((b, c)) => (parse::<BranchName>(b)?, Some(parse::<CheckpointName>(c)?)),
            None => (parse::<BranchName>(from)?, None),
        };
        let src = BranchRef::new(db.clone(), src);
        let options = ForkOptions {
            at,
            ttl,
            meta,
            owner: branch_owner,
            // Its branch goes when the session closes: its history need not outlive it.
            ephemeral: body.ephemeral || body.fork_ephemeral,
        };
        let report = blocking(&shared, Context::Other, move |s| {
            s.engine().fork(&src, &branch_name, options)
        })
        .await?;
        shared.events.emit(
            EventKind::Forked,
            serde_json::to_value(&report).unwrap_or_default(),
        );
        forked = Some(report);
    }
    let spec = SessionSpec {
        branch: branch.clone(),
        ttl,
        idle_timeout,
        ephemeral: body.ephemeral,
        owner_pid,
        actor: crate::actor::current_actor(),
    };
    let start = {
        let shared = shared.clone();
        let id = id.clone();
        tokio::task::spawn_blocking(move || sessions::start(shared.session_deps(), id, spec))
            .await
            .map_err(|e| ApiError::invalid(e.to_string()))?
    };
    let info = match start {
        Ok(info) => info,
        Err(e) => {
            // A fork made for a session that could not start is not left behind.
            if forked.is_some() && body.ephemeral {
                let b = branch.clone();
                let _ = blocking(&shared, Context::Other, move |s| s.destroy(&b, false)).await;
            }
            return Err(e);
        }
    };
    shared.events.emit(
        EventKind::SessionOpened,
        serde_json::json!({"session": id, "branch": info.branch, "path": info.path, "version": info.durable_version, "attach": info.attach}),
    );
    let v = serde_json::json!({
        "id": info.id,
        "branch": info.branch,
        "path": info.path,
        "version": info.durable_version,
        "attach": info.attach,
        "forked": forked,
    });
    Ok(json_with(StatusCode::CREATED, &v))
}

pub async fn list(State(shared): State<Arc<Shared>>) -> Response {
    json(&serde_json::json!({ "sessions": shared.sessions.list() }))
}

pub async fn get(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<Response> {
    let id = shared.sessions.resolve(&id)?;
    Ok(json(&shared.sessions.get(&id)?))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FlushBody {
    /// Name the durable version as this checkpoint.
    checkpoint: Option<String>,
    #[serde(default)]
    meta: BTreeMap<String, String>,
}

pub async fn flush(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    MaybeBody(body): MaybeBody<FlushBody>,
) -> ApiResult<Response> {
    let checkpoint = match body.checkpoint.as_deref() {
        Some(name) => Some((parse::<CheckpointName>(name)?, body.meta)),
        None if !body.meta.is_empty() => {
            return Err(ApiError::invalid(
                "meta is kept with a checkpoint: name one",
            ))
        }
        None => None,
    };
    let id = shared.sessions.resolve(&id)?;
    let report = shared.sessions.flush(&id, checkpoint).await?;
    Ok(json(&report))
}

pub async fn close(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let id = shared.sessions.resolve(&id)?;
    let closed = shared.sessions.close(&id, CloseReason::Requested).await?;
    Ok(json(&closed))
}
