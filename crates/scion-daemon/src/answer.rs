//! JSON answers: what every handler and every error turns into.

use axum::response::{IntoResponse, Response};

/// A `200 OK` JSON answer.
pub fn json<T: serde::Serialize>(v: &T) -> Response {
    json_with(axum::http::StatusCode::OK, v)
}

/// A JSON answer with `status`. The body ends in a newline, as a line of text does, so a
/// `curl` in a terminal ends its output on a line of its own.
pub fn json_with<T: serde::Serialize>(status: axum::http::StatusCode, v: &T) -> Response {
    match serde_json::to_vec(v) {
        Ok(mut body) => {
            body.push(b'\n');
            let content_type = (axum::http::header::CONTENT_TYPE, "application/json");
            (status, [content_type], body).into_response()
        }
        Err(e) => (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("could not encode the answer: {e}\n"),
        )
            .into_response(),
    }
}
