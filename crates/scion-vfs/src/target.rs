//! What a database name given to the VFS means: `shop` or `shop@main` (a branch, writable),
//! `shop@main@v1` (a checkpoint, read-only); `?mode=ro` opens a branch read-only, and
//! `?version=N` opens version N of a branch (read-only) while the head or a checkpoint
//! holds it; `?root=LOCATOR` opens exactly the version with that root (read-only), as a
//! merge reads its base.

use scion_engine::format::Locator;
use scion_engine::{BranchRef, CheckpointName, Target};

/// A database name the VFS was asked to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpenTarget {
    pub branch: BranchRef,
    /// A checkpoint (read-only), or the head.
    pub checkpoint: Option<CheckpointName>,
    /// A version number (read-only), from `?version=N`.
    pub version: Option<u64>,
    /// A version's root (read-only), from `?root=LOCATOR`.
    pub root: Option<Locator>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum TargetError {
    #[error("{name:?} is not a scion database name: use db, db@branch or db@branch@checkpoint ({reason})")]
    Invalid { name: String, reason: String },
    #[error("version={0:?} is not a version number: use ?version=N with N as `scion branches` or `scion checkpoints` shows it")]
    BadVersion(String),
    #[error("{0} names a checkpoint and a version: use one of them")]
    CheckpointAndVersion(String),
    #[error("root={0:?} is not a version's root locator (segment:offset:length)")]
    BadRoot(String),
}

impl OpenTarget {
    pub fn parse(name: &str) -> Result<OpenTarget, TargetError> {
        // SQLite hands over the path part of a URI; a leading slash comes from `file:/x`.
        let trimmed = name.trim_start_matches('/');
        let t: Target = trimmed
            .parse()
            .map_err(|e: scion_engine::names::NameError| TargetError::Invalid {
                name: name.to_string(),
                reason: e.to_string(),
            })?;
        Ok(OpenTarget {
            branch: t.branch,
            checkpoint: t.checkpoint,
            version: None,
            root: None,
        })
    }

    /// Fix the target at the version whose root is `text` (the `root` URI parameter).
    pub(crate) fn at_root(mut self, text: &str) -> Result<OpenTarget, TargetError> {
        let root = text
            .trim()
            .parse::<Locator>()
            .map_err(|_| TargetError::BadRoot(text.to_string()))?;
        if self.checkpoint.is_some() || self.version.is_some() {
            return Err(TargetError::CheckpointAndVersion(self.target().to_string()));
        }
        self.root = Some(root);
        Ok(self)
    }

    /// Fix the target at version `text` (the `version` URI parameter).
    pub(crate) fn at_version(mut self, text: &str) -> Result<OpenTarget, TargetError> {
        let n = text
            .trim()
            .parse::<u64>()
            .map_err(|_| TargetError::BadVersion(text.to_string()))?;
        if self.checkpoint.is_some() || self.root.is_some() {
            return Err(TargetError::CheckpointAndVersion(self.target().to_string()));
        }
        self.version = Some(n);
        Ok(self)
    }

    /// Whether the target names a fixed version (checkpoint, version or root): what the
    /// tests check of the parsing.
    #[cfg(test)]
    fn read_only(&self) -> bool {
        self.checkpoint.is_some() || self.version.is_some() || self.root.is_some()
    }

    pub fn target(&self) -> Target {
        Target {
            branch: self.branch.clone(),
            checkpoint: self.checkpoint.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let t = OpenTarget::parse("shop@main").unwrap();
        assert_eq!(t.branch.to_string(), "shop@main");
        assert!(!t.read_only());
        assert_eq!(
            OpenTarget::parse("shop").unwrap().branch.to_string(),
            "shop@main"
        );
        let c = OpenTarget::parse("/shop@try@v1").unwrap();
        assert!(c.read_only());
        assert_eq!(c.target().to_string(), "shop@try@v1");
        assert!(OpenTarget::parse("Bad Name").is_err());
        let v = OpenTarget::parse("shop@main")
            .unwrap()
            .at_version("3")
            .unwrap();
        assert_eq!((v.version, v.read_only()), (Some(3), true));
        assert!(OpenTarget::parse("shop").unwrap().at_version("x").is_err());
        assert!(c.clone().at_version("3").is_err());
        assert!(OpenTarget::parse("").is_err());
    }
}
