//! Who is calling, and whether a scoped token may make this call. The transport's guard
//! decides the caller (a same-user socket peer or the daemon's own token: everything;
//! a scoped token: its grants). This layer runs once the route is matched, looks the route
//! up in [`crate::api::routes`], and refuses a scoped token whose grants do not cover what
//! the call touches (403, the missing grant named, nothing done). Forks a token makes are
//! recorded as its own, and a token may write the branches it owns wherever it may fork.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use scion_core::described::Exit;
use scion_core::BranchRef;
use serde_json::Value;

use crate::api::routes::{self, Need};
use crate::error::ApiError;
use crate::state::Shared;
use crate::tokens::{TokenRecord, Verb};

/// Who a request comes from.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    /// A same-user socket peer or a holder of the daemon's own token: every route. `actor`
    /// is what the client named itself (`X-Scion-Actor`), for head histories.
    Full { actor: Option<String> },
    /// A scoped token: what its grants cover.
    Scoped(TokenRecord),
}

impl Caller {
    pub fn actor(&self) -> Option<String> {
        match self {
            Caller::Full { actor } => actor.clone(),
            Caller::Scoped(t) => Some(t.actor()),
        }
    }

    /// Whether any grant reaches some branch of `db` (what `GET /v1/databases` lists).
    pub fn reaches_database(&self, db: &str) -> bool {
        match self {
            Caller::Full { .. } => true,
            Caller::Scoped(t) => t.grants.iter().any(|g| g.pattern.matches_database(db)),
        }
    }
}

/// The grant a call lacks: `shop@main:write`.
struct Missing(String);

fn missing(db: &str, branch: &str, verb: Verb) -> Missing {
    Missing(format!("{db}@{branch}:{verb}"))
}

/// `db@branch[@checkpoint]` or `db`, as the API takes branches.
fn split(target: &str) -> (String, String) {
    let mut parts = target.splitn(3, '@');
    let db = parts.next().unwrap_or_default().to_string();
    let branch = parts.next().unwrap_or("main").to_string();
    (db, branch)
}

struct Check<'a> {
    shared: &'a Arc<Shared>,
    token: &'a TokenRecord,
}

