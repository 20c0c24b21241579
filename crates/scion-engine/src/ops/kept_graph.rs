//! The ancestry `gc` keeps for versions whose pages it reclaims. A version's parents and
//! generation live in its root record, inside a segment; once no live version needs that
//! segment's pages, `gc` deletes it, and with it the only record of how the live versions
//! that descend from it are related (a merge then found no path from a branch's head to
//! its fork point). So before a sweep, `gc` walks the ancestry of every live version and
//! writes, for each ancestor whose root record sits in a segment that is not live, its
//! parents, generation and time: tens of bytes a version, kept while any live version
//! descends from it. Walks of the version graph read a root record, and this when the
//! record's segment is gone.
//!
//! Object: `graph/kept-{ms}-{nonce}` (JSON, create-only; docs/format.md). A gc with a new
//! set to keep writes a new one and then deletes the older ones, so readers take the union
//! of what they find; one that would write the set already kept writes nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, EngineResult};
use crate::format::{Ancestry, Locator, Parents, SegmentId};
use crate::Engine;
use scion_store::{PutMode, StoreError};

pub(crate) const KEPT_GRAPH_PREFIX: &str = "graph/";
const KEPT_GRAPH_SCHEMA: u32 = 1;

/// The versions a gc kept the ancestry of, by root locator.
pub(crate) type KeptAncestry = HashMap<Locator, Ancestry>;

#[derive(Debug, Serialize, Deserialize)]
struct KeptGraphFile {
    schema: u32,
    versions: Vec<KeptVersion>,
}

#[derive(Debug, Serialize, Deserialize)]
struct KeptVersion {
    /// The version's root locator (`segment:offset:length`).
    root: String,
    /// Its parents' root locators, first parent first (none for an import).
    parents: Vec<String>,
    generation: u64,
    made_at_ms: u64,
}

impl KeptVersion {
    fn of(root: &Locator, a: &Ancestry) -> KeptVersion {
        KeptVersion {
            root: root.to_string(),
            parents: a.parents.iter().map(|p| p.to_string()).collect(),
            generation: a.generation,
            made_at_ms: a.made_at_ms,
        }
    }

    fn decode(&self, key: &str) -> EngineResult<(Locator, Ancestry)> {
        let loc = |s: &str| -> EngineResult<Locator> {
            s.parse()
                .map_err(|_| EngineError::corrupt(key, format!("{s:?} is not a root locator")))
        };
        let parents = match self.parents.as_slice() {
            [] => Parents::None,
            [a] => Parents::One(loc(a)?),
            [a, b] => Parents::Two(loc(a)?, loc(b)?),
            _ => {
                return Err(EngineError::corrupt(
                    key,
                    "a version has at most two parents",
                ))
            }
        };
        Ok((
            loc(&self.root)?,
            Ancestry {
                parents,
                generation: self.generation,
                made_at_ms: self.made_at_ms,
            },
        ))
    }
}

impl Engine {
    /// Every kept ancestry the store holds (the union of its graph objects), read again
    /// when `fresh` or not read yet by this engine.
    pub(crate) fn kept_ancestry(&self, fresh: bool) -> EngineResult<Arc<KeptAncestry>> {
        let mut cached = self.kept_graph.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some(k), false) = (cached.as_ref(), fresh) {
            return Ok(k.clone());
        }
        let mut all = KeptAncestry::new();
        for m in self.backend.list(KEPT_GRAPH_PREFIX)? {
            let bytes = match self.backend.get(&m.key) {
                Ok((b, _)) => b,
                // Replaced by a newer gc's object meanwhile: that one is listed too, or
                // the next read finds it.
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            let file: KeptGraphFile = serde_json::from_slice(&bytes)
                .map_err(|e| EngineError::corrupt(&m.key, e.to_string()))?;
            if file.schema > KEPT_GRAPH_SCHEMA {
                return Err(EngineError::corrupt(
                    &m.key,
                    format!(
                        "kept graph schema {} is newer than this scion reads",
                        file.schema
                    ),
                ));
            }
            for v in &file.versions {
                let (root, a) = v.decode(&m.key)?;
                all.insert(root, a);
            }
        }
        let all = Arc::new(all);
        *cached = Some(all.clone());
        Ok(all)
    }

    /// The ancestry of `root`: from its root record, else (its segment reclaimed) as `gc`
    /// kept it. `Ok(None)`: neither is there (a version written before the graph has a
    /// record without ancestry, which is `Some(None)`).
    pub(crate) fn ancestry_of(&self, root: &Locator) -> EngineResult<Option<Option<Ancestry>>> {
        match self.reader.root(root) {
            Ok(record) => Ok(Some(record.ancestry)),
            Err(e) => {
                if self.backend.exists(&root.segment.key())? {
                    return Err(e);
                }
                for fresh in [false, true] {
                    if let Some(a) = self.kept_ancestry(fresh)?.get(root) {
                        return Ok(Some(Some(*a)));
                    }
                }
                Ok(None)
            }
        }
    }

