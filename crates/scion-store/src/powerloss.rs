//! A power-loss model of the local backend, in the style of ALICE: the backend records the
//! file-system operations it makes (`FsLog`), and [`crash_state`] builds, for a crash after
//! any prefix of them, the trees a disk could hold afterwards:
//!
//! - **entries dropped**: a directory entry (a new file, a rename, a link, a removal, a new
//!   directory) survives only if its directory was fsynced after it, and a file's data only
//!   if the file was fsynced after it was written;
//! - **entries kept, data dropped**: every entry the process made survives, but file data
//!   only as far as it was fsynced (the classic rename of a file whose data never reached
//!   the disk).
//!
//! Lock files and the change board are not recorded: they hold no data, and scion makes
//! them again on demand. For tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One file-system operation, with paths relative to the store's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsOp {
    Mkdir(String),
    /// A new file with this content (created, written whole).
    WriteFile(String, Vec<u8>),
    FsyncFile(String),
    Rename(String, String),
    Link(String, String),
    Unlink(String),
    Rmdir(String),
    FsyncDir(String),
}

/// Where a backend records its operations.
#[derive(Debug, Clone, Default)]
pub struct FsLog(Arc<Mutex<Vec<FsOp>>>);

impl FsLog {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&self, op: FsOp) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(op);
    }

    pub fn ops(&self) -> Vec<FsOp> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Dir,
    File(usize),
}

/// A file's content: what the process wrote, and what reached the disk.
#[derive(Debug, Clone)]
struct Inode {
    written: Vec<u8>,
    synced: Option<Vec<u8>>,
}

/// The tree the process sees and the one the disk holds, entry by entry.
#[derive(Debug, Clone, Default)]
struct Model {
    seen: BTreeMap<String, Node>,
    durable: BTreeMap<String, Node>,
    inodes: Vec<Inode>,
}

fn parent(p: &str) -> &str {
    p.rsplit_once('/').map_or("", |(d, _)| d)
}

impl Model {
    /// Everything under `root`, as durable as it is visible.
    fn of_dir(root: &Path) -> std::io::Result<Model> {
        let mut m = Model::default();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            for e in std::fs::read_dir(root.join(&rel))? {
                let e = e?;
                let name = rel.join(e.file_name());
                let key = name.to_string_lossy().to_string();
                if e.file_type()?.is_dir() {
                    m.seen.insert(key, Node::Dir);
                    stack.push(name);
                } else if e.file_type()?.is_file() {
                    let data = std::fs::read(e.path())?;
                    m.inodes.push(Inode {
                        written: data.clone(),
                        synced: Some(data),
                    });
                    m.seen.insert(key, Node::File(m.inodes.len() - 1));
                }
            }
        }
        m.durable = m.seen.clone();
        Ok(m)
    }

    fn apply(&mut self, op: &FsOp) {
        match op {
            FsOp::Mkdir(d) => {
                self.seen.insert(d.clone(), Node::Dir);
            }
            FsOp::WriteFile(p, data) => {
                self.inodes.push(Inode {
                    written: data.clone(),
                    synced: None,
                });
                self.seen
                    .insert(p.clone(), Node::File(self.inodes.len() - 1));
            }
            FsOp::FsyncFile(p) => {
                if let Some(Node::File(i)) = self.seen.get(p) {
                    let i = *i;
                    self.inodes[i].synced = Some(self.inodes[i].written.clone());
                }
            }
            FsOp::Rename(from, to) => {
                if let Some(n) = self.seen.remove(from) {
                    self.seen.insert(to.clone(), n);
                }
            }
            FsOp::Link(from, to) => {
                if let Some(n) = self.seen.get(from).cloned() {
                    self.seen.insert(to.clone(), n);
                }
            }
            FsOp::Unlink(p) | FsOp::Rmdir(p) => {
                self.seen.remove(p);
            }
            FsOp::FsyncDir(d) => {
                // The directory's own listing reaches the disk: its children as seen now.
                self.durable.retain(|k, _| parent(k) != d);
                for (k, n) in &self.seen {
                    if parent(k) == d {
                        self.durable.insert(k.clone(), n.clone());
                    }
                }
            }
        }
    }

    /// Write `entries` under `dir`: directories whose parents exist, files with the data
    /// that reached the disk (none: empty, as after a crash before the data was written).
    fn materialize(&self, entries: &BTreeMap<String, Node>, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let reachable = |k: &str| {
            let mut p = parent(k);
            while !p.is_empty() {
                if entries.get(p) != Some(&Node::Dir) {
                    return false;
                }
                p = parent(p);
            }
            true
        };
        for (k, n) in entries {
            if !reachable(k) {
                continue;
            }
            match n {
                Node::Dir => std::fs::create_dir_all(dir.join(k))?,
                Node::File(i) => {
                    let data = self.inodes[*i].synced.clone().unwrap_or_default();
                    std::fs::write(dir.join(k), data)?;
                }
            }
        }
        Ok(())
    }
}

/// What a crash can leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashModel {
    /// Entries not fsynced into their directory are lost, and data not fsynced too.
    EntriesDropped,
    /// Every entry survives; data not fsynced is lost.
    DataDropped,
}

/// Write into `out` the tree a crash of `model` leaves after the first `k` of `ops`, made
/// on the tree that was at `before` (a copy taken when the log started, all durable).
pub fn crash_state(
    before: &Path,
    ops: &[FsOp],
    k: usize,
    model: CrashModel,
    out: &Path,
) -> std::io::Result<()> {
    let mut m = Model::of_dir(before)?;
    for op in &ops[..k] {
        m.apply(op);
    }
    match model {
        CrashModel::EntriesDropped => m.materialize(&m.durable, out),
        CrashModel::DataDropped => m.materialize(&m.seen, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        let m = Model::of_dir(dir).unwrap();
        m.seen
            .iter()
            .filter_map(|(k, n)| match n {
                Node::File(i) => Some((k.clone(), m.inodes[*i].written.clone())),
                Node::Dir => None,
            })
            .collect()
    }

    #[test]
    fn only_what_was_fsynced_survives() {
        let before = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(before.path().join("t")).unwrap();
        let ops = vec![
            FsOp::WriteFile("t/a.tmp".into(), b"new".to_vec()),
            FsOp::Mkdir("refs".into()),
            FsOp::FsyncDir("".into()),
            FsOp::FsyncFile("t/a.tmp".into()),
            FsOp::Rename("t/a.tmp".into(), "refs/a".into()),
            FsOp::FsyncDir("refs".into()),
        ];
        let state = |k, model| {
            let out = tempfile::tempdir().unwrap();
            crash_state(before.path(), &ops, k, model, out.path()).unwrap();
            tree(out.path())
        };
        // Before the directory is fsynced, the renamed file is not there.
        assert!(state(5, CrashModel::EntriesDropped).is_empty());
        assert_eq!(
            state(6, CrashModel::EntriesDropped).get("refs/a"),
            Some(&b"new".to_vec())
        );
        // Kept entries with data never fsynced are empty files.
        assert_eq!(
            state(1, CrashModel::DataDropped).get("t/a.tmp"),
            Some(&Vec::new())
        );
        assert_eq!(
            state(5, CrashModel::DataDropped).get("refs/a"),
            Some(&b"new".to_vec())
        );
    }
}
