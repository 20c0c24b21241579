//! Names of databases, branches and checkpoints, validated in this one place.
//!
//! A name becomes part of an object key and of a local file path, so the rules are strict:
//! 1 to 100 characters of `a-z 0-9 . _ -`, starting with a letter or digit, never `..`.
//! Lowercase only, so that two names can never collide on a case-insensitive filesystem.

use std::str::FromStr;

pub use crate::name_types::{
    BranchName, BranchRef, CheckpointName, DbName, Owner, RemoteName, Target,
};

/// A name, target or owner that is not one: the text given and why.
///
/// Not `#[non_exhaustive]`: the engine's error carries it, and `scion-described` gives each
/// variant its stable code, matching it whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// A name (of a database, branch, checkpoint, remote) that is not one.
    #[error("invalid {kind} name {name:?}: {reason}")]
    InvalidName {
        /// What the name was for (`database`, `branch`, ...).
        kind: &'static str,
        /// The name given.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// A target (`db`, `db@branch`, `db@branch@checkpoint`) that is not one.
    #[error("invalid target {target:?}: {reason}")]
    InvalidTarget {
        /// The text given.
        target: String,
        /// Why.
        reason: &'static str,
    },
    /// An owner tag that is not one.
    #[error("invalid input: {reason}")]
    InvalidOwner {
        /// Why (the text given, and what owners are made of).
        reason: String,
    },
}

/// The longest database, branch or checkpoint name, in bytes.
pub const MAX_NAME_LEN: usize = 100;

/// Branch names scion derives (a safety fork's `<branch>-pre-rollback-v<version>`) may be
/// this much longer than names people pick, so every branch can have its safety forks.
const DERIVED_NAME_ROOM: usize = 40;

/// Checkpoint names that resolve without an object: the version a branch was forked at,
/// and the version `create` made.
const RESERVED_CHECKPOINTS: [&str; 2] = ["fork", "init"];

/// The reasons a name is refused that are about its characters: only these get the hint
/// of which characters names use.
pub const CHARACTER_REASONS: [&str; 3] = [
    "must start with a lowercase letter or a digit",
    "may contain only a-z, 0-9, '.', '_' and '-'",
    "must not contain '..'",
];

