//! How the daemon runs: its intervals and limits.

use std::time::Duration;

/// How the daemon runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Commit what sessions captured at least this often while they are dirty.
    pub flush_every: Duration,
    /// How long a session's branch lease lasts; renewed every third of it.
    pub lease_ttl: Duration,
    /// How often the janitor reaps expired branches.
    pub janitor_every: Duration,
    /// How often the janitor runs GC (`None`: never).
    pub gc_every: Option<Duration>,
    /// The opt-in second tier of WAL recycling: above this many frames, a brief write
    /// lock (at most 10 ms waiting for it) lets the WAL restart under nonstop writers.
    pub barrier_frames: Option<u32>,
    /// Compact (scattered pages only) branches whose heads many small commits left
    /// fragmented, once idle (`None`: never, the default).
    pub compact_fragmented: Option<scion_core::ops::compact::FragmentationPolicy>,
    /// Branches pushed to a remote as they move (`scion serve --follow REMOTE:db@branch`).
    pub follow: Vec<FollowTarget>,
    /// How often a followed branch's head is read.
    pub follow_every: Duration,
    /// Over TCP, answer reads only (`scion ui` unless `--writable`): every request but a
    /// GET is refused, so a page opened in a browser can look and not change.
    pub tcp_read_only: bool,
}

/// A branch the daemon mirrors to a remote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowTarget {
    pub remote: scion_core::RemoteName,
    pub branch: scion_core::BranchRef,
}

impl std::str::FromStr for FollowTarget {
    type Err = scion_core::EngineError;
    /// `REMOTE:db[@branch]`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let Some((remote, branch)) = s.split_once(':') else {
            return Err(scion_core::EngineError::InvalidInput {
                reason: format!(
                    "--follow {s:?}: expected REMOTE:db[@branch], e.g. origin:shop@main"
                ),
            });
        };
        Ok(FollowTarget {
            remote: remote.parse()?,
            branch: branch.parse()?,
        })
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            flush_every: Duration::from_secs(5),
            lease_ttl: Duration::from_secs(60),
            janitor_every: Duration::from_secs(60),
            gc_every: Some(Duration::from_secs(3600)),
            barrier_frames: None,
            compact_fragmented: None,
            follow: Vec::new(),
            follow_every: Duration::from_millis(100),
            tcp_read_only: false,
        }
    }
}
