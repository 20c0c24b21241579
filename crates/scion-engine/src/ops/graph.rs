//! The version graph: every root written since root format 2 names the versions it was made
//! from and a generation number. Ancestry is read from it alone, never from branch names,
//! parent breadcrumbs or head histories, which moves rewrite.
//!
//! The best common ancestors of two versions are found as git finds merge bases: paint
//! the ancestors of each side, newest generation first, and stop once every version still
//! queued is known to lie below a common ancestor already found. Generations make the
//! order exact (a version is taken only after every queued descendant), so each version
//! between the two sides and their bases is read once, and nothing older.

use std::collections::{BinaryHeap, HashMap};

use crate::error::EngineResult;
use crate::format::{Locator, Parents, RootRecord};
use crate::Engine;

const FROM_A: u8 = 1;
const FROM_B: u8 = 2;
/// Below a common ancestor already found: cannot be a better one.
const STALE: u8 = 4;
const FOUND: u8 = 8;

/// What the version graph says about the common ancestry of two versions.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommonAncestry {
    /// The one best common ancestor (possibly one of the two versions themselves).
    Base(Locator),
    /// Several common ancestors, none an ancestor of another (a criss-cross of merges);
    /// sorted, so the answer does not depend on how the walk ran.
    Several(Vec<Locator>),
    /// The graph is complete between the two and they share no version (two imports).
    Unrelated,
    /// The walk reached versions written before the graph existed, on both sides, so a
    /// common ancestor the graph cannot see may exist.
    Unknown {
        /// Those versions.
        unknown: Vec<Locator>,
    },
}

/// One version of the graph, as a walk needs it.
#[derive(Debug, Clone, Copy)]
struct GraphNode {
    generation: u64,
    /// `None`: written before the version graph; its parents are unknown.
    parents: Option<Parents>,
}

/// A version waiting in the walk: the highest generation comes out first, ties by locator
/// so that the walk is the same every time.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Queued {
    generation: u64,
    root: Locator,
}

/// Counts of one walk, for benchmarks: how many root records it read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct WalkStats {
    /// Root records read.
    pub versions_visited: u64,
}

impl Engine {
    /// A version's place in the graph: from its root record, or from the ancestry gc kept
    /// when it reclaimed the record's segment. Neither (a store written before the graph,
    /// or ancestry lost): unknown, which a merge refuses as such, naming candidates.
    fn graph_node(&self, root: &Locator) -> EngineResult<GraphNode> {
        Ok(match self.ancestry_of(root)? {
            Some(Some(a)) => GraphNode {
                generation: a.generation,
                parents: Some(a.parents),
            },
            Some(None) | None => GraphNode {
                generation: 0,
                parents: None,
            },
        })
    }

    /// A new version holding `content`'s pages under a root whose parents are `parents`:
    /// one small segment with the root record alone. What a merge publishes (its scratch
    /// fork's pages, with the destination and the source as parents); benchmarks build
    /// version graphs with it. Unpublished, the version is garbage for `gc`.
    pub fn seal_root_with_parents(
        &self,
        content: &Locator,
        parents: Parents,
    ) -> EngineResult<Locator> {
        let mut record = self.reader.root(content)?;
        let sealed = crate::retry::with_fresh_ids(|| {
            let commit = crate::commit::Commit::begin(self)?;
            record.ancestry = Some(commit.ancestry(self, parents)?);
            commit.seal(record)
        })?;
        Ok(sealed.root)
    }

    /// The root record of a version: its shape and its ancestry.
    pub fn root_record(&self, root: &Locator) -> EngineResult<RootRecord> {
        self.reader.root(root)
    }

    /// The generation of `root`: 0 for a version written before the version graph.
    pub fn generation(&self, root: &Locator) -> EngineResult<u64> {
        Ok(self.graph_node(root)?.generation)
    }