fn validate(kind: &'static str, s: &str, max_len: usize) -> Result<(), NameError> {
    let reason = if s.is_empty() {
        Some("is empty")
    } else if s.len() > max_len && max_len == MAX_NAME_LEN {
        Some("is longer than 100 characters")
    } else if s.len() > max_len && max_len == MAX_REMOTE_NAME_LEN {
        Some("is longer than 32 characters")
    } else if s.len() > max_len {
        Some("is longer than 140 characters (100 for names you pick, plus room for a safety fork's suffix)")
    } else if !s.as_bytes()[0].is_ascii_lowercase() && !s.as_bytes()[0].is_ascii_digit() {
        Some(CHARACTER_REASONS[0])
    } else if !s
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
    {
        Some(CHARACTER_REASONS[1])
    } else if s.contains("..") {
        Some(CHARACTER_REASONS[2])
    } else {
        None
    };
    match reason {
        Some(reason) => Err(NameError::InvalidName {
            kind,
            name: s.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

macro_rules! name_type {
    ($ty:ident, $kind:literal, $max_len:expr) => {
        name_type!($ty, |s| validate($kind, s, $max_len));
    };
    ($ty:ident, $check:expr) => {
        impl $ty {
            /// The name, if it follows the rules of its kind.
            pub fn new(s: &str) -> Result<Self, NameError> {
                let check: fn(&str) -> Result<(), NameError> = $check;
                check(s)?;
                Ok(Self(s.to_string()))
            }
        }

        impl FromStr for $ty {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, NameError> {
                Self::new(s)
            }
        }
    };
}

name_type!(DbName, "database", MAX_NAME_LEN);
name_type!(BranchName, |s| match s.split_once(TRACKING_SEPARATOR) {
    Some((remote, branch)) => {
        validate("remote", remote, MAX_REMOTE_NAME_LEN)?;
        validate("branch", branch, MAX_NAME_LEN + DERIVED_NAME_ROOM)
    }
    None => validate("branch", s, MAX_NAME_LEN + DERIVED_NAME_ROOM),
});
name_type!(RemoteName, "remote", MAX_REMOTE_NAME_LEN);

/// What joins a remote's name and a branch's in a remote-tracking branch (`origin~main`):
/// a character no other name may hold, so a tracking branch never takes a name people pick.
const TRACKING_SEPARATOR: char = '~';
/// Remote names stay short: a tracking branch's name holds one and a branch's.
const MAX_REMOTE_NAME_LEN: usize = 32;
name_type!(CheckpointName, "checkpoint", MAX_NAME_LEN);

impl BranchName {
    /// `main`, every database's first branch.
    pub fn main() -> Self {
        Self("main".to_string())
    }

    /// Refuse a name for a new branch that leaves no room for its derived names, and a
    /// remote-tracking name (only `pull` and `clone` make those).
    pub fn check_new(&self) -> Result<(), NameError> {
        if self.tracking().is_some() {
            return Err(NameError::InvalidName {
                kind: "branch",
                name: self.0.clone(),
                reason: "holds '~': names with it are remote-tracking branches, which only a pull or a clone makes",
            });
        }
        validate("branch", &self.0, MAX_NAME_LEN)
    }

    /// The remote-tracking branch that follows `branch` of `remote`: `remote~branch`.
    pub fn tracking_of(remote: &RemoteName, branch: &BranchName) -> Result<Self, NameError> {
        if branch.tracking().is_some() {
            return Err(NameError::InvalidName {
                kind: "branch",
                name: branch.0.clone(),
                reason: "is itself a remote-tracking branch, which is never pushed or pulled",
            });
        }
        Self::new(&format!("{remote}{TRACKING_SEPARATOR}{branch}"))
    }

    /// For a remote-tracking branch, the remote's name and the branch's name there.
    pub fn tracking(&self) -> Option<(&str, &str)> {
        self.0.split_once(TRACKING_SEPARATOR)
    }
}

impl CheckpointName {
    /// Whether this is one of the [`CheckpointName::reserved`] names.
    pub fn is_reserved(&self) -> bool {
        RESERVED_CHECKPOINTS.contains(&self.0.as_str())
    }

    /// The reserved names every branch resolves: its fork point and the database's first
    /// version.
    pub fn reserved() -> [CheckpointName; 2] {
        RESERVED_CHECKPOINTS.map(|n| CheckpointName(n.to_string()))
    }
}

impl FromStr for BranchRef {
    type Err = NameError;
    /// `db` (meaning `db@main`) or `db@branch`.
    fn from_str(s: &str) -> Result<Self, NameError> {
        let t = Target::from_str(s)?;
        if t.checkpoint.is_some() {
            return Err(NameError::InvalidTarget {
                target: s.to_string(),
                reason: "expected db or db@branch, not a checkpoint",
            });
        }
        Ok(t.branch)
    }
}

impl FromStr for Target {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, NameError> {
        let parts: Vec<&str> = s.split('@').collect();
        if parts.len() > 3 {
            return Err(NameError::InvalidTarget {
                target: s.to_string(),
                reason: "too many '@' (expected db[@branch[@checkpoint]])",
            });
        }
        let db = DbName::new(parts[0])?;
        let branch = match parts.get(1) {
            Some(b) => BranchName::new(b)?,
            None => BranchName::main(),
        };
        let checkpoint = parts.get(2).map(|c| CheckpointName::new(c)).transpose()?;
        Ok(Target {
            branch: BranchRef::new(db, branch),
            checkpoint,
        })
    }
}

impl Owner {
    /// The longest owner name, in bytes.
    pub const MAX_LEN: usize = 64;
    /// The ref meta key that holds a branch's owner: in `meta` rather than a field of its
    /// own so that every binary that reads the ref schema carries it over on its next write.
    pub const META_KEY: &'static str = "scion.owner";

    /// `s` as an owner name, if it is one (letters, digits, `.`, `_`, `-`, `:`, `@` and `/`, at
    /// most [`Owner::MAX_LEN`] bytes).
    pub fn new(s: &str) -> Result<Self, NameError> {
        let ok = !s.is_empty()
            && s.len() <= Self::MAX_LEN
            && s.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':' | b'@' | b'/')
            });
        if ok {
            Ok(Owner(s.to_string()))
        } else {
            Err(NameError::InvalidOwner {
                reason: format!(
                    "owner {s:?}: 1 to {} characters of A-Z, a-z, 0-9, '.', '_', '-', ':', '@' and '/'",
                    Self::MAX_LEN
                ),
            })
        }
    }
}

impl FromStr for Owner {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, NameError> {
        Owner::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names() {
        for n in ["main", "a", "try-1", "v1.2_final", "0day"] {
            BranchName::new(n).unwrap();
        }
    }

    #[test]
    fn invalid_names() {
        let long = "a".repeat(MAX_NAME_LEN + DERIVED_NAME_ROOM + 1);
        for n in [
            "", ".", "..", "a..b", "-x", ".x", "_x", "Main", "a/b", "a@b", "a b", "é", &long,
            "a\0b", "a\\b",
        ] {
            assert!(BranchName::new(n).is_err(), "{n:?} must be refused");
        }
    }

    #[test]
    fn a_remote_name_of_40_characters_is_said_to_be_longer_than_32() {
        let e = RemoteName::new(&"a".repeat(40)).unwrap_err().to_string();
        assert!(e.contains("longer than 32 characters"), "{e}");
    }

    #[test]
    fn owners_are_short_tags_of_plain_characters() {
        for good in ["agent", "mcp:agent-7", "token:ci", "a.b_c/d@e"] {
            assert_eq!(Owner::new(good).unwrap().as_str(), good);
        }
        let long = "a".repeat(Owner::MAX_LEN + 1);
        for bad in ["", "two words", "tab\t", "é", long.as_str()] {
            assert!(Owner::new(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn new_branch_names_leave_room_for_their_safety_forks() {
        let longest = "a".repeat(MAX_NAME_LEN);
        BranchName::new(&longest).unwrap().check_new().unwrap();
        BranchName::new(&format!("{longest}-pre-rollback")).unwrap();
        let too_long = BranchName::new(&"a".repeat(MAX_NAME_LEN + 1)).unwrap();
        assert!(too_long.check_new().is_err());
        assert!(DbName::new(&"a".repeat(MAX_NAME_LEN + 1)).is_err());
        assert!(CheckpointName::new(&"a".repeat(MAX_NAME_LEN + 1)).is_err());
    }

    #[test]
    fn targets() {
        let t: Target = "shop".parse().unwrap();
        assert_eq!(t.to_string(), "shop@main");
        let t: Target = "shop@try@v1".parse().unwrap();
        assert_eq!(t.checkpoint.unwrap().as_str(), "v1");
        assert!("shop@a@b@c".parse::<Target>().is_err());
        assert!("shop@".parse::<Target>().is_err());
        assert!("shop@try@v1".parse::<BranchRef>().is_err());
    }
}
