//! Read-only SQL on a version (the MCP tool `scion_query`, the explorer's SQL box), opened
//! from its read-only checkout (immutable, `query_only`, an authorizer that allows reading
//! and nothing else), with a time limit and row and byte caps.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct TargetRows {
    pub target: String,
    pub rows: Vec<Vec<serde_json::Value>>,
    pub row_count: usize,
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The statement would have written (the authorizer or SQLite refused it).
    #[serde(skip)]
    pub wrote: bool,
}

/// The longest value a query may hold or make (SQLite's `SQLITE_LIMIT_LENGTH`).
const LONGEST_VALUE: usize = 16 << 20;

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_rows: usize,
    pub max_bytes: usize,
    pub time: Duration,
}

fn value(v: ValueRef<'_>) -> (serde_json::Value, usize) {
    match v {
        ValueRef::Null => (serde_json::Value::Null, 4),
        ValueRef::Integer(i) => (i.into(), 8),
        ValueRef::Real(f) => (f.into(), 8),
        ValueRef::Text(t) => {
            let s = String::from_utf8_lossy(t).into_owned();
            let n = s.len();
            (s.into(), n)
        }
        ValueRef::Blob(b) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            let n = hex.len();
            (serde_json::json!({ "blob_hex": hex }), n)
        }
    }
}

fn reading_only(ctx: AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Select
        | AuthAction::Read { .. }
        | AuthAction::Function { .. }
        | AuthAction::Recursive => Authorization::Allow,
        _ => Authorization::Deny,
    }
}

/// Run `sql` on the database file at `path` (a read-only checkout). Returns the column
/// names and the rows within `limits`.
/// A name an attached version may go by: an SQL schema name that needs no quoting, and
/// neither `main` nor `temp`.
pub fn is_schema_name(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.eq_ignore_ascii_case("main")
        && !name.eq_ignore_ascii_case("temp")
}

