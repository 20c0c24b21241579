//! Sizes and durations as people write them in environment variables.

use std::time::Duration;

/// Bytes, with an optional binary unit: `4096`, `500MiB`, `10 GiB`, `1tib`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let not_a_size = || format!("{s:?} is not a size: write e.g. 4096, 500MiB or 10GiB");
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    if number.is_empty() {
        return Err(not_a_size());
    }
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "kib" => 10,
        "mib" => 20,
        "gib" => 30,
        "tib" => 40,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?}: write bytes, KiB, MiB, GiB or TiB"
            ))
        }
    };
    let n: u64 = number.parse().map_err(|_| not_a_size())?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// A duration as scion reads them everywhere (`30s`, `500ms`, `2m`, `1h30m`), or plain
/// seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let v = s.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(v)
        .map_err(|e| format!("{v:?} is not a duration ({e}): write e.g. 30s, 500ms or 2m"))
}

/// `1`, `true`, `yes`, `on` and their opposites; empty is off.
pub(crate) fn parse_switch(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "" | "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "{:?} is neither on (1, true, yes, on) nor off (0, false, no, off)",
            s.trim()
        )),
    }
}

/// A size (as [`parse_size`]) that must fit in memory: a buffer or threshold length.
#[cfg(feature = "cloud")]
pub(crate) fn parse_size_in_memory(s: &str) -> Result<usize, String> {
    let n = parse_size(s)?;
    usize::try_from(n).map_err(|_| format!("{n} is too large"))
}

/// The environment variable `name`, parsed; unset or blank is `None`, and a value that
/// cannot be read is refused, naming the variable, rather than quietly replaced by a
/// default.
#[cfg(feature = "cloud")]
pub(crate) fn env_value<T>(
    name: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> crate::StoreResult<Option<T>> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => parse(&v)
            .map(Some)
            .map_err(|e| crate::StoreError::Config(format!("{name}: {e}"))),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_durations_and_switches_parse_or_say_why_not() {
        assert_eq!(parse_size("10GiB"), Ok(10 << 30));
        assert_eq!(parse_size(" 500 MiB "), Ok(500 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("10GB").unwrap_err().contains("unknown unit"));
        assert!(parse_size("lots").unwrap_err().contains("not a size"));
        assert!(parse_size("99999999999TiB")
            .unwrap_err()
            .contains("too large"));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("soon")
            .unwrap_err()
            .contains("not a duration"));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_switch("Yes"), Ok(true));
        assert_eq!(parse_switch("0"), Ok(false));
        assert_eq!(parse_switch(""), Ok(false));
        assert!(parse_switch("maybe").is_err());
    }
}
