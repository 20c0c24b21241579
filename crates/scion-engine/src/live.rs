//! Database files this process captures live (the daemon's sessions). While SQLite
//! connections of this process have such a file open, no other code in the process may
//! open and close a descriptor of it or of its `-shm`: closing any descriptor drops every
//! POSIX lock the process holds on the file, SQLite's included. So every raw open of a
//! checkout's files asks here first, and treats a live file as busy.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

static LIVE: Mutex<Vec<(u64, u64, PathBuf)>> = Mutex::new(Vec::new());

/// A claim on a live file; dropping it ends the claim.
#[derive(Debug)]
pub struct LiveClaim {
    key: (u64, u64),
}

/// Mark the database at `path` (by device and inode) as live in this process. `None`
/// when there is no such file.
pub fn claim(path: &Path) -> Option<LiveClaim> {
    let md = std::fs::metadata(path).ok()?;
    let key = (md.dev(), md.ino());
    LIVE.lock()
        .expect("live files lock")
        .push((key.0, key.1, path.to_path_buf()));
    Some(LiveClaim { key })
}

impl Drop for LiveClaim {
    fn drop(&mut self) {
        let mut live = LIVE.lock().expect("live files lock");
        if let Some(i) = live.iter().position(|(d, i, _)| (*d, *i) == self.key) {
            live.remove(i);
        }
    }
}

/// Whether the database at `path` is live in this process (told by `stat` alone).
pub fn is_live(path: &Path) -> bool {
    let live = LIVE.lock().expect("live files lock");
    if live.is_empty() {
        return false;
    }
    let Ok(md) = std::fs::metadata(path) else {
        return live.iter().any(|(_, _, p)| p == path);
    };
    live.iter()
        .any(|(d, i, p)| (*d, *i) == (md.dev(), md.ino()) || p == path)
}