impl Check<'_> {
    fn granted(&self, verb: Verb, db: &str, branch: &str) -> bool {
        self.token.grants.iter().any(|g| g.allows(verb, db, branch))
    }

    /// The branch's owner and whether it is a safety fork (a destroyed branch: its owner
    /// from its history).
    async fn facts(&self, db: &str, branch: &str) -> (Option<String>, bool) {
        let Ok(b) = format!("{db}@{branch}").parse::<BranchRef>() else {
            return (None, false);
        };
        let scion = self.shared.scion.clone();
        tokio::task::spawn_blocking(move || match scion.branch_status(&b) {
            Ok(s) => (s.owner.map(|o| o.to_string()), s.safety.is_some()),
            Err(_) => (
                scion
                    .engine()
                    .head_history(&b, Some(0))
                    .ok()
                    .and_then(|h| h.owner)
                    .map(|o| o.to_string()),
                false,
            ),
        })
        .await
        .unwrap_or((None, false))
    }

    /// `verb` on the branch: granted, or (up to `write`) the token's own branch where it may
    /// fork.
    async fn branch(&self, verb: Verb, db: &str, branch: &str) -> Result<(), Missing> {
        if self.granted(verb, db, branch) {
            return Ok(());
        }
        if verb <= Verb::Write
            && self.granted(Verb::Fork, db, branch)
            && self.owns(db, branch).await
        {
            return Ok(());
        }
        Err(missing(db, branch, verb))
    }

    async fn owns(&self, db: &str, branch: &str) -> bool {
        self.facts(db, branch).await.0.as_deref() == Some(self.token.actor().as_str())
    }

    /// What `need` asks of this call; the body rewritten when the call makes a branch the
    /// token will own.
    async fn need(
        &self,
        need: Need,
        params: &HashMap<String, String>,
        query: &HashMap<String, String>,
        body: &mut Value,
    ) -> Result<bool, Missing> {
        let path_branch = params.get("branch").map(|b| split(b));
        let forced = body["force"] == Value::Bool(true)
            || query.get("force").map(String::as_str) == Some("true");
        // Force (past protection, safety forks) is an admin's on the branch it is used on.
        if forced {
            let (db, branch) = match (&path_branch, need) {
                (_, Need::Promote) => (
                    path_branch.clone().unwrap_or_default().0,
                    body["onto"].as_str().unwrap_or("main").to_string(),
                ),
                (Some(b), _) => b.clone(),
                (None, _) => split(body["target"].as_str().unwrap_or_default()),
            };
            if !self.granted(Verb::Admin, &db, &branch) {
                return Err(missing(&db, &branch, Verb::Admin));
            }
        }
        let pb = || path_branch.clone().unwrap_or_default();
        match need {
            Need::AnyToken => Ok(false),
            Need::Everything(verb) => {
                let ok = self
                    .token
                    .grants
                    .iter()
                    .any(|g| g.verb >= verb && g.pattern.matches_everything());
                ok.then_some(false).ok_or_else(|| missing("*", "*", verb))
            }
            Need::Database(verb) => {
                let db = params.get("db").cloned().unwrap_or_default();
                let ok = self
                    .token
                    .grants
                    .iter()
                    .any(|g| g.verb >= verb && g.pattern.matches_database(&db));
                ok.then_some(false).ok_or_else(|| missing(&db, "*", verb))
            }
            Need::Branch(verb) => {
                let (db, branch) = pb();
                self.branch(verb, &db, &branch).await.map(|_| false)
            }
            Need::Checkout => {
                let (db, branch) = pb();
                let verb = if body["read_only"] == Value::Bool(true) {
                    Verb::Read
                } else {
                    Verb::Write
                };
                self.branch(verb, &db, &branch).await.map(|_| false)
            }
            Need::Fork => {
                let (db, from) = split(body["source"].as_str().unwrap_or_default());
                let name = body["name"].as_str().unwrap_or_default().to_string();
                self.fork(body, &db, &from, &name).await
            }
            Need::SessionOpen => {
                let db = body["db"].as_str().unwrap_or_default().to_string();
                match body["fork_from"].as_str().map(str::to_string) {
                    Some(from) => {
                        let (from, _) = from.split_once('@').unwrap_or((&from, ""));
                        let name = body["branch"].as_str().unwrap_or("s-").to_string();
                        self.fork(body, &db, from, &name).await
                    }
                    None => {
                        let branch = body["branch"].as_str().unwrap_or("main").to_string();
                        self.branch(Verb::Write, &db, &branch).await.map(|_| false)
                    }
                }
            }
            Need::Merge => {
                let (db, branch) = pb();
                let from = body["from"].as_str().unwrap_or_default();
                // Every version the merge reads needs the read grant: the source, and a base
                // named in place of the found one (its rows come back as conflicts' base
                // values).
                let same_db = |named: &str| {
                    if named.contains('@') {
                        split(named)
                    } else {
                        (db.clone(), named.to_string())
                    }
                };
                let (from_db, from_branch) = same_db(from);
                self.branch(Verb::Read, &from_db, &from_branch).await?;
                if let Some(base) = body["base"].as_str() {
                    let (base_db, base_branch) = same_db(base);
                    self.branch(Verb::Read, &base_db, &base_branch).await?;
                }
                let dry = body["dry_run"] == Value::Bool(true);
                let verb = if dry { Verb::Read } else { Verb::Write };
                self.branch(verb, &db, &branch).await.map(|_| false)
            }
            Need::Promote => {
                let (db, branch) = pb();
                self.branch(Verb::Read, &db, &branch).await?;
                let onto = body["onto"].as_str().unwrap_or("main").to_string();
                if self.granted(Verb::Merge, &db, &onto) {
                    Ok(false)
                } else {
                    Err(missing(&db, &onto, Verb::Merge))
                }
            }
            Need::Touch => {
                let (db, branch) = pb();
                self.branch(Verb::Write, &db, &branch).await?;
                let shortens = !body["ttl"].is_null() && !self.owns(&db, &branch).await;
                if shortens && !self.granted(Verb::Admin, &db, &branch) {
                    return Err(missing(&db, &branch, Verb::Admin));
                }
                Ok(false)
            }
            Need::Destroy => {
                let (db, branch) = pb();
                self.branch(Verb::Write, &db, &branch).await?;
                let safety = self.facts(&db, &branch).await.1;
                if safety && !self.granted(Verb::Admin, &db, &branch) {
                    return Err(missing(&db, &branch, Verb::Admin));
                }
                Ok(false)
            }
            Need::Session(verb) => {
                let id = params.get("id").cloned().unwrap_or_default();
                let branch = self
                    .shared
                    .sessions
                    .resolve(&id)
                    .ok()
                    .and_then(|id| self.shared.sessions.list().into_iter().find(|s| s.id == id))
                    .map(|s| s.branch);
                // An unknown session: answered by the route itself (404), nothing to guard.
                let Some(branch) = branch else {
                    return Ok(false);
                };
                let (db, branch) = split(&branch);
                self.branch(verb, &db, &branch).await.map(|_| false)
            }
            Need::Diff => {
                for side in ["from", "to"] {
                    let (db, branch) =
                        split(query.get(side).map(String::as_str).unwrap_or_default());
                    self.branch(Verb::Read, &db, &branch).await?;
                }
                Ok(false)
            }
            Need::Export => {
                let (db, branch) = split(body["target"].as_str().unwrap_or_default());
                self.branch(Verb::Read, &db, &branch).await.map(|_| false)
            }
            Need::Query => {
                let (db, branch) =
                    split(query.get("target").map(String::as_str).unwrap_or_default());
                self.branch(Verb::Read, &db, &branch).await.map(|_| false)
            }
        }
    }

    /// Fork `db@from` as `db@name`: `fork` on both; the new branch is the token's.
    async fn fork(
        &self,
        body: &mut Value,
        db: &str,
        from: &str,
        name: &str,
    ) -> Result<bool, Missing> {
        self.branch(Verb::Fork, db, from).await?;
        if !self.granted(Verb::Fork, db, name) {
            return Err(missing(db, name, Verb::Fork));
        }
        body["owner"] = Value::String(self.token.actor());
        Ok(true)
    }
}

