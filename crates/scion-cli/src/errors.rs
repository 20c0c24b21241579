//! Stable exit codes and messages that say what to do next (the codes and hints are the
//! engine's, shared with the daemon and the SDKs).

use std::process::ExitCode;

pub use scion_core::described::{describe, describe_engine, Context, Exit};
use scion_core::{CoreError, EngineError};
use scion_daemon::client::ClientError;

/// A command this binary was built without (a cargo feature left off).
#[derive(Debug, thiserror::Error)]
#[error("this scion was built without {what}")]
pub struct NotBuilt {
    pub what: &'static str,
    pub hint: &'static str,
}

/// Print `err` as the CLI reports a failure and give its exit code.
pub fn report(err: &anyhow::Error, json: bool, context: Context) -> ExitCode {
    let (exit, code, hint, retryable) = classify(err, context);
    let message = format!("{err:#}");
    if json {
        let v = serde_json::json!({"error": {
            "code": code,
            "message": message,
            "hint": hint,
            "exit_code": exit,
            "retryable": retryable,
        }});
        eprintln!("{v}");
    } else {
        eprintln!("error: {message}");
        if let Some(h) = hint {
            eprintln!("hint: {h}");
        }
    }
    ExitCode::from(exit)
}

/// An error's exit code, stable code, hint and whether a retry may succeed.
fn classify(err: &anyhow::Error, context: Context) -> (u8, String, Option<String>, bool) {
    if let Some(e) = err.downcast_ref::<CoreError>() {
        let d = describe(e, context);
        (d.exit as u8, d.code.to_string(), d.hint, e.is_retryable())
    } else if let Some(e) = err.downcast_ref::<EngineError>() {
        let d = describe_engine(e);
        (d.exit as u8, d.code.to_string(), d.hint, e.is_retryable())
    } else if let Some(e) = err.downcast_ref::<scion_core::names::NameError>() {
        // A name given on the command line: the engine's invalid name, with its code.
        let e = EngineError::from(e.clone());
        let d = describe_engine(&e);
        (d.exit as u8, d.code.to_string(), d.hint, e.is_retryable())
    } else if let Some(e) = err.downcast_ref::<scion_merge::MergeError>() {
        let d = e.describe();
        (d.exit as u8, d.code.to_string(), d.hint, e.is_retryable())
    } else if let Some(d) = err
        .downcast_ref::<scion_remote::RemoteError>()
        .and_then(scion_remote::RemoteError::describe)
    {
        (d.exit as u8, d.code.to_string(), d.hint, false)
    } else if let Some(e) = err.downcast_ref::<crate::cli_merge::MergeStopped>() {
        (
            Exit::MergeStopped as u8,
            "merge_conflicts".to_string(),
            Some(e.hint.clone()),
            false,
        )
    } else if let Some(e) = err.downcast_ref::<crate::cli_vfs::SqlFailure>() {
        let d = &e.failure.described;
        (
            d.exit as u8,
            d.code.to_string(),
            d.hint.clone(),
            matches!(d.exit, Exit::Conflict | Exit::Transient),
        )
    } else if let Some(e) = err.downcast_ref::<NotBuilt>() {
        (
            Exit::Unsupported as u8,
            "not_built".to_string(),
            Some(e.hint.to_string()),
            false,
        )
    } else if let Some(e) = err.downcast_ref::<ClientError>() {
        match e {
                // The daemon's answer carries the same codes and hints as a local failure.
                ClientError::Api { body, .. } => (
                    body.exit_code,
                    body.code.clone(),
                    body.hint.clone(),
                    body.retryable,
                ),
                ClientError::Connect { .. } => (
                    Exit::Transient as u8,
                    "daemon_unreachable".to_string(),
                    Some("start it with `scion serve` (same --store), or point --socket / SCION_SOCKET at its socket".into()),
                    true,
                ),
                ClientError::Http(_) => (Exit::Failure as u8, "daemon_error".to_string(), None, false),
            }
    } else {
        (Exit::Failure as u8, "error".to_string(), None, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_left_out_of_the_build_is_unsupported_with_a_hint() {
        let err = anyhow::Error::from(NotBuilt {
            what: "its benchmarks",
            hint: "build it with the bench feature",
        });
        let (exit, code, hint, retryable) = classify(&err, Context::Other);
        assert_eq!(exit, Exit::Unsupported as u8);
        assert_eq!(exit, 10);
        assert_eq!(code, "not_built");
        assert_eq!(hint.as_deref(), Some("build it with the bench feature"));
        assert!(!retryable);
        assert_eq!(
            err.to_string(),
            "this scion was built without its benchmarks"
        );
    }
}
