//! A branch named on the command line where the database is already known.

use anyhow::Result;
use scion_core::{BranchName, BranchRef, DbName};

/// A branch of `db` named as `branch` or as `db@branch` (what `--onto` and `--into` take:
/// moves and merges stay within one database).
pub(crate) fn branch_of(db: &DbName, text: &str) -> Result<BranchName> {
    if !text.contains('@') {
        return Ok(BranchName::new(text)?);
    }
    let named: BranchRef = text.parse()?;
    if &named.db != db {
        return Err(scion_core::names::NameError::InvalidName {
            kind: "branch",
            name: text.to_string(),
            reason: "names a branch of another database: write `branch` or `db@branch` of the same database (a checkpoint cannot receive changes)",
        }
        .into());
    }
    Ok(named.branch)
}
