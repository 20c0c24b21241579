//! The daemon paths this server asks for. A path is built only from names that parsed as
//! names, so no text an agent sends can become part of a path's query or fragment, widen a
//! `--write` glob or make a request the router cannot parse: `"exp-h?force=true#"` is
//! refused as a branch name here, before any ownership check reads it.

use scion_core::names::NameError;
use scion_core::{BranchName, DbName};

use crate::api::ApiFailure;

/// A path of the daemon's API, every name in it checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiPath(String);

impl ApiPath {
    /// A path with no names in it (`/v1/databases`).
    pub fn fixed(path: &'static str) -> ApiPath {
        ApiPath(path.to_string())
    }

    /// `/v1/databases/{db}` and `tail`.
    pub fn database(db: &str, tail: Tail) -> Result<ApiPath, ApiFailure> {
        let db = DbName::new(db).map_err(refused)?;
        Ok(ApiPath(format!("/v1/databases/{db}{}", tail.0)))
    }

    /// `/v1/branches/{db}@{branch}` and `tail`.
    pub fn branch(db: &str, branch: &str, tail: Tail) -> Result<ApiPath, ApiFailure> {
        let (db, branch) = names(db, branch)?;
        Ok(ApiPath(format!("/v1/branches/{db}@{branch}{}", tail.0)))
    }

    /// `/v1/sessions/{id}` and `tail`, where `id` is a session id (`s-` and hex digits) or
    /// the branch the session captures (`db@branch`).
    pub fn session(id: &str, tail: Tail) -> Result<ApiPath, ApiFailure> {
        let id = match id.strip_prefix("s-") {
            Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                id.to_string()
            }
            _ => {
                let (db, branch) = id.split_once('@').ok_or_else(|| {
                    ApiFailure::new(
                        "invalid_name",
                        format!("{id:?} is neither a session id (s-...) nor a branch (db@branch)"),
                        Some("scion_session_status lists the open sessions with their ids"),
                    )
                })?;
                let (db, branch) = names(db, branch)?;
                format!("{db}@{branch}")
            }
        };
        Ok(ApiPath(format!("/v1/sessions/{id}{}", tail.0)))
    }

    /// `path?key=value&...` with every value percent-encoded (the daemon parses the
    /// names in them itself).
    pub fn with_query(path: &'static str, query: &[(&'static str, &str)]) -> ApiPath {
        let mut out = path.to_string();
        for (i, (key, value)) in query.iter().enumerate() {
            out.push(if i == 0 { '?' } else { '&' });
            out.push_str(key);
            out.push('=');
            out.push_str(&encoded(value));
        }
        ApiPath(out)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What follows the names in a path: a fixed suffix, or a query of values that are not
/// text (numbers, flags). Never built from a string an agent sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail(String);

impl Tail {
    pub fn none() -> Tail {
        Tail(String::new())
    }

    /// A fixed suffix such as `/checkout`.
    pub fn path(suffix: &'static str) -> Tail {
        Tail(suffix.to_string())
    }

    /// `suffix?key=value` for a value that prints without text of an agent's.
    pub fn query(suffix: &'static str, key: &'static str, value: impl QueryValue) -> Tail {
        Tail(format!("{suffix}?{key}={}", value.text()))
    }
}

/// Values a query may carry: numbers and flags.
pub trait QueryValue {
    fn text(&self) -> String;
}

impl QueryValue for bool {
    fn text(&self) -> String {
        self.to_string()
    }
}

impl QueryValue for usize {
    fn text(&self) -> String {
        self.to_string()
    }
}

/// Percent-encode a query-string value.
fn encoded(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'@' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A database and a branch name, each as its kind's rules take it.
pub fn names(db: &str, branch: &str) -> Result<(DbName, BranchName), ApiFailure> {
    Ok((
        DbName::new(db).map_err(refused)?,
        BranchName::new(branch).map_err(refused)?,
    ))
}

/// A name's refusal in the words every front end uses for it (`invalid_name`).
pub fn refused(e: NameError) -> ApiFailure {
    let message = e.to_string();
    let d = scion_core::described::describe_engine(&scion_core::EngineError::Name(e));
    ApiFailure::new(d.code, message, d.hint.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_reach_a_query_or_fragment_are_refused() {
        for bad in [
            "exp-h?force=true#",
            "a1?force=true#",
            "a b",
            "main ",
            "a1\r\nX: y",
            "crm\u{0}",
            "x/../y",
            "%2e",
            "é",
        ] {
            let e = ApiPath::branch("shop", bad, Tail::none()).unwrap_err();
            assert_eq!(e.code, "invalid_name", "{bad:?}");
            assert!(
                ApiPath::branch(bad, "main", Tail::none()).is_err(),
                "{bad:?}"
            );
            assert!(ApiPath::session(&format!("shop@{bad}"), Tail::none()).is_err());
        }
        assert_eq!(
            ApiPath::branch("shop", "exp-h", Tail::query("", "force", false))
                .unwrap()
                .as_str(),
            "/v1/branches/shop@exp-h?force=false"
        );
        assert_eq!(
            ApiPath::session("s-0a1b", Tail::path("/flush"))
                .unwrap()
                .as_str(),
            "/v1/sessions/s-0a1b/flush"
        );
        assert!(ApiPath::session("s-0a?b", Tail::none()).is_err());
    }
}