    /// The best common ancestors of `a` and `b` in the version graph, and what the walk
    /// to them cost.
    pub fn common_ancestry(
        &self,
        a: &Locator,
        b: &Locator,
    ) -> EngineResult<(CommonAncestry, WalkStats)> {
        let mut stats = WalkStats::default();
        if a == b {
            return Ok((CommonAncestry::Base(*a), stats));
        }
        let mut flags: HashMap<Locator, u8> = HashMap::new();
        let mut nodes: HashMap<Locator, GraphNode> = HashMap::new();
        let mut queue = BinaryHeap::new();
        let mut node_of = |root: &Locator, stats: &mut WalkStats| -> EngineResult<GraphNode> {
            if let Some(n) = nodes.get(root) {
                return Ok(*n);
            }
            stats.versions_visited += 1;
            let n = self.graph_node(root)?;
            nodes.insert(*root, n);
            Ok(n)
        };
        for (root, side) in [(*a, FROM_A), (*b, FROM_B)] {
            let generation = node_of(&root, &mut stats)?.generation;
            flags.insert(root, side);
            queue.push(Queued { generation, root });
        }
        let mut found = Vec::new();
        let mut unknown = Vec::new();
        while queue
            .iter()
            .any(|q| flags.get(&q.root).copied().unwrap_or(0) & STALE == 0)
        {
            let Queued { root, .. } = queue.pop().expect("the queue holds a version");
            let mut paint = flags[&root] & (FROM_A | FROM_B | STALE);
            if paint == FROM_A | FROM_B {
                if flags[&root] & FOUND == 0 {
                    *flags.get_mut(&root).unwrap() |= FOUND;
                    found.push(root);
                }
                paint |= STALE;
            }
            let Some(parents) = node_of(&root, &mut stats)?.parents else {
                if paint & STALE == 0 && !unknown.contains(&root) {
                    unknown.push(root);
                }
                continue;
            };
            for p in parents.iter() {
                let have = flags.get(&p).copied().unwrap_or(0);
                if have & paint == paint {
                    continue;
                }
                flags.insert(p, have | paint);
                let generation = node_of(&p, &mut stats)?.generation;
                queue.push(Queued {
                    generation,
                    root: p,
                });
            }
        }
        // A version of unknown ancestry reached from one side only may hide a common
        // ancestor; it can matter only if the other side reached one too.
        let side_of = |r: &Locator| flags[r] & (FROM_A | FROM_B | STALE);
        let unknown: Vec<Locator> = unknown
            .into_iter()
            .filter(|r| side_of(r) == FROM_A || side_of(r) == FROM_B)
            .collect();
        let one_side = |s: u8| unknown.iter().any(|r| side_of(r) == s);
        if one_side(FROM_A) && one_side(FROM_B) {
            let mut unknown = unknown;
            unknown.sort();
            return Ok((CommonAncestry::Unknown { unknown }, stats));
        }
        // Generation order makes every version found a best one: a common ancestor of
        // another found one would have been marked stale before it was taken.
        found.sort();
        found.dedup();
        let answer = match found.len() {
            0 => CommonAncestry::Unrelated,
            1 => CommonAncestry::Base(found[0]),
            _ => CommonAncestry::Several(found),
        };
        Ok((answer, stats))
    }

    /// Whether `ancestor` is `of` or one of its ancestors, by the version graph. `None`
    /// when the graph cannot tell (versions written before it).
    pub fn is_ancestor(&self, ancestor: &Locator, of: &Locator) -> EngineResult<Option<bool>> {
        Ok(match self.common_ancestry(ancestor, of)?.0 {
            CommonAncestry::Base(b) => Some(b == *ancestor),
            CommonAncestry::Several(_) | CommonAncestry::Unrelated => Some(false),
            CommonAncestry::Unknown { .. } => None,
        })
    }
}

/// A merge on a branch's own line of versions: a version with two parents.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MergeOnLine {
    /// The merge's version: its root, and its number on the branch where the head history
    /// still says.
    #[serde(with = "crate::objects::locator_text")]
    pub root: Locator,
    /// Its number on the branch, where the head history still says.
    pub version: Option<u64>,
    /// The version merged in (the second parent), and the branch and number it had there
    /// where the head history still says.
    #[serde(with = "crate::objects::locator_text")]
    pub from_root: Locator,
    /// The branch it came from, where the history says.
    pub from_branch: Option<String>,
    /// Its number there.
    pub from_version: Option<u64>,
}

impl Engine {
    /// The merges on `b`'s line, newest first: the versions with two parents met walking
    /// first parents from its head down to its fork point (at most `limit` versions, and
    /// never past a version of unknown ancestry). Labels come from the ref's own history
    /// entries, so this reads the ref and root records only.
    pub fn merges_on_line(
        &self,
        b: &crate::BranchRef,
        limit: usize,
    ) -> EngineResult<Vec<MergeOnLine>> {
        let (r, _) = self.read_ref(b)?;
        let mut out = Vec::new();
        let mut at = r.root;
        for _ in 0..limit {
            // Below the fork point the line is the parent's.
            if at == r.fork_root {
                break;
            }
            let Some(ancestry) = self.reader.root(&at)?.ancestry else {
                break;
            };
            match ancestry.parents {
                Parents::None => break,
                Parents::One(p) => at = p,
                Parents::Two(ours, theirs) => {
                    let entry = r
                        .history
                        .iter()
                        .rev()
                        .find(|e| e.new == Some(at) && e.merged.is_some());
                    let merged = entry.and_then(|e| e.merged.as_ref());
                    out.push(MergeOnLine {
                        root: at,
                        version: entry.map(|e| e.new_version),
                        from_root: theirs,
                        from_branch: merged.map(|m| m.branch.clone()),
                        from_version: merged.map(|m| m.version),
                    });
                    at = ours;
                }
            }
        }
        Ok(out)
    }
}