pub fn run(
    path: &Path,
    attached: &[(String, std::path::PathBuf)],
    target: &str,
    sql: &str,
    params: &[serde_json::Value],
    limits: Limits,
) -> (Vec<String>, TargetRows) {
    let mut out = TargetRows {
        target: target.to_string(),
        rows: Vec::new(),
        row_count: 0,
        truncated: false,
        error: None,
        wrote: false,
    };
    let result = (|| -> rusqlite::Result<Vec<String>> {
        let uri = format!("file:{}?mode=ro&immutable=1", path.display());
        let mut c = Connection::open_with_flags(
            uri,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        // Attached before the authorizer, which refuses ATTACH in the statement itself.
        for (name, file) in attached {
            let uri = format!("file:{}?mode=ro&immutable=1", file.display());
            c.execute(&format!("ATTACH DATABASE ?1 AS \"{name}\""), [uri])?;
        }
        c.pragma_update(None, "query_only", true)?;
        c.authorizer(Some(reading_only))?;
        // No value, kept or made on the way, may be longer than the largest answer, checked
        // by SQLite as each value is made: `randomblob(1e8)` or `hex(zeroblob(3e8))` is
        // refused at once, not built in memory and measured afterwards. (A smaller
        // max_bytes still reads longer stored values, to measure or cut them.)
        let longest = limits.max_bytes.max(LONGEST_VALUE);
        c.set_limit(
            rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH,
            i32::try_from(longest).unwrap_or(i32::MAX),
        )?;
        let started = Instant::now();
        c.progress_handler(1000, Some(move || started.elapsed() > limits.time))?;
        let mut st = c.prepare(sql)?;
        let columns: Vec<String> = st.column_names().map(|s| s.to_string()).collect();
        let params: Vec<rusqlite::types::Value> = params
            .iter()
            .map(|p| match p {
                serde_json::Value::Null => rusqlite::types::Value::Null,
                serde_json::Value::Bool(b) => rusqlite::types::Value::Integer(*b as i64),
                serde_json::Value::Number(n) => match n.as_i64() {
                    Some(i) => rusqlite::types::Value::Integer(i),
                    None => rusqlite::types::Value::Real(n.as_f64().unwrap_or(0.0)),
                },
                serde_json::Value::String(s) => rusqlite::types::Value::Text(s.clone()),
                other => rusqlite::types::Value::Text(other.to_string()),
            })
            .collect();
        let mut rows = st.query(rusqlite::params_from_iter(params.iter()))?;
        let mut bytes = 0;
        while let Some(r) = rows.next()? {
            if out.rows.len() >= limits.max_rows {
                out.truncated = true;
                break;
            }
            let mut row = Vec::with_capacity(columns.len());
            let mut row_bytes = 0;
            for i in 0..columns.len() {
                let (v, n) = value(r.get_ref(i)?);
                row_bytes += n;
                row.push(v);
            }
            // A row that would take the answer past its bytes is left out, the first too.
            if bytes + row_bytes > limits.max_bytes {
                out.truncated = true;
                break;
            }
            bytes += row_bytes;
            out.rows.push(row);
        }
        Ok(columns)
    })();
    out.row_count = out.rows.len();
    match result {
        Ok(cols) => (cols, out),
        Err(e) => {
            out.wrote = matches!(
                e.sqlite_error_code(),
                Some(
                    rusqlite::ErrorCode::AuthorizationForStatementDenied
                        | rusqlite::ErrorCode::ReadOnly
                )
            );
            out.error = Some(match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::TooBig) => format!(
                    "{e}: no value a query holds or makes may be longer than {} bytes",
                    limits.max_bytes.max(LONGEST_VALUE)
                ),
                _ => e.to_string(),
            });
            (Vec::new(), out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with_a_big_row() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let c = Connection::open(dir.path().join("q.db")).unwrap();
        c.execute_batch(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
             INSERT INTO t VALUES (1, zeroblob(200000)), (2, 'small');",
        )
        .unwrap();
        dir
    }

    fn limits(max_bytes: usize) -> Limits {
        Limits {
            max_rows: 100,
            max_bytes,
            time: Duration::from_secs(60),
        }
    }

    #[test]
    fn randomblob_1e8_and_hex_zeroblob_3e8_are_refused_as_they_are_made() {
        let dir = file_with_a_big_row();
        let path = dir.path().join("q.db");
        for sql in [
            "SELECT randomblob(100000000)",
            "SELECT hex(zeroblob(300000000))",
            "SELECT zeroblob(1000000000)",
            // 40 MB made on the way to a small answer.
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40)
             SELECT length(group_concat(randomblob(1000000))) FROM n",
        ] {
            let (_, out) = run(&path, &[], "t", sql, &[], limits(1024));
            let err = out.error.unwrap_or_else(|| panic!("{sql}: answered"));
            assert!(err.contains("longer than 16777216 bytes"), "{sql}: {err}");
            assert!(out.rows.is_empty());
        }
    }

    #[test]
    fn a_row_past_the_bytes_is_left_out_even_the_first() {
        let dir = file_with_a_big_row();
        let path = dir.path().join("q.db");
        // A blob is answered as hex: 200,000 bytes take 400,000.
        let (_, out) = run(
            &path,
            &[],
            "t",
            "SELECT length(v), v FROM t ORDER BY id",
            &[],
            limits(500_000),
        );
        assert_eq!(out.error, None);
        assert_eq!(out.rows.len(), 2);
        let (_, out) = run(
            &path,
            &[],
            "t",
            "SELECT v FROM t ORDER BY id",
            &[],
            limits(300_000),
        );
        assert!(out.error.is_none(), "{:?}", out.error);
        assert!(out.truncated && out.rows.is_empty());
        let (_, out) = run(
            &path,
            &[],
            "t",
            "SELECT id FROM t ORDER BY id",
            &[],
            limits(1024),
        );
        assert_eq!(out.rows.len(), 2);
        // The big value alone is within the length limit but past what is left.
        let (_, out) = run(
            &path,
            &[],
            "t",
            "SELECT substr(v, 1, 900), substr(v, 1, 900) FROM t ORDER BY id",
            &[],
            limits(1024),
        );
        assert!(out.error.is_none(), "{:?}", out.error);
        assert!(out.truncated);
        assert!(out.rows.is_empty(), "{} rows", out.rows.len());
    }
}
