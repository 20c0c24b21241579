//! The merge base: the newest version both sides are known to have started from. Lineage
//! decides it: the last merge between the two branches recorded in either's head history,
//! a fork of one from the other, or the older fork point of two siblings. `--base` names
//! it where lineage cannot.

use scion_core::clock::StoreTime;
use scion_core::format::Locator;
use scion_core::history::HeadOp;
use scion_core::refs::Ref;
use scion_core::{BranchRef, Scion, Target};

use crate::error::{MergeError, MergeResult};

/// The version both sides are compared against.
#[derive(Debug, Clone)]
pub(crate) struct Base {
    pub root: Locator,
    pub how: String,
}

/// The base of merging `src` (ref `s`) into `dst` (ref `d`).
pub(crate) fn find_base(
    scion: &Scion,
    src: &BranchRef,
    s: &Ref,
    dst: &BranchRef,
    d: &Ref,
    explicit: Option<&Target>,
) -> MergeResult<Base> {
    if let Some(t) = explicit {
        let v = scion.resolve(t)?;
        return Ok(Base {
            root: v.root,
            how: format!("{t}, as given by --base"),
        });
    }
    let mut candidates: Vec<(StoreTime, Base)> = Vec::new();
    // The last merge of src into dst: dst holds src's changes up to the version merged.
    for e in merges(scion, dst)? {
        if let Some(m) = e.merged.filter(|m| m.branch == src.branch.as_str()) {
            candidates.push((
                e.at,
                Base {
                    root: m.root,
                    how: format!(
                        "{src} version {}, merged into {dst} by entry {} of its history",
                        m.version, e.seq
                    ),
                },
            ));
            break;
        }
    }
    // The last merge of dst into src: src holds dst's changes up to the version merged.
    for e in merges(scion, src)? {
        if let Some(m) = e.merged.filter(|m| m.branch == dst.branch.as_str()) {
            candidates.push((
                e.at,
                Base {
                    root: m.root,
                    how: format!(
                        "{dst} version {}, merged into {src} by entry {} of its history",
                        m.version, e.seq
                    ),
                },
            ));
            break;
        }
    }
    let parent = |r: &Ref| r.parent.as_ref().map(|p| p.branch.clone());
    if parent(s).as_deref() == Some(dst.branch.as_str()) {
        candidates.push((
            s.created_at,
            Base {
                root: s.fork_root,
                how: format!(
                    "{dst} version {}, where {src} forked from it",
                    s.fork_version
                ),
            },
        ));
    }
    if parent(d).as_deref() == Some(src.branch.as_str()) {
        candidates.push((
            d.created_at,
            Base {
                root: d.fork_root,
                how: format!(
                    "{src} version {}, where {dst} forked from it",
                    d.fork_version
                ),
            },
        ));
    }
    if let (Some(ps), Some(pd)) = (&s.parent, &d.parent) {
        if ps.branch == pd.branch && ps.branch != src.branch.as_str() {
            // Siblings: the older fork point is in both (the parent moved on between the
            // two forks, and the later one started from that).
            let (older, at) = if s.fork_version <= d.fork_version {
                (s, s.created_at)
            } else {
                (d, d.created_at)
            };
            candidates.push((
                at,
                Base {
                    root: older.fork_root,
                    how: format!(
                        "{}@{} version {}, the older of the two fork points",
                        dst.db, ps.branch, older.fork_version
                    ),
                },
            ));
        }
    }
    candidates
        .into_iter()
        .max_by_key(|(at, _)| *at)
        .map(|(_, b)| b)
        .ok_or_else(|| MergeError::NoBase {
            src: src.to_string(),
            dst: dst.to_string(),
        })
}

/// The merge entries of `b`'s head history, newest first.
fn merges(scion: &Scion, b: &BranchRef) -> MergeResult<Vec<scion_core::history::HeadEntry>> {
    let history = scion.head_history(b, None)?;
    Ok(history
        .entries
        .into_iter()
        .filter(|e| e.op == HeadOp::Merge)
        .collect())
}
