//! `verify`: a read-only check of a whole store, for after a crash or before trusting it.
//! Every ref, checkpoint and safety fork must resolve, every frame a version reaches must
//! verify (each shared frame is read once), and the manifest must be sane. Unreachable
//! segments and leftover temp files are listed with their bytes: they are garbage for
//! `gc`, not damage.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use scion_store::StoreError;
use serde::Serialize;

use crate::error::{EngineError, EngineResult};
use crate::format::{Locator, Slot};
use crate::manifest::{MANIFEST_KEY, STORE_FORMAT_VERSION};
use crate::pagemap;
use crate::refs::{Checkpoint, Ref};
use crate::Scion;

/// Pages verified per batch of reads.
const VERIFY_BATCH: usize = 4096;

/// One thing found wrong, with the object it was found in.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Problem {
    pub object: String,
    pub message: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyReport {
    pub refs: usize,
    pub checkpoints: usize,
    /// Distinct versions (roots) walked.
    pub versions: usize,
    /// Distinct page frames read and verified.
    pub frames: usize,
    pub unreachable_segments: usize,
    pub unreachable_bytes: u64,
    /// Leftovers of interrupted operations in the checkout tree (temp files, partial
    /// downloads), for `gc` to sweep.
    pub temp_files: Vec<String>,
    pub temp_bytes: u64,
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Scion {
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
        match self.engine.backend.get(MANIFEST_KEY) {
            Ok((bytes, _)) => match crate::Manifest::decode(&bytes, &self.engine.location) {
                Ok(m) if m.store_id != self.engine.store_id => {
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

        let mut roots: Vec<(String, Locator)> = Vec::new();
        let mut refs = Vec::new();
        for m in self.engine.backend.list("refs/")? {
            let r = match self.engine.backend.get(&m.key) {
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
        for m in self.engine.backend.list("checkpoints/")? {
            let c = match self.engine.backend.get(&m.key) {
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
            .engine
            .history_retention()
            .and_then(|retention| self.engine.history_marks(&refs, retention))
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
            let leaves = self.engine.reader.root(root_loc).and_then(|root| {
                pagemap::leaves(&self.engine.reader, root.node, root.depth, root.fanout_bits)
            });
            match leaves {
                Ok(leaves) => slots.extend(leaves.into_iter().map(|(i, s)| (s, i + 1))),
                Err(e) => problem(object, format!("version {root_loc}: {e}")),
            }
        }
        let slots: Vec<(Slot, u32)> = slots.into_iter().collect();
        let mut damaged: BTreeMap<String, (usize, String)> = BTreeMap::new();
        for batch in slots.chunks(VERIFY_BATCH) {
            let mut frames = 0;
            match self.engine.reader.for_each_page(batch.to_vec(), |_| {
                frames += 1;
                Ok(())
            }) {
                Ok(()) => report.frames += frames,
                // The batch failed at its first bad frame: find each bad one, and report
                // each damaged segment once, with how many pages it fails.
                Err(_) => {
                    for (slot, pgno) in batch {
                        match self.engine.reader.page(slot, *pgno) {
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
        match self.engine.space() {
            Ok(s) => {
                report.unreachable_segments = s.segments - s.live_segments;
                report.unreachable_bytes = s.reclaimable_bytes;
            }
            Err(e) => problem("segments/", format!("garbage not counted: {e}")),
        }
        for t in self.temp_leftovers()? {
            report.temp_files.push(t.path.display().to_string());
            report.temp_bytes += t.size;
        }
        report.problems = problems;
        Ok(report)
    }
}

/// Whether a file name is one scion's interrupted checkouts (`.tmp`) or segment-cache
/// downloads (`.part`) leave behind.
fn is_temp_leftover(name: &str) -> bool {
    name.ends_with(".tmp") || name.ends_with(".part")
}

/// A temp file found in the checkout tree.
pub(crate) struct TempFile {
    pub path: PathBuf,
    pub size: u64,
    /// When its inode last changed (a checkout sets its temp file's mtime into the past,
    /// so the mtime says nothing about whether it is still being written).
    pub changed: SystemTime,
}

/// Temp files under `dir` (recursively).
impl Scion {
    /// Temp files in the checkout trees (writable and read-only, and the segment cache
    /// inside the first), and those a local store writes before publishing an object.
    pub(crate) fn temp_leftovers(&self) -> EngineResult<Vec<TempFile>> {
        let mut all = temp_leftovers(&self.options.checkouts_dir)?;
        all.extend(temp_leftovers(&self.read_only_root())?);
        if let Some(store) = &self.options.store_dir {
            all.extend(temp_leftovers(&store.join(scion_store::local::TMP_DIR))?);
        }
        Ok(all)
    }
}

fn temp_leftovers(dir: &Path) -> EngineResult<Vec<TempFile>> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(EngineError::io(&d, e)),
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else if is_temp_leftover(&entry.file_name().to_string_lossy()) {
                let changed = UNIX_EPOCH
                    + Duration::new(
                        u64::try_from(meta.ctime()).unwrap_or(0),
                        u32::try_from(meta.ctime_nsec()).unwrap_or(0),
                    );
                out.push(TempFile {
                    path: entry.path(),
                    size: meta.len(),
                    changed,
                });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
