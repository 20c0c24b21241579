//! The name types, as data: what each holds and how it prints. Which strings make a valid
//! name, parsing one and why one is refused, is `names.rs`'s.

use std::fmt;

/// A name held as its text: the type, its `as_str` and its `Display`.
macro_rules! name_text {
    ($(#[$doc:meta])* $ty:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $ty(pub(crate) String);

        impl $ty {
            /// The name as written.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl PartialEq<str> for $ty {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $ty {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

/// Serialized as it prints (`db@branch`, `db@branch@checkpoint`): reports carry names as the
/// text people and scripts read.
macro_rules! serialize_as_text {
    ($($ty:ident),*) => {$(
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    )*};
}

serialize_as_text!(BranchRef, Target);

name_text!(
    /// A database in a store, e.g. `shop`.
    DbName
);
name_text!(
    /// A branch of a database, e.g. `main`, or a remote-tracking branch, e.g.
    /// `origin~main`: the remote's name, `~`, and the branch's name there.
    /// Names people pick for new branches are checked against [`crate::names::MAX_NAME_LEN`] by
    /// `BranchName::check_new`.
    BranchName
);
name_text!(
    /// A remote: another store this one pushes to and pulls from, e.g. `origin`.
    RemoteName
);
name_text!(
    /// A checkpoint on a branch, e.g. `v1`.
    CheckpointName
);

/// `db@branch`: one branch of one database.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BranchRef {
    /// The database.
    pub db: DbName,
    /// The branch of it.
    pub branch: BranchName,
}

impl BranchRef {
    /// Branch `branch` of database `db`.
    pub fn new(db: DbName, branch: BranchName) -> Self {
        Self { db, branch }
    }
}

impl fmt::Display for BranchRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.db, self.branch)
    }
}

/// `db`, `db@branch` or `db@branch@checkpoint`: a version to read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// The branch.
    pub branch: BranchRef,
    /// The checkpoint of it; none names its head.
    pub checkpoint: Option<CheckpointName>,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.branch)?;
        if let Some(c) = &self.checkpoint {
            write!(f, "@{c}")?;
        }
        Ok(())
    }
}

/// Who made a branch: the tag a front end with owners (an MCP server, a scoped daemon
/// token) records on the branches it creates, so that it may later change them and nothing
/// else. 1 to 64 characters of `A-Z a-z 0-9 . _ - : @ /`: a person's or an agent's name,
/// `token:ci` or `mcp:agent-7`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Owner(pub(crate) String);

impl Owner {
    /// The owner's name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
