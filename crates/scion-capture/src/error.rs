use std::path::PathBuf;

use scion_core::{CoreError, EngineError};

/// What capture can fail at.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("{path} is not in WAL mode; live capture needs `PRAGMA journal_mode=WAL` (a checkout is made in WAL mode: something switched it)")]
    NotWal { path: PathBuf },
    #[error("the WAL of {path} kept changing while it was read; retry")]
    Unsettled { path: PathBuf },
    #[error("session fenced: {reason}")]
    Fenced { reason: String },
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("SQLite error on {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("i/o error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl From<EngineError> for CaptureError {
    fn from(e: EngineError) -> Self {
        CaptureError::Core(e.into())
    }
}

pub type CaptureResult<T> = Result<T, CaptureError>;

/// A name that is not one, as the engine reports it.
impl From<scion_core::names::NameError> for CaptureError {
    fn from(e: scion_core::names::NameError) -> Self {
        CaptureError::Core(scion_core::CoreError::Engine(e.into()))
    }
}
