//! One shape for branch names in and out of every tool, so that whatever one tool returns
//! another accepts: arguments may name a branch `name` or `db@name` (as the daemon's API
//! and `scion_session_open` spell it); answers give `database` and `branch` apart, and
//! `ref` (`db@branch`) beside them. Malformed arguments are answered as a refusal that
//! names the tool's fields, like every other refusal, instead of a protocol error.

use serde_json::{Map, Value};

use crate::api::ApiFailure;

/// Arguments that name a branch of the tool's `database` (`targets` holds several;
/// `fork_from` a string or `{branch, at}`).
const BRANCH_FIELDS: &[&str] = &["branch", "new_branch", "source", "target", "left", "right"];

/// `shop@try-1` -> `try-1` when `shop` is the database; anything else as it is.
fn local(database: &str, name: &str) -> String {
    name.strip_prefix(database)
        .and_then(|rest| rest.strip_prefix('@'))
        .unwrap_or(name)
        .to_string()
}

fn localize(database: &str, v: &mut Value) {
    if let Value::String(s) = v {
        *s = local(database, s);
    }
}

/// The branch fields of `o` without their database.
fn localize_fields(database: &str, o: &mut Map<String, Value>) {
    for key in BRANCH_FIELDS {
        if let Some(v) = o.get_mut(*key) {
            localize(database, v);
        }
    }
}

/// Arguments as tools read them: every branch named without its database.
pub(crate) fn normalize_arguments(args: &mut Map<String, Value>) {
    let Some(database) = args
        .get("database")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return;
    };
    localize_fields(&database, args);
    if let Some(Value::Array(targets)) = args.get_mut("targets") {
        targets.iter_mut().for_each(|t| localize(&database, t));
    }
    match args.get_mut("fork_from") {
        Some(v @ Value::String(_)) => localize(&database, v),
        Some(Value::Object(o)) => {
            if let Some(b) = o.get_mut("branch") {
                localize(&database, b);
            }
        }
        _ => {}
    }
}

/// An answer in the one shape: branches without their database, and `ref` beside
/// `branch`.
pub(crate) fn normalize_answer(v: &mut Value) {
    let Some(o) = v.as_object_mut() else { return };
    let Some(database) = o
        .get("database")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return;
    };
    localize_fields(&database, o);
    if let Some(branch) = o.get("branch").and_then(Value::as_str) {
        let full = format!("{database}@{branch}");
        o.insert("ref".into(), Value::String(full));
    }
}

/// The refusal for arguments a tool could not read: what was wrong, and the fields it
/// takes (from its input schema).
pub(crate) fn bad_arguments(tool: &str, message: &str, schema: &Map<String, Value>) -> ApiFailure {
    let mut fields: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    fields.sort();
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let message = message
        .strip_prefix("failed to deserialize parameters: ")
        .unwrap_or(message);
    ApiFailure::new(
        "invalid_arguments",
        format!("{tool}: {message}"),
        Some(&format!(
            "{tool} takes {} (required: {})",
            fields.join(", "),
            if required.is_empty() {
                "none".to_string()
            } else {
                required.join(", ")
            }
        )),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn branches_round_trip_in_either_spelling() {
        let mut args = json!({"database": "shop", "branch": "shop@s-1", "left": "main",
            "right": "shop@try@v1", "targets": ["shop@a", "b@c"], "fork_from": {"branch": "shop@main"}});
        normalize_arguments(args.as_object_mut().unwrap());
        assert_eq!(
            args,
            json!({"database": "shop", "branch": "s-1", "left": "main", "right": "try@v1",
                "targets": ["a", "b@c"], "fork_from": {"branch": "main"}})
        );
        let mut answer = json!({"database": "shop", "branch": "shop@s-1", "path": "/x"});
        normalize_answer(&mut answer);
        assert_eq!(
            answer,
            json!({"database": "shop", "branch": "s-1", "ref": "shop@s-1", "path": "/x"})
        );
    }
}
