//! `status`: every database and branch, with its checkout's state.

use serde::Serialize;

use crate::checkout::{probe_clone, CheckoutState, CloneCapability, ClonePolicy};
use crate::error::CoreResult;
use crate::names::{BranchRef, DbName};
use crate::Scion;

#[derive(Debug, Clone, Serialize)]
pub struct BranchStatus {
    pub branch: String,
    pub version: u64,
    pub page_size: u32,
    pub page_count: u32,
    pub protected: bool,
    pub checkpoints: usize,
    pub checkout: CheckoutState,
    pub parent: Option<String>,
    pub created_at: String,
    pub touched_at: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DatabaseStatus {
    pub db: String,
    pub branches: Vec<BranchStatus>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    pub store: String,
    pub store_id: String,
    pub checkouts: String,
    pub clone_policy: ClonePolicy,
    pub clone_capability: CloneCapability,
    pub databases: Vec<DatabaseStatus>,
}

impl Scion {
    pub fn branch_statuses(&self, db: &DbName) -> CoreResult<Vec<BranchStatus>> {
        let mut out = Vec::new();
        for (branch, r) in self.list_branches(db)? {
            let b = BranchRef::new(db.clone(), branch);
            let checkpoints = self
                .backend
                .list(&crate::refs::checkpoints_prefix(&b))?
                .len();
            out.push(BranchStatus {
                branch: b.branch.to_string(),
                version: r.version,
                page_size: r.page_size,
                page_count: r.page_count,
                protected: r.protected,
                checkpoints,
                checkout: self.checkout_state(&b, &r.root)?,
                parent: r.parent.as_ref().map(|p| match &p.checkpoint {
                    Some(c) => format!("{}@{}@{}", db, p.branch, c),
                    None => format!("{}@{} v{}", db, p.branch, p.version),
                }),
                created_at: r.created_at.clone(),
                touched_at: r.touched_at.clone(),
            });
        }
        Ok(out)
    }

    pub fn status(&self) -> CoreResult<StatusReport> {
        let mut databases = Vec::new();
        for db in self.list_databases()? {
            databases.push(DatabaseStatus {
                db: db.to_string(),
                branches: self.branch_statuses(&db)?,
            });
        }
        Ok(StatusReport {
            store: self.location.clone(),
            store_id: self.manifest.store_id.clone(),
            checkouts: self.options.checkouts_dir.display().to_string(),
            clone_policy: self.options.clone_policy,
            clone_capability: probe_clone(&self.options.checkouts_dir)?,
            databases,
        })
    }
}
