//! The shared branch tree and the parent-selection rules.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::Serialize;

use super::tuples::Tuple;
use crate::datagen::SplitMix64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParentRule {
    /// The harness: uniform over every eligible node; no eligible node skips the step.
    Uniform,
    /// offshoot's: the worker's current node if it has room, else uniform, else the root.
    Sticky,
}

impl FromStr for ParentRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(ParentRule::Uniform),
            "sticky" => Ok(ParentRule::Sticky),
            _ => Err(format!("unknown parent rule {s:?} (uniform, sticky)")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DepthRule {
    /// The harness: parents may sit at depth <= D, so nodes reach D + 1.
    Harness,
    /// Nodes never go deeper than D.
    Strict,
}

impl FromStr for DepthRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "harness" => Ok(DepthRule::Harness),
            "strict" => Ok(DepthRule::Strict),
            _ => Err(format!("unknown depth rule {s:?} (harness, strict)")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Node {
    pub branch: String,
    pub parent: Option<usize>,
    pub depth: usize,
    pub alive: bool,
    /// Finished its work; a cross-branch pass may read it.
    pub pre_committed: bool,
    /// Survived pruning; may be a parent.
    pub committed: bool,
    pub alive_children: usize,
    /// The column suffix of the step that made it.
    pub suffix: String,
}

pub(crate) const ROOT: usize = 0;

/// The parent a step got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    Parent(usize),
    /// Sticky rule only: nothing eligible, so the root (even past its fanout limit).
    RootFallback,
    /// Uniform rule: nothing eligible, the step is skipped.
    Skip,
}

#[derive(Debug)]
pub struct Tree {
    pub nodes: Vec<Node>,
    tuple: Tuple,
    parent_rule: ParentRule,
    depth_rule: DepthRule,
    /// Alive nodes, the root included.
    pub live: usize,
    pub peak_live: usize,
    /// Children added beyond a parent's fanout limit (only root fallbacks may do that).
    pub fanout_overruns: usize,
}

impl Tree {
    pub fn new(tuple: Tuple, parent_rule: ParentRule, depth_rule: DepthRule, root: &str) -> Tree {
        Tree {
            nodes: vec![Node {
                branch: root.to_string(),
                parent: None,
                depth: 0,
                alive: true,
                pre_committed: true,
                committed: true,
                alive_children: 0,
                suffix: String::new(),
            }],
            tuple,
            parent_rule,
            depth_rule,
            live: 1,
            peak_live: 1,
            fanout_overruns: 0,
        }
    }

    fn fanout_limit(&self, i: usize) -> usize {
        if i == ROOT {
            self.tuple.fanout_root
        } else {
            self.tuple.fanout_inner
        }
    }

    pub(crate) fn eligible(&self, i: usize) -> bool {
        let n = &self.nodes[i];
        let depth_ok = match self.depth_rule {
            DepthRule::Harness => n.depth <= self.tuple.max_depth,
            DepthRule::Strict => n.depth < self.tuple.max_depth,
        };
        n.alive && (i == ROOT || n.committed) && n.alive_children < self.fanout_limit(i) && depth_ok
    }

    /// Pick a parent; `current` is the worker's last node (the sticky rule prefers it).
    pub(crate) fn choose(&self, rng: &mut SplitMix64, current: Option<usize>) -> Choice {
        if self.parent_rule == ParentRule::Sticky {
            if let Some(c) = current.filter(|&c| self.eligible(c)) {
                return Choice::Parent(c);
            }
        }
        let eligible: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.eligible(i))
            .collect();
        if eligible.is_empty() {
            return match self.parent_rule {
                ParentRule::Uniform => Choice::Skip,
                ParentRule::Sticky => Choice::RootFallback,
            };
        }
        Choice::Parent(eligible[rng.below(eligible.len() as u64) as usize])
    }

    pub(crate) fn add_child(&mut self, parent: usize, branch: String, suffix: String) -> usize {
        if self.nodes[parent].alive_children >= self.fanout_limit(parent) {
            self.fanout_overruns += 1;
        }
        self.nodes[parent].alive_children += 1;
        let depth = self.nodes[parent].depth + 1;
        self.nodes.push(Node {
            branch,
            parent: Some(parent),
            depth,
            alive: true,
            pre_committed: false,
            committed: false,
            alive_children: 0,
            suffix,
        });
        self.live += 1;
        self.peak_live = self.peak_live.max(self.live);
        self.nodes.len() - 1
    }

    pub fn kill(&mut self, i: usize) {
        if !self.nodes[i].alive {
            return;
        }
        self.nodes[i].alive = false;
        if let Some(p) = self.nodes[i].parent {
            self.nodes[p].alive_children -= 1;
        }
        self.live -= 1;
    }

    /// Alive, pre-committed, non-root nodes without alive children.
    pub fn leaves(&self) -> Vec<usize> {
        (1..self.nodes.len())
            .filter(|&i| {
                let n = &self.nodes[i];
                n.alive && n.pre_committed && n.alive_children == 0
            })
            .collect()
    }

    /// Nodes ever created, by depth (the root excluded).
    pub(crate) fn depth_histogram(&self) -> BTreeMap<usize, usize> {
        let mut h = BTreeMap::new();
        for n in &self.nodes[1..] {
            *h.entry(n.depth).or_default() += 1;
        }
        h
    }

    pub(crate) fn max_depth(&self) -> usize {
        self.nodes.iter().map(|n| n.depth).max().unwrap_or(0)
    }

    /// The deepest any node may go under the depth rule.
    pub(crate) fn depth_bound(&self) -> usize {
        match self.depth_rule {
            DepthRule::Harness => self.tuple.max_depth + 1,
            DepthRule::Strict => self.tuple.max_depth,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tuples::Workflow;
    use super::*;

    fn grow(rule: DepthRule, steps: usize) -> Tree {
        let mut t = Tree::new(
            Tuple::full(Workflow::DataCleaning),
            ParentRule::Uniform,
            rule,
            "main",
        );
        let mut rng = SplitMix64(42);
        for i in 0..steps {
            match t.choose(&mut rng, None) {
                Choice::Parent(p) => {
                    let c = t.add_child(p, format!("b{i}"), String::new());
                    t.nodes[c].committed = true;
                    t.nodes[c].pre_committed = true;
                }
                _ => break,
            }
        }
        t
    }

    #[test]
    fn harness_rule_reaches_d_plus_one_and_never_overruns_fanout() {
        let t = grow(DepthRule::Harness, 200);
        assert_eq!(
            t.nodes.len(),
            201,
            "capacity 10+30+90+270 >= 200: no step skipped"
        );
        assert!(t.max_depth() <= 4);
        assert_eq!(t.fanout_overruns, 0);
        for (i, n) in t.nodes.iter().enumerate() {
            let limit = if i == ROOT { 10 } else { 3 };
            assert!(n.alive_children <= limit);
        }
    }

    #[test]
    fn strict_rule_stops_at_d_and_skips_when_full() {
        let t = grow(DepthRule::Strict, 200);
        assert!(t.max_depth() <= 3);
        assert_eq!(t.nodes.len(), 1 + 10 + 30 + 90, "capacity 130, then skips");
    }
}
