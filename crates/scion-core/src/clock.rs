//! Timestamps as they appear in JSON objects: RFC 3339, UTC, milliseconds.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339(s).ok()
}

/// Parse a duration such as `30s`, `2h`, `1h30m`, `7d`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, crate::CoreError> {
    humantime::parse_duration(s).map_err(|e| crate::CoreError::InvalidDuration {
        value: s.to_string(),
        reason: e.to_string(),
    })
}

/// `90` -> `1m 30s`.
pub fn format_duration(secs: u64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(secs)).to_string()
}