/// Refuse a scoped token what its grants do not cover; let every other caller through.
pub(crate) async fn authorize(
    State(shared): State<Arc<Shared>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(Caller::Scoped(token)) = req.extensions().get::<Caller>().cloned() else {
        return next.run(req).await;
    };
    let method = req.method().as_str().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .and_then(|p| routes::find(&method, p.as_str()));
    let Some(route) = route else {
        return refuse(
            &shared,
            &token,
            "this route is not open to scoped tokens",
            None,
        );
    };
    let (mut parts, body) = req.into_parts();
    let params = path_params(&mut parts).await.unwrap_or_default();
    let query: HashMap<String, String> =
        parts.uri.query().and_then(query_pairs).unwrap_or_default();
    let bytes = match axum::body::to_bytes(body, crate::idempotency::MAX_BODY).await {
        Ok(b) => b,
        Err(_) => return ApiError::invalid("request body over 1 MiB").into_response(),
    };
    let mut json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let check = Check {
        shared: &shared,
        token: &token,
    };
    match check.need(route.need, &params, &query, &mut json).await {
        Ok(rewritten) => {
            let bytes = if rewritten {
                axum::body::Bytes::from(json.to_string())
            } else {
                bytes
            };
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Err(Missing(grant)) => refuse(
            &shared,
            &token,
            &format!("token {} has no grant {grant}", token.name),
            Some(grant),
        ),
    }
}

async fn path_params(parts: &mut axum::http::request::Parts) -> Option<HashMap<String, String>> {
    let raw =
        <RawPathParams as axum::extract::FromRequestParts<()>>::from_request_parts(parts, &())
            .await
            .ok()?;
    Some(
        raw.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// `a=1&b=x%40y` as pairs, percent-decoded.
fn query_pairs(q: &str) -> Option<HashMap<String, String>> {
    let uri: axum::http::Uri = format!("/?{q}").parse().ok()?;
    axum::extract::Query::<HashMap<String, String>>::try_from_uri(&uri)
        .ok()
        .map(|axum::extract::Query(m)| m)
}

fn refuse(shared: &Shared, token: &TokenRecord, message: &str, grant: Option<String>) -> Response {
    shared.metrics.refuse("missing_grant");
    let hint = match &grant {
        Some(g) => format!(
            "create a token with --grant '{g}' (scion token create), or work within this token's grants: {}",
            token
                .grants
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => "use an unscoped client (the unix socket without --socket-tokens)".to_string(),
    };
    let mut e = ApiError::new(Exit::Refused, "forbidden", message, Some(hint))
        .with_status(StatusCode::FORBIDDEN);
    e.body.missing_grant = grant;
    e.into_response()
}
