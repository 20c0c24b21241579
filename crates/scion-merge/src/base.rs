//! The merge base: the best common ancestor of the two versions in the version graph,
//! which every version written by a commit, checkpoint, flush or merge records. It is
//! never guessed from branch names: where the graph cannot answer (versions written
//! before it existed) or answers with several bases (a criss-cross of merges), the merge
//! is refused, and `--base` names the base instead.

use scion_engine::format::Locator;
use scion_engine::ops::graph::CommonAncestry;
use scion_engine::refs::Ref;
use std::sync::Arc;

use scion_engine::{BranchRef, Engine, Target};

use crate::error::{MergeError, MergeResult};

/// The version both sides are compared against.
#[derive(Debug, Clone)]
pub(crate) struct Base {
    pub root: Locator,
    pub how: String,
}

/// The base of merging `src` (version `theirs`, of branch ref `s`) into `dst` (head
/// `ours`, ref `d`).
pub(crate) fn find_base(
    engine: &Arc<Engine>,
    src: &Target,
    theirs: &Locator,
    (dst, d): (&BranchRef, &Ref),
    ours: &Locator,
    explicit: Option<&Target>,
) -> MergeResult<Base> {
    if let Some(t) = explicit {
        // Checked by the caller before any work; kept here so no path takes another's.
        if t.branch.db != dst.db {
            return Err(MergeError::BaseOfAnotherDatabase {
                base: t.to_string(),
                dst: dst.to_string(),
            });
        }
        let v = engine.resolve(t)?;
        return Ok(Base {
            root: v.root,
            how: format!("{t}, as given by --base"),
        });
    }
    match engine.common_ancestry(ours, theirs)?.0 {
        CommonAncestry::Base(root) => {
            let how = if root == *theirs {
                format!("{src} itself: {dst} already holds it")
            } else if root == *ours {
                format!("{dst}'s head: {src} was made from it")
            } else {
                let generation = engine.generation(&root)?;
                let graph = format!(
                    "the newest version both come from (generation {generation} of the version graph)"
                );
                match name_of_version(engine, &root, (dst, d), &src.branch) {
                    Some(name) => format!("{name}: {graph}"),
                    None => graph,
                }
            };
            Ok(Base { root, how })
        }
        CommonAncestry::Several(bases) => Err(MergeError::SeveralBases {
            src: src.to_string(),
            dst: dst.to_string(),
            bases: bases
                .iter()
                .map(|b| base_target(engine, b, (dst, d), &src.branch))
                .collect(),
        }),
        CommonAncestry::Unrelated => Err(MergeError::NoBase {
            src: src.to_string(),
            dst: dst.to_string(),
        }),
        // Unknown (versions written before scion recorded parents), or an answer this
        // merge does not know: the base cannot be told, so it must be given.
        _ => {
            let (s, _) = engine.read_ref(&src.branch)?;
            Err(MergeError::BaseUnknown {
                src: src.to_string(),
                dst: dst.to_string(),
                candidates: lineage_candidates(&src.branch, &s, dst, d),
            })
        }
    }
}

/// A name people know `root` by, from what the two branches' refs say: a fork point, the
/// database's first version, or a version a recent head move of either branch names.
/// Only words for the report: the base itself came from the graph.
fn name_of_version(
    engine: &Arc<Engine>,
    root: &Locator,
    (dst, d): (&BranchRef, &Ref),
    src: &BranchRef,
) -> Option<String> {
    let fork_point = |b: &BranchRef, r: &Ref| {
        let p = r.parent.as_ref().filter(|_| r.fork_root == *root)?;
        Some(format!(
            "{}@{} v{}, the fork point of {b}",
            b.db, p.branch, r.fork_version
        ))
    };
    let moved_to = |b: &BranchRef, r: &Ref| number_in_history(r, root).map(|n| format!("{b} v{n}"));
    let named = |b: &BranchRef, r: &Ref| {
        fork_point(b, r)
            .or_else(|| moved_to(b, r))
            .or_else(|| (r.init_root == *root).then(|| format!("{b}@init")))
    };
    named(dst, d).or_else(|| {
        let (s, _) = engine.read_ref(src).ok()?;
        named(src, &s)
    })
}

/// The number `root` had on the branch of `r`, as the newest head move naming it says.
fn number_in_history(r: &Ref, root: &Locator) -> Option<u64> {
    r.history.iter().rev().find_map(|e| {
        if e.new.as_ref() == Some(root) {
            Some(e.new_version)
        } else if e.old.as_ref() == Some(root) {
            Some(e.old_version)
        } else {
            None
        }
    })
}

/// `root` named as `--base` takes it: `db@branch@fork`, `db@branch@init`, or
/// `db@branch@vN` from a head move of either branch; its locator where neither names it.
fn base_target(
    engine: &Arc<Engine>,
    root: &Locator,
    (dst, d): (&BranchRef, &Ref),
    src: &BranchRef,
) -> String {
    let named = |b: &BranchRef, r: &Ref| {
        if r.fork_root == *root {
            return Some(format!("{b}@fork"));
        }
        if r.init_root == *root {
            return Some(format!("{b}@init"));
        }
        number_in_history(r, root).map(|n| format!("{b}@v{n}"))
    };
    named(dst, d)
        .or_else(|| {
            let (s, _) = engine.read_ref(src).ok()?;
            named(src, &s)
        })
        .unwrap_or_else(|| root.to_string())
}

/// Versions that branch lineage suggests as a base, named so that `--base` takes them:
/// only a hint for a person deciding, never used on its own.
fn lineage_candidates(src: &BranchRef, s: &Ref, dst: &BranchRef, d: &Ref) -> Vec<String> {
    let parent = |r: &Ref| r.parent.as_ref().map(|p| p.branch.clone());
    let mut out = Vec::new();
    if parent(s).as_deref() == Some(dst.branch.as_str()) {
        out.push(format!("{src}@fork"));
    }
    if parent(d).as_deref() == Some(src.branch.as_str()) {
        out.push(format!("{dst}@fork"));
    }
    if let (Some(ps), Some(pd)) = (&s.parent, &d.parent) {
        if ps.branch == pd.branch {
            // Siblings: the older fork point is in both.
            let older = if s.fork_version <= d.fork_version {
                src
            } else {
                dst
            };
            out.push(format!("{older}@fork"));
        }
    }
    out.push(format!("{}@main@init", dst.db));
    out.dedup();
    out
}
