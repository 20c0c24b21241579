//! Timestamps as they appear in JSON objects: RFC 3339, UTC, milliseconds.

use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// Milliseconds since the Unix epoch (0 before it).
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub(crate) fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339(s).ok()
}

/// Parse a duration such as `30s`, `2h`, `1h30m`, `7d`; at most [`MAX_DURATION`].
pub fn parse_duration(s: &str) -> Result<std::time::Duration, crate::EngineError> {
    let d = humantime::parse_duration(s).map_err(|e| crate::EngineError::InvalidDuration {
        value: s.to_string(),
        reason: e.to_string(),
    })?;
    if d > MAX_DURATION {
        return Err(crate::EngineError::InvalidDuration {
            value: s.to_string(),
            reason: "longer than the limit of 100 years".to_string(),
        });
    }
    Ok(d)
}

/// `90` -> `1m 30s`.
pub fn format_duration(secs: u64) -> String {
    // humantime writes "7days 2h": the short units stay glued ("2h 30m"), the words get
    // their space ("7 days 2h", "1 month").
    humantime::format_duration(std::time::Duration::from_secs(secs))
        .to_string()
        .split(' ')
        .map(|token| {
            let digits = token.bytes().take_while(u8::is_ascii_digit).count();
            let (n, unit) = token.split_at(digits);
            if unit.len() > 2 {
                format!("{n} {unit}")
            } else {
                token.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The longest duration scion accepts anywhere (TTLs, grace periods, leases): larger
/// values are refused at parse time so no later arithmetic on a time can overflow.
pub const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 86_400);

/// An instant read from the store's clock ([`scion_store::Backend::now`]). Everything the
/// store later compares with its own clock (TTLs, lease expiry, destroy claims, GC ages)
/// is stamped with one of these, never with the caller's clock, so a host whose clock is
/// off cannot make a fresh branch look expired or a live lease look dead.
///
/// Serialized as RFC 3339 with milliseconds, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StoreTime(SystemTime);

impl StoreTime {
    /// Wrap an instant that came from the store's clock.
    pub fn from_store_clock(t: SystemTime) -> Self {
        StoreTime(t)
    }

    /// The time as the standard library's type.
    pub fn as_system_time(self) -> SystemTime {
        self.0
    }

    /// `self + d`, saturating at the far future instead of overflowing.
    pub fn saturating_add(self, d: std::time::Duration) -> Self {
        StoreTime(self.0.checked_add(d).unwrap_or(far_future()))
    }

    /// `self - d`, saturating at the epoch.
    pub fn saturating_sub(self, d: std::time::Duration) -> Self {
        StoreTime(self.0.checked_sub(d).unwrap_or(UNIX_EPOCH).max(UNIX_EPOCH))
    }

    /// How long after `earlier` this is (zero if it is not later).
    pub fn since(self, earlier: StoreTime) -> std::time::Duration {
        self.0.duration_since(earlier.0).unwrap_or_default()
    }
}

/// A time no stamp reaches: the year 9999.
fn far_future() -> SystemTime {
    UNIX_EPOCH + std::time::Duration::from_secs(253_402_300_799)
}

impl std::fmt::Display for StoreTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&rfc3339(self.0))
    }
}

impl serde::Serialize for StoreTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for StoreTime {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_rfc3339(&s)
            .map(StoreTime)
            .ok_or_else(|| serde::de::Error::custom(format!("invalid time {s:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::format_duration;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(format_duration(7 * 86_400), "7 days");
        assert_eq!(format_duration(86_400 + 7_200), "1 day 2h");
        assert_eq!(format_duration(5_400), "1h 30m");
        assert_eq!(format_duration(0), "0s");
    }
}
