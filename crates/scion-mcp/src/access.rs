//! Who may change what through this server. An agent reads every branch of the databases
//! it is given and forks from any of them; it changes only the branches it owns (forks and
//! session forks made through a server with its owner tag, recorded in the ref) and those a
//! `--write` pattern grants. Each refusal names its rule and the grant that lifts it.

use std::collections::BTreeSet;

use scion_core::{BranchPattern, Owner};
use serde_json::Value;

use crate::api::ApiFailure;

/// The rules a call can break, each with its code and what grants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// The server was started with `--databases` and this is not one of them.
    DatabaseNotGiven,
    /// Agents change only the branches they made, or those `--write` grants.
    OwnBranchesOnly,
    /// A safety fork keeps a head someone replaced: removing it needs force.
    SafetyForkNeedsForce,
    /// A branch the agent does not own is not made to expire sooner without force.
    ShorterTtlNeedsForce,
    /// `force` (past protection, safety forks, TTLs) only on a server that allows it.
    ForceNotAllowed,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Rule::DatabaseNotGiven => "databases_given",
            Rule::OwnBranchesOnly => "own_branches_only",
            Rule::SafetyForkNeedsForce => "safety_forks_need_force",
            Rule::ShorterTtlNeedsForce => "shorter_ttl_needs_force",
            Rule::ForceNotAllowed => "force_only_when_allowed",
        }
    }

    fn code(self) -> &'static str {
        match self {
            Rule::DatabaseNotGiven => "database_not_given",
            Rule::OwnBranchesOnly => "not_owner",
            Rule::SafetyForkNeedsForce => "safety_fork",
            Rule::ShorterTtlNeedsForce => "ttl_shortening",
            Rule::ForceNotAllowed => "force_not_allowed",
        }
    }
}

/// The grants of one server: its owner tag, the databases it is given (all when none are
/// named) and the branches it may change besides its own.
#[derive(Debug, Clone)]
pub struct Grants {
    pub owner: Owner,
    pub databases: Option<BTreeSet<String>>,
    pub write: Vec<BranchPattern>,
}

impl Default for Grants {
    fn default() -> Self {
        Grants {
            owner: Owner::new(DEFAULT_OWNER).expect("a valid owner"),
            databases: None,
            write: Vec::new(),
        }
    }
}

/// The owner tag of a server started without `--owner`.
pub const DEFAULT_OWNER: &str = "agent";

/// How a branch stands for this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Made through a server with this owner tag.
    Owned,
    /// Someone else's, but a `--write` pattern grants it.
    Granted,
}

impl Grants {
    pub(crate) fn may_read(&self, db: &str) -> Result<(), ApiFailure> {
        match &self.databases {
            Some(given) if !given.contains(db) => Err(refusal(
                Rule::DatabaseNotGiven,
                format!(
                    "this MCP server is given the databases {}, not {db}",
                    given.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
                &format!("--databases {db}"),
                "work in the databases you were given, or ask the human to add this one",
            )),
            _ => Ok(()),
        }
    }

    /// Whether `what` may be done to `db@branch`, whose owner (as the API answers it) is
    /// `owner`.
    pub(crate) fn may_change(
        &self,
        db: &str,
        branch: &str,
        owner: Option<&str>,
        what: &str,
    ) -> Result<Standing, ApiFailure> {
        self.may_read(db)?;
        if owner == Some(self.owner.as_str()) {
            return Ok(Standing::Owned);
        }
        if self.write.iter().any(|p| p.matches(db, branch)) {
            return Ok(Standing::Granted);
        }
        let whose = match owner {
            Some(o) => format!("it belongs to {o}"),
            None => "no agent made it".to_string(),
        };
        Err(refusal(
            Rule::OwnBranchesOnly,
            format!(
                "{what} {db}@{branch}: agents change only the branches they forked, and {whose}"
            ),
            &format!("--write {db}@{branch}"),
            "fork it with scion_fork (or scion_session_open with fork_from) and work on your fork; or ask the human to grant it",
        ))
    }

    /// Whether destroying `branch` (its status as the API answers it) needs force.
    pub(crate) fn destroy_needs_force(
        &self,
        status: &Value,
        force: bool,
    ) -> Result<(), ApiFailure> {
        if force || status["safety"].is_null() {
            return Ok(());
        }
        Err(refusal(
            Rule::SafetyForkNeedsForce,
            format!(
                "{} is a safety fork ({}): it keeps a head that was replaced",
                status["branch"].as_str().unwrap_or_default(),
                status["safety"].as_str().unwrap_or_default()
            ),
            "force: true (on a server started with --allow-force)",
            "leave it: it expires on its own; a human can destroy it with scion destroy",
        ))
    }

    /// Whether setting `new_ttl_secs` on a branch of this standing, now with `status`,
    /// needs force: a branch the agent does not own may not be made to expire sooner.
    pub(crate) fn ttl_change_needs_force(
        &self,
        standing: Standing,
        status: &Value,
        new_ttl_secs: Option<u64>,
        force: bool,
    ) -> Result<(), ApiFailure> {
        if force || standing == Standing::Owned {
            return Ok(());
        }
        let left = status["ttl_left_secs"].as_i64();
        let sooner = match (new_ttl_secs, left) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(new), Some(left)) => (new as i64) < left,
        };
        if !sooner {
            return Ok(());
        }
        Err(refusal(
            Rule::ShorterTtlNeedsForce,
            format!(
                "{} is not yours: a TTL of {}s would let gc remove it sooner",
                status["branch"].as_str().unwrap_or_default(),
                new_ttl_secs.unwrap_or_default()
            ),
            "force: true (on a server started with --allow-force)",
            "touch it without a ttl to keep it alive, or give a longer one",
        ))
    }
}

/// Force used on a server started without `--allow-force`.
pub(crate) fn force_not_allowed() -> ApiFailure {
    refusal(
        Rule::ForceNotAllowed,
        "this MCP server does not use force".to_string(),
        "--allow-force",
        "work on a fork instead, or ask the human to run the command with --force (or start `scion mcp --allow-force`)",
    )
}

fn refusal(rule: Rule, message: String, grant: &str, hint: &str) -> ApiFailure {
    let mut f = ApiFailure::new(rule.code(), message, Some(hint));
    f.rule = Some(rule.name().to_string());
    f.grant = Some(grant.to_string());
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_owned_or_granted_branches_change() {
        let g = Grants {
            write: vec!["shop@exp-*".parse().unwrap()],
            databases: Some(["shop".to_string()].into()),
            ..Grants::default()
        };
        assert_eq!(
            g.may_change("shop", "mine", Some("agent"), "write")
                .unwrap(),
            Standing::Owned
        );
        assert_eq!(
            g.may_change("shop", "exp-2", None, "write").unwrap(),
            Standing::Granted
        );
        let no = g.may_change("shop", "main", None, "write").unwrap_err();
        assert_eq!(
            (no.code.as_str(), no.rule.as_deref(), no.grant.as_deref()),
            (
                "not_owner",
                Some("own_branches_only"),
                Some("--write shop@main")
            )
        );
        let other = g
            .may_change("shop", "x", Some("someone"), "write")
            .unwrap_err();
        assert!(
            other.message.contains("belongs to someone"),
            "{}",
            other.message
        );
        let crm = g
            .may_change("crm", "mine", Some("agent"), "write")
            .unwrap_err();
        assert_eq!(crm.code, "database_not_given");
    }
}
