//! How a VFS failure reaches SQLite (a result code and a message) and scion's front ends
//! (exit code, error code, hint).

use rusqlite::ffi;
use scion_described::{describe_engine, Described, Exit};
use scion_engine::EngineError;

/// A failure as SQLite sees it: a result code, and what to tell the user, with how
/// scion's front ends present it (exit code, error code, hint).
#[derive(Debug)]
pub(crate) struct VfsError {
    pub(crate) code: i32,
    pub(crate) message: String,
    pub(crate) described: Described,
}

impl VfsError {
    /// A failure the VFS finds itself: a head that moved is a conflict (retry the
    /// transaction); the rest are presented as SQLite errors.
    pub(crate) fn new(code: i32, message: impl Into<String>) -> Self {
        let described = match code {
            ffi::SQLITE_BUSY_SNAPSHOT => Described {
                exit: Exit::Conflict,
                code: "conflict",
                hint: Some("run the transaction again: it reads the new head".into()),
            },
            ffi::SQLITE_READONLY => Described {
                exit: Exit::InvalidInput,
                code: "invalid_input",
                hint: Some(
                    "fork it to write: `scion fork <db>@<branch> <new> --at <checkpoint>`".into(),
                ),
            },
            _ => Described {
                exit: Exit::Failure,
                code: "sqlite_error",
                hint: None,
            },
        };
        VfsError {
            code,
            message: message.into(),
            described,
        }
    }

    /// Presented as the engine presents `e` (its exit code, error code and hint).
    pub(crate) fn presented_as(mut self, e: &EngineError) -> Self {
        self.described = describe_engine(e);
        self
    }

    pub(crate) fn io(e: EngineError) -> Self {
        let code = if e.is_retryable() {
            ffi::SQLITE_BUSY
        } else {
            ffi::SQLITE_IOERR
        };
        let described = match &e {
            // Destroyed under a write: the write lost its race, as against another writer.
            EngineError::BeingDestroyed { .. } => Described {
                exit: Exit::Conflict,
                code: "conflict",
                hint: Some("the branch was destroyed while this transaction ran".into()),
            },
            e => describe_engine(e),
        };
        VfsError {
            code,
            message: format!("scion: {e}"),
            described,
        }
    }
}

pub(crate) type VfsResult<T> = Result<T, VfsError>;
