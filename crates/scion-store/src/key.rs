use crate::StoreError;

/// Object keys are relative, `/`-separated paths of plain segments. Refusing anything else
/// here means no backend can be tricked into writing outside its root.
pub(crate) fn validate_key(key: &str) -> Result<(), StoreError> {
    let bad = |reason| {
        Err(StoreError::InvalidKey {
            key: key.to_string(),
            reason,
        })
    };
    if key.is_empty() {
        return bad("empty key");
    }
    if key.len() > 1024 {
        return bad("longer than 1024 bytes");
    }
    if key.starts_with('/') || key.ends_with('/') {
        return bad("leading or trailing '/'");
    }
    for part in key.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return bad("empty, '.' or '..' path segment");
        }
        if part.starts_with('.') {
            return bad("segment starting with '.' is reserved for the backend");
        }
    }
    if key
        .bytes()
        .any(|b| b.is_ascii_control() || b == b'\\' || b >= 0x80)
    {
        return bad("control, non-ASCII or '\\' character");
    }
    Ok(())
}

/// A prefix for `list`: empty, or a valid key optionally followed by '/'.
pub(crate) fn validate_prefix(prefix: &str) -> Result<(), StoreError> {
    if prefix.is_empty() {
        return Ok(());
    }
    validate_key(prefix.strip_suffix('/').unwrap_or(prefix))
}
