//! Patterns of branches: `db@branch` where either side may hold `*` wildcards. They name
//! what a grant covers (an MCP server's `--write`, a daemon token's scope).

use std::str::FromStr;

/// A pattern of branches (`scion mcp --write`, a token's grant): `db@branch`, either side a glob where `*` stands for any run of
/// characters (`shop@exp-*`, `*@scratch`); a bare `db` means every branch of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchPattern {
    db: String,
    branch: String,
}

impl FromStr for BranchPattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (db, branch) = s.split_once('@').unwrap_or((s, "*"));
        let plain = |p: &str| {
            !p.is_empty()
                && p.bytes().all(|b| {
                    b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || matches!(b, b'.' | b'_' | b'-' | b'*')
                })
        };
        if !plain(db) || !plain(branch) {
            return Err(format!(
                "{s:?}: expected db@branch, where each side is a name or a glob with * (shop@exp-*)"
            ));
        }
        Ok(BranchPattern {
            db: db.to_string(),
            branch: branch.to_string(),
        })
    }
}

impl std::fmt::Display for BranchPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.db, self.branch)
    }
}

impl BranchPattern {
    /// Whether the branch `branch` of database `db` matches.
    pub fn matches(&self, db: &str, branch: &str) -> bool {
        glob(&self.db, db) && glob(&self.branch, branch)
    }

    /// Whether some branch of `db` matches.
    pub fn matches_database(&self, db: &str) -> bool {
        glob(&self.db, db)
    }

    /// Whether every branch of every database matches (`*@*`).
    pub fn matches_everything(&self) -> bool {
        self.db == "*" && self.branch == "*"
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_runs_of_characters() {
        let p: BranchPattern = "shop@exp-*".parse().unwrap();
        assert!(p.matches("shop", "exp-1"));
        assert!(p.matches("shop", "exp-"));
        assert!(!p.matches("shop", "main"));
        assert!(!p.matches("crm", "exp-1"));
        let all: BranchPattern = "shop".parse().unwrap();
        assert!(all.matches("shop", "main"));
        let mid: BranchPattern = "*@a*b*c".parse().unwrap();
        assert!(mid.matches("x", "abc"));
        assert!(mid.matches("x", "a-b-c"));
        assert!(!mid.matches("x", "a-c-b"));
        let exact: BranchPattern = "shop@main".parse().unwrap();
        assert!(!exact.matches("shop", "main2"));
        for bad in ["", "shop@", "Shop@x", "shop@a b"] {
            assert!(bad.parse::<BranchPattern>().is_err(), "{bad:?}");
        }
    }
}
