//! Errors as the API returns them: `{"error": {"code", "message", "retryable", "hint",
//! "exit_code"}}`, with the same closed set of codes (and exit codes) as the CLI's `--json`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use scion_capture::CaptureError;
use scion_core::described::{describe, Context, Exit};
use scion_core::{CoreError, EngineError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
    pub retryable: bool,
    pub hint: Option<String>,
    pub exit_code: u8,
    /// On a scoped token's 403: the grant the call needed (`shop@main:write`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_grant: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

/// An error answered to a request.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: ErrorBody,
}

fn status_of(exit: Exit) -> StatusCode {
    match exit {
        Exit::NotFound => StatusCode::NOT_FOUND,
        Exit::AlreadyExists | Exit::Conflict | Exit::Refused => StatusCode::CONFLICT,
        Exit::MergeStopped => StatusCode::UNPROCESSABLE_ENTITY,
        Exit::InvalidInput => StatusCode::BAD_REQUEST,
        Exit::Transient => StatusCode::SERVICE_UNAVAILABLE,
        Exit::Unsupported => StatusCode::NOT_IMPLEMENTED,
        // Corrupt, Failure, and any exit a newer engine adds: a server-side failure.
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl ApiError {
    pub fn new(exit: Exit, code: &str, message: impl Into<String>, hint: Option<String>) -> Self {
        ApiError {
            status: status_of(exit),
            body: ErrorBody {
                code: code.to_string(),
                message: message.into(),
                retryable: exit == Exit::Transient,
                hint,
                exit_code: exit as u8,
                missing_grant: None,
            },
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(Exit::InvalidInput, "invalid_input", message, None)
    }

    pub(crate) fn not_found(code: &str, message: impl Into<String>) -> Self {
        ApiError::new(Exit::NotFound, code, message, None)
    }

    pub(crate) fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    pub fn core(e: &CoreError, context: Context) -> Self {
        let d = describe(e, context);
        let mut err = ApiError::new(d.exit, d.code, e.to_string(), d.hint);
        err.body.retryable = e.is_retryable();
        err
    }
}

impl From<CoreError> for ApiError {
    fn from(e: CoreError) -> Self {
        ApiError::core(&e, Context::Other)
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        ApiError::core(&e.into(), Context::Other)
    }
}

impl From<CaptureError> for ApiError {
    fn from(e: CaptureError) -> Self {
        ApiError::capture(&e)
    }
}

impl ApiError {
    pub fn capture(e: &CaptureError) -> Self {
        match e {
            CaptureError::Core(c) => ApiError::core(c, Context::Other),
            CaptureError::Fenced { .. } => ApiError::new(
                Exit::Conflict,
                "fenced",
                e.to_string(),
                Some(
                    "the session can no longer commit; close it and open a new one: its \
                     uncommitted writes stay in the checkout, and the new session commits \
                     them if the head has not moved since (otherwise it refuses the \
                     changed checkout)"
                        .into(),
                ),
            ),
            CaptureError::NotWal { .. } => {
                ApiError::new(Exit::Refused, "not_wal", e.to_string(), None)
            }
            CaptureError::Unsettled { .. } => ApiError::new(
                Exit::Transient,
                "capture_unsettled",
                e.to_string(),
                Some("retry".into()),
            ),
            CaptureError::Sqlite { .. } => {
                ApiError::new(Exit::Failure, "sqlite_error", e.to_string(), None)
            }
            CaptureError::Io { .. } => {
                ApiError::new(Exit::Failure, "io_error", e.to_string(), None)
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorEnvelope { error: self.body };
        crate::answer::json_with(self.status, &body)
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// What can stop the daemon from starting or serving.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{0}")]
    Config(String),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("another `scion serve` already listens on {0}")]
    AlreadyServing(std::path::PathBuf),
}