    /// Before a sweep: keep the ancestry of every ancestor of `live_roots` whose root
    /// record is in a segment outside `live`, in one new graph object, then remove the
    /// older ones. Versions no live version descends from are not kept. Returns how many
    /// versions are kept.
    pub(crate) fn keep_ancestry(
        &self,
        live_roots: &[Locator],
        live: &HashSet<SegmentId>,
    ) -> EngineResult<usize> {
        let before: Vec<String> = self
            .backend
            .list(KEPT_GRAPH_PREFIX)?
            .into_iter()
            .map(|m| m.key)
            .collect();
        let mut keep: Vec<KeptVersion> = Vec::new();
        self.walk_ancestry(live_roots, |root, found| {
            if let Some(Some(a)) = found {
                if !live.contains(&root.segment) {
                    keep.push(KeptVersion::of(&root, a));
                }
            }
        })?;
        keep.sort_by(|a, b| a.root.cmp(&b.root));
        let count = keep.len();
        // Kept already, in one object: no write and no delete (a gc with nothing new to
        // keep costs one listing and one read).
        let kept = self.kept_ancestry(true)?;
        let unchanged = before.len() == 1
            && kept.len() == count
            && keep
                .iter()
                .all(|v| v.root.parse().is_ok_and(|r: Locator| kept.contains_key(&r)));
        if unchanged {
            return Ok(count);
        }
        if count > 0 {
            let file = KeptGraphFile {
                schema: KEPT_GRAPH_SCHEMA,
                versions: keep,
            };
            let body = serde_json::to_vec(&file).expect("a kept graph serializes");
            let key = format!(
                "{KEPT_GRAPH_PREFIX}kept-{}-{}",
                crate::clock::unix_ms(self.store_now()?),
                crate::objects::random_hex(4)
            );
            self.backend.put(&key, &body, PutMode::Create)?;
        }
        // Only once the new object is written: a gc killed before this leaves both, and
        // readers take the union.
        for key in before {
            match self.backend.delete(&key) {
                Ok(()) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        *self.kept_graph.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(count)
    }

    /// Whether every frame of `root` (its record, page-map nodes and pages) is still in the
    /// store: false for a version whose pages gc reclaimed. One existence check per
    /// segment it names; for the failure path of a merge, not the way there.
    pub fn version_is_whole(&self, root: &Locator) -> EngineResult<bool> {
        let mut segments: HashSet<SegmentId> = HashSet::from([root.segment]);
        let record = match self.reader.root(root) {
            Ok(r) => r,
            Err(_) if !self.backend.exists(&root.segment.key())? => return Ok(false),
            Err(e) => return Err(e),
        };
        match crate::pagemap::leaves(&self.reader, record.node, record.depth, record.fanout_bits) {
            Ok(leaves) => {
                for (_, slot) in leaves {
                    segments.insert(slot.loc.segment);
                    segments.extend(slot.base.map(|b| b.segment));
                }
            }
            Err(EngineError::Corrupt { .. }) => return Ok(false),
            Err(e) => return Err(e),
        }
        for seg in segments {
            if !self.backend.exists(&seg.key())? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Live versions whose ancestry cannot be followed to its end: a version on the way
    /// whose root record is gone and whose ancestry `gc` did not keep. What `verify`
    /// reports.
    pub(crate) fn ancestry_gaps(&self, live_roots: &[Locator]) -> EngineResult<Vec<Locator>> {
        let mut gaps = Vec::new();
        self.walk_ancestry(live_roots, |root, found| {
            if found.is_none() {
                gaps.push(root);
            }
        })?;
        gaps.sort();
        Ok(gaps)
    }

    /// Every version `roots` descend from, each once, with its ancestry as
    /// [`Engine::ancestry_of`] answers it; the walk goes on through the parents of those
    /// whose ancestry is known.
    fn walk_ancestry(
        &self,
        roots: &[Locator],
        mut visit: impl FnMut(Locator, &Option<Option<Ancestry>>),
    ) -> EngineResult<()> {
        let mut seen: HashSet<Locator> = HashSet::new();
        let mut stack: Vec<Locator> = roots.to_vec();
        while let Some(root) = stack.pop() {
            if !seen.insert(root) {
                continue;
            }
            let found = self.ancestry_of(&root)?;
            visit(root, &found);
            if let Some(Some(a)) = found {
                stack.extend(a.parents.iter());
            }
        }
        Ok(())
    }
}
