//! What a database name given to the VFS means: `shop` or `shop@main` (a branch, writable),
//! `shop@main@v1` (a checkpoint, read-only); `?mode=ro` opens a branch read-only.

use scion_core::{BranchRef, CheckpointName, Target};

/// A database name the VFS was asked to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTarget {
    pub branch: BranchRef,
    /// A checkpoint (read-only), or the head.
    pub checkpoint: Option<CheckpointName>,
}

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("{name:?} is not a scion database name: use db, db@branch or db@branch@checkpoint ({reason})")]
    Invalid { name: String, reason: String },
}

impl OpenTarget {
    pub fn parse(name: &str) -> Result<OpenTarget, TargetError> {
        // SQLite hands over the path part of a URI; a leading slash comes from `file:/x`.
        let trimmed = name.trim_start_matches('/');
        let t: Target =
            trimmed
                .parse()
                .map_err(|e: scion_core::CoreError| TargetError::Invalid {
                    name: name.to_string(),
                    reason: e.to_string(),
                })?;
        Ok(OpenTarget {
            branch: t.branch,
            checkpoint: t.checkpoint,
        })
    }

    pub fn read_only(&self) -> bool {
        self.checkpoint.is_some()
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
        assert!(OpenTarget::parse("").is_err());
    }
}
