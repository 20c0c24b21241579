//! A database's branches as trees by lineage (each branch under the branch it was forked
//! from), with the merges on each branch's line: what `scion log --graph` draws and the
//! daemon's `/v1/databases/{db}/graph` answers.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::ops::status::BranchStatus;
use crate::{BranchRef, DbName, Scion};
use scion_engine::ops::graph::MergeOnLine;

/// One branch and the branches forked from it.
#[derive(Debug, Serialize)]
pub struct TreeNode<'a> {
    /// The branch.
    #[serde(flatten)]
    pub status: &'a BranchStatus,
    /// The merges on this branch's own line since its fork point, newest first: where
    /// another line joins this one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub merges: Vec<MergeOnLine>,
    /// The branches forked from it, in name order.
    pub children: Vec<TreeNode<'a>>,
}

/// The branches as trees: a branch whose parent is gone (or that is the root asked for)
/// starts a tree of its own.
pub fn build<'a>(branches: &'a [BranchStatus], root: Option<&str>) -> Vec<TreeNode<'a>> {
    let by_name: HashMap<&str, usize> = branches
        .iter()
        .enumerate()
        .map(|(i, b)| (b.branch.as_str(), i))
        .collect();
    let mut children: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut roots = Vec::new();
    for (i, b) in branches.iter().enumerate() {
        let parent = b
            .forked_from
            .as_ref()
            .and_then(|p| by_name.get(p.branch.as_str()))
            .filter(|&&p| p != i);
        match parent {
            Some(&p) => children.entry(p).or_default().push(i),
            None => roots.push(i),
        }
    }
    let order = |v: &mut Vec<usize>| {
        v.sort_by_key(|&i| (branches[i].created_at, branches[i].branch.clone()))
    };
    for v in children.values_mut() {
        order(v);
    }
    order(&mut roots);
    // A parent recorded by name may be a later branch of that name, so lineage can loop;
    // what no root reaches starts a tree of its own (`grow` skips what was drawn).
    let starts: Vec<usize> = match root {
        Some(r) => by_name.get(r).copied().into_iter().collect(),
        None => roots.into_iter().chain(0..branches.len()).collect(),
    };
    let mut seen = HashSet::new();
    let trees: Vec<TreeNode<'a>> = starts
        .into_iter()
        .filter_map(|i| grow(i, branches, &children, &mut seen))
        .collect();
    trees
}

fn grow<'a>(
    i: usize,
    branches: &'a [BranchStatus],
    children: &BTreeMap<usize, Vec<usize>>,
    seen: &mut HashSet<usize>,
) -> Option<TreeNode<'a>> {
    if !seen.insert(i) {
        return None;
    }
    let kids = children.get(&i).map(Vec::as_slice).unwrap_or_default();
    Some(TreeNode {
        status: &branches[i],
        merges: Vec::new(),
        children: kids
            .iter()
            .filter_map(|&c| grow(c, branches, children, seen))
            .collect(),
    })
}

impl TreeNode<'_> {
    /// Fill in the merges of the first `budget` branches in drawing order (each costs a
    /// read of its ref and of the root records on its line).
    pub fn attach_merges(
        &mut self,
        budget: &mut usize,
        merges_of: &mut impl FnMut(&BranchStatus) -> Vec<MergeOnLine>,
    ) {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        self.merges = merges_of(self.status);
        for c in &mut self.children {
            c.attach_merges(budget, merges_of);
        }
    }

    /// How many branches this subtree holds, itself included.
    pub fn size(&self) -> usize {
        1 + self.children.iter().map(TreeNode::size).sum::<usize>()
    }

    /// How many forks deep this subtree goes below itself.
    pub fn height(&self) -> usize {
        self.children
            .iter()
            .map(|c| c.height() + 1)
            .max()
            .unwrap_or(0)
    }
}

impl Scion {
    /// `db`'s branches as trees, each branch with the merges on its line (at most 256
    /// versions back): the JSON `scion log --graph --json` prints.
    pub fn branch_tree_json(
        &self,
        db: &DbName,
        root: Option<&str>,
    ) -> crate::EngineResult<serde_json::Value> {
        let branches = self.branch_statuses(db)?;
        let mut trees = build(&branches, root);
        let mut budget = usize::MAX;
        let mut merges_of = |b: &BranchStatus| {
            self.engine
                .merges_on_line(&BranchRef::new(db.clone(), b.branch.clone()), 256)
                .unwrap_or_default()
        };
        for t in &mut trees {
            t.attach_merges(&mut budget, &mut merges_of);
        }
        Ok(serde_json::json!({
            "db": db.as_str(),
            "branches": branches.len(),
            "roots": trees,
        }))
    }
}
