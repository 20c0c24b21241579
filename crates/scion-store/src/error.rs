use std::io;

/// Errors a backend returns. Callers match on the variant; [`StoreError::is_retryable`]
/// says whether trying the same call again can help.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("object not found: {key}")]
    NotFound { key: String },
    /// A create-only put found the key taken.
    #[error("object already exists: {key}")]
    AlreadyExists { key: String },
    /// A compare-and-swap named a state the object is no longer in (or the object is gone).
    #[error("conflict on {key}: the object changed since it was read")]
    Conflict { key: String },
    #[error("invalid object key {key:?}: {reason}")]
    InvalidKey { key: String, reason: &'static str },
    /// A failure that may pass: a timeout, a dropped connection, a 5xx.
    #[error("transient store failure on {key}: {message}")]
    Transient { key: String, message: String },
    #[error("store i/o error on {key}: {source}")]
    Io {
        key: String,
        #[source]
        source: io::Error,
    },
    /// A ranged read past the end of an object: the object is shorter than its reader
    /// expected, which for immutable objects means damage, never a short read.
    #[error("range {start}..{end} out of bounds for {key} ({size} bytes)")]
    OutOfRange {
        key: String,
        start: u64,
        end: u64,
        size: u64,
    },
    /// The store refused the credentials (or has none): retrying cannot help.
    #[error("the store refused access to {key}: {message}")]
    Unauthorized { key: String, message: String },
    /// The store is configured wrongly (bucket, endpoint, options): fix and retry.
    #[error("store configuration: {0}")]
    Config(String),
    #[error("store error: {0}")]
    Other(String),
}

impl StoreError {
    /// Whether repeating the same request may succeed. A conflict is never retryable:
    /// the caller must re-read and decide again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Transient { .. })
    }

    #[cfg(feature = "conformance")]
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound { .. })
    }

    pub(crate) fn io(key: &str, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::NotFound {
            return StoreError::NotFound {
                key: key.to_string(),
            };
        }
        StoreError::Io {
            key: key.to_string(),
            source,
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;
