//! What every handler of the API uses: body and query extractors that answer in the API's
//! error format, engine work moved off the async threads, and name parsing.

use scion_core::names::NameError;
use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use scion_core::described::Context;
use scion_core::{CoreError, EngineError, Scion};
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ApiResult};
use crate::state::Shared;

/// A JSON body whose problems are answered in the API's error format.
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Body(v)),
            Err(e) => Err(ApiError::invalid(json_problem(&e))),
        }
    }
}

/// A JSON body that may be left out (then the defaults apply).
pub struct MaybeBody<T>(pub T);

impl<T: DeserializeOwned + Default, S: Send + Sync> FromRequest<S> for MaybeBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::invalid(format!("bad body: {}", e.body_text())))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(MaybeBody(T::default()));
        }
        serde_json::from_slice(&bytes)
            .map(MaybeBody)
            .map_err(|e| ApiError::invalid(format!("bad JSON body: {e}")))
    }
}

fn json_problem(e: &JsonRejection) -> String {
    format!("bad JSON body: {}", e.body_text())
}

/// Query parameters whose problems are answered in the API's error format.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Query(v)),
            Err(e) => Err(ApiError::invalid(query_problem(&e))),
        }
    }
}

fn query_problem(e: &QueryRejection) -> String {
    format!("bad query: {}", e.body_text())
}

/// Run `f` on the store off the async threads, as the request's actor. Its result comes
/// back as it is: each caller presents its own errors.
pub async fn on_engine<T: Send + 'static>(
    shared: &Arc<Shared>,
    f: impl FnOnce(&Scion) -> T + Send + 'static,
) -> ApiResult<T> {
    let scion = shared.scion.clone();
    let actor = crate::actor::current_actor();
    tokio::task::spawn_blocking(move || {
        scion_core::actor::acting_as(actor.as_deref(), || f(&scion))
    })
    .await
    .map_err(|e| {
        ApiError::new(
            scion_core::described::Exit::Failure,
            "internal",
            e.to_string(),
            None,
        )
    })
}

/// Run engine work off the async threads; its error is presented for `context`.
pub async fn blocking<T: Send + 'static, E: Into<CoreError> + Send + 'static>(
    shared: &Arc<Shared>,
    context: Context,
    f: impl FnOnce(&Scion) -> Result<T, E> + Send + 'static,
) -> ApiResult<T> {
    on_engine(shared, f)
        .await?
        .map_err(|e| ApiError::core(&e.into(), context))
}

/// Parse a name, answering a bad one as the API's error.
pub fn parse<T: std::str::FromStr<Err = NameError>>(s: &str) -> ApiResult<T> {
    s.parse()
        .map_err(|e: NameError| ApiError::from(EngineError::from(e)))
}

/// Parse a duration such as `30s`, `10m`, `2h`.
pub fn duration(s: &str) -> ApiResult<std::time::Duration> {
    scion_core::clock::parse_duration(s).map_err(ApiError::from)
}
