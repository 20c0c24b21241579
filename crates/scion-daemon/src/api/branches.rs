//! The at-rest operations: databases, branches, checkpoints, fork, rollback, promote,
//! destroy, touch, protect, diff, export and GC. Each runs the engine's own operation;
//! a branch under a live session is refused by its lease, with a hint naming the session.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use scion_core::described::{Context, Exit};
use scion_core::diff::DiffOptions;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::ForkOptions;
use scion_core::{BranchName, BranchRef, CheckpointName, DbName, Owner, Target};
use serde::Deserialize;

use crate::answer::{json, json_with};
use crate::authorize::Caller;
use crate::error::{ApiError, ApiResult};
use crate::events::EventKind;
use crate::handler::{blocking, duration, parse, Body, MaybeBody, Query};
use crate::state::Shared;
use crate::transport::Peer;

pub async fn status(State(shared): State<Arc<Shared>>) -> ApiResult<Response> {
    let report = blocking(&shared, Context::Other, |s| s.status()).await?;
    Ok(json(&report))
}

/// The databases the caller can reach: all of them for a full caller, for a scoped token
/// those some grant names (a token never learns what else the store holds).
pub async fn databases(
    State(shared): State<Arc<Shared>>,
    axum::Extension(caller): axum::Extension<Caller>,
) -> ApiResult<Response> {
    let dbs = blocking(&shared, Context::Other, |s| s.engine().list_databases()).await?;
    let names: Vec<String> = dbs
        .iter()
        .map(|d| d.to_string())
        .filter(|d| caller.reaches_database(d))
        .collect();
    Ok(json(&serde_json::json!({ "databases": names })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    name: String,
    /// A SQLite file on the daemon's host to import (only over the unix socket).
    from: Option<PathBuf>,
}

fn socket_only(peer: &Peer, what: &str) -> ApiResult<()> {
    match peer {
        Peer::Unix { .. } => Ok(()),
        Peer::Tcp(_) => Err(ApiError::new(
            Exit::Refused,
            "socket_only",
            format!("{what} names a path on the daemon's host: only over the unix socket"),
            None,
        )
        .with_status(StatusCode::FORBIDDEN)),
    }
}

pub async fn create(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Body(body): Body<CreateBody>,
) -> ApiResult<Response> {
    let db: DbName = parse(&body.name)?;
    if body.from.is_some() {
        socket_only(&peer, "create --from")?;
    }
    let report = blocking(&shared, Context::Other, move |s| {
        s.engine().create(&db, body.from.as_deref())
    })
    .await?;
    Ok(json_with(StatusCode::CREATED, &report))
}

pub async fn branches(
    State(shared): State<Arc<Shared>>,
    Path(db): Path<String>,
) -> ApiResult<Response> {
    let db: DbName = parse(&db)?;
    let name = db.to_string();
    let list = blocking(&shared, Context::Other, move |s| s.branch_statuses(&db)).await?;
    // Each branch with the id of its live session, if it has one.
    let list: Vec<serde_json::Value> = list
        .into_iter()
        .map(|b| {
            let session = shared.sessions.on_branch(&format!("{name}@{}", b.branch));
            let mut v = serde_json::to_value(b).unwrap_or_default();
            v["session"] = serde_json::json!(session);
            v
        })
        .collect();
    Ok(json(&serde_json::json!({ "branches": list })))
}

pub async fn branch(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    let status = blocking(&shared, Context::Other, move |s| s.branch_status(&b)).await?;
    let session = shared.sessions.on_branch(&branch);
    let mut v = serde_json::to_value(status).unwrap_or_default();
    v["session"] = serde_json::json!(session);
    Ok(json(&v))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkBody {
    /// `db[@branch]` to fork from.
    source: String,
    /// The new branch's name (in the source's database).
    name: String,
    /// A checkpoint of the source to fork at (default: its head).
    at: Option<String>,
    /// Let `gc` (and the janitor) reap the fork after this long without activity.
    ttl: Option<String>,
    /// Entries kept on the new branch (who made it and why).
    #[serde(default)]
    meta: BTreeMap<String, String>,
    /// Who the new branch belongs to: a front end with owners (`scion mcp`) lets its agent
    /// change only the branches it owns.
    owner: Option<String>,
    /// A branch for one test or attempt: once destroyed or reaped, its history goes with
    /// it and `gc` reclaims its pages at once.
    #[serde(default)]
    ephemeral: bool,
}

pub async fn fork(
    State(shared): State<Arc<Shared>>,
    Body(body): Body<ForkBody>,
) -> ApiResult<Response> {
    let src: BranchRef = parse(&body.source)?;
    let new: BranchName = parse(&body.name)?;
    let at = body
        .at
        .as_deref()
        .map(parse::<CheckpointName>)
        .transpose()?;
    let ttl = body.ttl.as_deref().map(duration).transpose()?;
    let owner = body.owner.as_deref().map(parse::<Owner>).transpose()?;
    let report = blocking(&shared, Context::Other, move |s| {
        s.engine().fork(
            &src,
            &new,
            ForkOptions {
                at,
                ttl,
                meta: body.meta,
                owner,
                ephemeral: body.ephemeral,
            },
        )
    })
    .await?;
    shared.events.emit(
        EventKind::Forked,
        serde_json::to_value(&report).unwrap_or_default(),
    );
    Ok(json_with(StatusCode::CREATED, &report))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ForceQuery {
    #[serde(default)]
    force: bool,
}

pub async fn destroy(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    Query(q): Query<ForceQuery>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    refuse_live(&shared, &branch)?;
    let report = blocking(&shared, Context::Destroy, move |s| s.destroy(&b, q.force)).await?;
    shared.events.emit(
        EventKind::Destroyed,
        serde_json::to_value(&report).unwrap_or_default(),
    );
    Ok(json(&report))
}

/// A branch under a live session of this daemon: at-rest changes go through the session.
/// Refused as the engine refuses another holder's lease, naming the session.
pub(crate) fn refuse_live(shared: &Shared, branch: &str) -> ApiResult<()> {
    match shared.sessions.on_branch(branch) {
        Some(id) => Err(ApiError::from(scion_core::EngineError::LeaseHeld {
            branch: parse::<BranchRef>(branch)?,
            holder: format!("{}#{id}", shared.scion.engine().holder()),
            expires: "while the session is open".into(),
        })),
        None => Ok(()),
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CheckoutBody {
    #[serde(default)]
    force: bool,
    #[serde(default)]
    read_only: bool,
    /// With `read_only`: the checkpoint to check out.
    checkpoint: Option<String>,
}

pub async fn checkout(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    MaybeBody(body): MaybeBody<CheckoutBody>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    let checkpoint = body
        .checkpoint
        .as_deref()
        .map(parse::<CheckpointName>)
        .transpose()?;
    if !body.read_only {
        refuse_live(&shared, &branch)?;
    }
    let report = blocking(&shared, Context::Other, move |s| {
        if body.read_only {
            s.checkout_read_only(&Target {
                branch: b,
                checkpoint,
            })
        } else {
            s.checkout(&b, body.force)
        }
    })
    .await?;
    Ok(json(&report))
}

/// End the branch's writable checkout on this host (`scion checkout --release`).
pub async fn release_checkout(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    Query(q): Query<ForceQuery>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    refuse_live(&shared, &branch)?;
    let report = blocking(&shared, Context::Release, move |s| {
        s.release_checkout(&b, q.force)
    })
    .await?;
    Ok(json(&report))
}

pub async fn checkpoints(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    let list = blocking(&shared, Context::Other, move |s| {
        s.engine().list_checkpoints(&b)
    })
    .await?;
    let v: Vec<serde_json::Value> = list
        .into_iter()
        .map(|(name, c)| {
            serde_json::json!({"name": name.to_string(), "version": c.version, "created_at": c.created_at, "meta": c.meta})
        })
        .collect();
    Ok(json(&serde_json::json!({ "checkpoints": v })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointBody {
    name: String,
    /// Entries kept with the checkpoint.
    #[serde(default)]
    meta: BTreeMap<String, String>,
}

pub async fn checkpoint(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    Body(body): Body<CheckpointBody>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    let name: CheckpointName = parse(&body.name)?;
    refuse_live(&shared, &branch)?;
    let report = blocking(&shared, Context::Other, move |s| {
        s.checkpoint(&b, &name, scion_core::CheckpointOptions { meta: body.meta })
    })
    .await?;
    shared.events.emit(
        EventKind::Checkpointed,
        serde_json::to_value(&report).unwrap_or_default(),
    );
    Ok(json_with(StatusCode::CREATED, &report))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct MoveBody {
    /// rollback: the checkpoint to go back to; promote: the branch to move.
    to: Option<String>,
    onto: Option<String>,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    no_backup: bool,
    backup_ttl: Option<String>,
}

fn move_options(body: &MoveBody) -> ApiResult<MoveOptions> {
    Ok(MoveOptions {
        force: body.force,
        no_backup: body.no_backup,
        backup_ttl: body.backup_ttl.as_deref().map(duration).transpose()?,
    })
}

pub async fn rollback(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    Body(body): Body<MoveBody>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    let to: CheckpointName = parse(
        body.to
            .as_deref()
            .ok_or_else(|| ApiError::invalid("rollback needs \"to\": a checkpoint name"))?,
    )?;
    let opts = move_options(&body)?;
    refuse_live(&shared, &branch)?;
    let report = blocking(&shared, Context::Rollback, move |s| {
        s.rollback(&b, &to, &opts)
    })
    .await?;
    shared.events.emit(
        EventKind::RolledBack,
        serde_json::to_value(&report).unwrap_or_default(),
    );
    Ok(json(&report))
}

pub async fn promote(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    Body(body): Body<MoveBody>,
) -> ApiResult<Response> {
    let src: BranchRef = parse(&branch)?;
    let onto: BranchName = parse(body.onto.as_deref().unwrap_or("main"))?;
    let opts = move_options(&body)?;
    refuse_live(&shared, &format!("{}@{onto}", src.db))?;
    let report = blocking(&shared, Context::Promote, move |s| {
        s.promote(&src, &onto, &opts)
    })
    .await?;
    shared.events.emit(
        EventKind::Promoted,
        serde_json::to_value(&report).unwrap_or_default(),
    );
    Ok(json(&report))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TouchBody {
    /// Set the TTL (`"2h"`), or clear it (`""`); absent: keep it.
    ttl: Option<String>,
}

pub async fn touch(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    MaybeBody(body): MaybeBody<TouchBody>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    let ttl = match body.ttl.as_deref() {
        None => None,
        Some("") => Some(None),
        Some(t) => Some(Some(duration(t)?)),
    };
    let r = blocking(&shared, Context::Other, move |s| s.engine().touch(&b, ttl)).await?;
    Ok(json(
        &serde_json::json!({"branch": branch, "touched_at": r.touched_at, "ttl_secs": r.ttl_secs}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtectBody {
    protected: bool,
}

pub async fn protect(
    State(shared): State<Arc<Shared>>,
    Path(branch): Path<String>,
    Body(body): Body<ProtectBody>,
) -> ApiResult<Response> {
    let b: BranchRef = parse(&branch)?;
    let on = body.protected;
    blocking(&shared, Context::Other, move |s| {
        s.engine().set_protected(&b, on)
    })
    .await?;
    Ok(json(
        &serde_json::json!({"branch": branch, "protected": on}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffQuery {
    from: String,
    to: String,
    table: Option<String>,
    #[serde(default)]
    sql: bool,
    #[serde(default)]
    rows: bool,
    limit: Option<usize>,
    /// Each side that is a branch head whose checkout on this host holds changes not
    /// checkpointed is read from that file (as `scion diff --working`).
    #[serde(default)]
    working: bool,
}

pub async fn diff(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<DiffQuery>,
) -> ApiResult<Response> {
    let (l, r): (Target, Target) = (parse(&q.from)?, parse(&q.to)?);
    let opts = DiffOptions {
        table: q.table,
        sql: q.sql,
        rows: q.rows.then_some(q.limit.unwrap_or(100)),
    };
    let report = blocking(&shared, Context::Other, move |s| match q.working {
        true => s.diff_working(&l, &r, &opts),
        false => s.diff(&l, &r, &opts),
    })
    .await?;
    Ok(json(&report))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportBody {
    target: String,
    /// A path on the daemon's host.
    path: PathBuf,
    #[serde(default)]
    force: bool,
}

pub async fn export(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Body(body): Body<ExportBody>,
) -> ApiResult<Response> {
    socket_only(&peer, "export")?;
    let t: Target = parse(&body.target)?;
    let report = blocking(&shared, Context::Other, move |s| {
        s.export(&t, &body.path, body.force)
    })
    .await?;
    Ok(json(&report))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct GcBody {
    grace: Option<String>,
    #[serde(default)]
    force: bool,
}

pub async fn gc(
    State(shared): State<Arc<Shared>>,
    MaybeBody(body): MaybeBody<GcBody>,
) -> ApiResult<Response> {
    let grace = match body.grace.as_deref() {
        Some(g) => duration(g)?,
        None => shared.scion.engine().min_grace(),
    };
    let report = crate::janitor::gc(&shared, grace, body.force).await?;
    Ok(json(&report))
}
