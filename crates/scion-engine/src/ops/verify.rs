//! `verify`: a read-only check of a whole store, for after a crash or before trusting it.
//! Every ref, checkpoint and safety fork must resolve, every frame a version reaches must
//! verify (each shared frame is read once), and the manifest must be sane. Unreachable
//! segments and leftover temp files are listed with their bytes: they are garbage for
//! `gc`, not damage.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use scion_store::StoreError;
use serde::Serialize;

use crate::error::EngineResult;
use crate::format::{Locator, Slot};
use crate::manifest::{MANIFEST_KEY, STORE_FORMAT_VERSION};
use crate::pagemap;
use crate::refs::{Checkpoint, Ref};
use crate::Engine;

/// Pages verified per batch of reads.
const VERIFY_BATCH: usize = 4096;

/// One thing found wrong, with the object it was found in.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Problem {
    /// The store key (or file) it was found in.
    pub object: String,
    /// What is wrong.
    pub message: String,
}

/// What `verify` walked and found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyReport {
    /// Refs read.
    pub refs: usize,
    /// Checkpoints read.
    pub checkpoints: usize,
    /// Distinct versions (roots) walked.
    pub versions: usize,
    /// Distinct page frames read and verified.
    pub frames: usize,
    /// Segments nothing reaches: garbage for `gc`, not damage.
    pub unreachable_segments: usize,
    /// Their bytes.
    pub unreachable_bytes: u64,
    /// Leftovers of interrupted operations in the checkout tree (temp files, partial
    /// downloads), for `gc` to sweep.
    pub temp_files: Vec<String>,
    /// Their bytes.
    pub temp_bytes: u64,
    /// Damage found; none means the store verified.
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// Whether nothing was found wrong.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Engine {
    /// Check the whole store without changing anything.
    pub fn verify(&self) -> EngineResult<VerifyReport> {
        let mut report = VerifyReport::default();
        let mut problems: Vec<Problem> = Vec::new();
        let mut problem = |object: &str, message: String| {
            problems.push(Problem {
                object: object.to_string(),
                message,
            })
        };
        match self.backend.get(MANIFEST_KEY) {
            Ok((bytes, _)) => match crate::Manifest::decode(&bytes, &self.location) {
                Ok(m) if m.store_id != self.store_id => {
                    problem(MANIFEST_KEY, "store id changed while open".into())
                }
                Ok(m) if m.format > STORE_FORMAT_VERSION => {
                    problem(MANIFEST_KEY, format!("format {} is unknown", m.format))
                }
                Ok(_) => {}
                Err(e) => problem(MANIFEST_KEY, e.to_string()),
            },
            Err(e) => problem(MANIFEST_KEY, e.to_string()),
        }

        match self.backend.get(crate::ops::receive::UNFINISHED_CLONE_KEY) {
            Ok((bytes, _)) => {
                let marker: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
                problem(
                    crate::ops::receive::UNFINISHED_CLONE_KEY,
                    format!(
                        "this store is a clone of {} that did not finish: it may lack branches; run the same `scion clone` again to finish it",
                        marker["location"].as_str().unwrap_or("another store")
                    ),
                );
            }
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => problem(crate::ops::receive::UNFINISHED_CLONE_KEY, e.to_string()),
        }

        let mut roots: Vec<(String, Locator)> = Vec::new();
        let mut refs = Vec::new();
        for m in self.backend.list("refs/")? {
            let r = match self.backend.get(&m.key) {
                Ok((bytes, _)) => Ref::decode(&bytes, &m.key),
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => Err(e.into()),
            };
            report.refs += 1;
            match r {
                Ok(r) => {
                    roots.push((format!("{} (head)", m.key), r.root));
                    roots.push((format!("{} (fork point)", m.key), r.fork_root));
                    roots.push((format!("{} (created version)", m.key), r.init_root));
                    refs.push(r);
                }
                Err(e) => problem(&m.key, e.to_string()),
            }
        }
        for m in self.backend.list("checkpoints/")? {
            let c = match self.backend.get(&m.key) {
                Ok((bytes, _)) => Checkpoint::decode(&bytes, &m.key),
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => Err(e.into()),
            };
            report.checkpoints += 1;
            match c {
                Ok(c) => roots.push((m.key.clone(), c.root)),
                Err(e) => problem(&m.key, e.to_string()),
            }
        }

        // Heads the history keeps from gc must read back too: `undo` and `restore` need them.
        match self
            .history_retention()
            .and_then(|retention| self.history_marks(&refs, retention))
        {
            Ok(marks) => roots.extend(
                marks
                    .roots
                    .into_iter()
                    .map(|(root, _)| ("head history".to_string(), root)),
            ),
            Err(e) => problem("history/", e.to_string()),
        }

        let mut seen_roots = HashSet::new();
        let mut slots: BTreeSet<(Slot, u32)> = BTreeSet::new();
        for (object, root_loc) in &roots {
            if !seen_roots.insert(*root_loc) {
                continue;
            }
            report.versions += 1;
            let leaves = self.reader.root(root_loc).and_then(|root| {
                pagemap::leaves(&self.reader, root.node, root.depth, root.fanout_bits)
            });
            match leaves {
                Ok(leaves) => slots.extend(leaves.into_iter().map(|(i, s)| (s, i + 1))),
                Err(e) => problem(object, format!("version {root_loc}: {e}")),
            }
        }
        // Every live version's ancestry resolves to its end: a merge finds bases in it.
        let live: Vec<Locator> = seen_roots.iter().copied().collect();
        match self.ancestry_gaps(&live) {
            Ok(gaps) => {
                for gap in gaps {
                    problem(
                        "graph/",
                        format!("version {gap}, an ancestor of a live version, has neither its root record nor kept ancestry: merges across it are refused as of unknown ancestry"),
                    );
                }
            }
            Err(e) => problem("graph/", format!("ancestry not followed: {e}")),
        }
        let slots: Vec<(Slot, u32)> = slots.into_iter().collect();
        let mut damaged: BTreeMap<String, (usize, String)> = BTreeMap::new();
        for batch in slots.chunks(VERIFY_BATCH) {
            let mut frames = 0;
            match self.reader.for_each_page(batch.to_vec(), |_| {
                frames += 1;
                Ok(())
            }) {
                Ok(()) => report.frames += frames,
                // The batch failed at its first bad frame: find each bad one, and report
                // each damaged segment once, with how many pages it fails.
                Err(_) => {
                    for (slot, pgno) in batch {
                        match self.reader.page(slot, *pgno) {
                            Ok(_) => report.frames += 1,
                            Err(e) => {
                                damaged
                                    .entry(slot.loc.segment.key())
                                    .or_insert_with(|| (0, format!("page {pgno}: {e}")))
                                    .0 += 1
                            }
                        }
                    }
                }
            }
        }

        for (segment, (pages, first)) in damaged {
            problem(
                &segment,
                format!("{pages} page(s) fail to verify; first: {first}"),
            );
        }
        // Garbage is counted only when every root could be read (a mark that cannot read
        // a root would call its segments unreachable).
        match self.space() {
            Ok(s) => {
                report.unreachable_segments = s.segments - s.live_segments;
                report.unreachable_bytes = s.reclaimable_bytes;
            }
            Err(e) => problem("segments/", format!("garbage not counted: {e}")),
        }
        report.problems = problems;
        Ok(report)
    }
}
