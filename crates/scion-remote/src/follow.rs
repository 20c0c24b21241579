//! `scion push --follow`: mirror a branch to a remote as it moves. Each round reads the
//! branch's ref (a file read on a local store) and, when the head moved, pushes it; a
//! round that fails for a reason that may pass (the remote unreachable a moment) is tried
//! again the next round, and one that cannot pass (the remote's branch diverged) ends the
//! follow. Nothing is kept between rounds but the last head pushed, so a follower killed
//! at any point resumes by being started again: its first push sends what is missing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use scion_core::format::{Locator, Parents};
use scion_core::{BranchRef, Scion};
use serde::Serialize;

use crate::{push, PushOptions, PushReport, Remote, RemoteError, RemoteResult};

/// How to follow.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    pub push: PushOptions,
    /// How often the branch's ref is read.
    pub interval: Duration,
    /// Stop after this long (run until stopped when `None`).
    pub duration: Option<Duration>,
}

impl Default for FollowOptions {
    fn default() -> Self {
        FollowOptions {
            push: PushOptions::default(),
            interval: Duration::from_millis(100),
            duration: None,
        }
    }
}

/// One push a follower made.
#[derive(Debug, Clone, Serialize)]
pub struct FollowPush {
    pub report: PushReport,
    /// Versions of the branch this push brought to the remote (its first-parent line
    /// since the last head pushed).
    pub versions: u64,
    /// From the oldest of them being made to the remote's ref naming it, in milliseconds:
    /// the most the remote lagged behind during this round.
    pub lag_ms: u64,
}

/// What a follower did, when it stopped.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FollowSummary {
    pub pushes: u64,
    pub versions: u64,
    /// Rounds whose push failed for a reason that may pass, tried again.
    pub retries: u64,
    /// Per version: from being made to being at the remote, in milliseconds.
    pub lag_p50_ms: u64,
    pub lag_p99_ms: u64,
    pub lag_max_ms: u64,
}

/// Follow `b` of `local` to `remote` until `stop` is set or `opts.duration` passes;
/// `on_push` hears of every push, `on_retry` of every failure tried again.
pub fn follow(
    local: &Scion,
    remote: &Remote,
    b: &BranchRef,
    opts: &FollowOptions,
    stop: &AtomicBool,
    mut on_push: impl FnMut(&FollowPush),
    mut on_retry: impl FnMut(&RemoteError),
) -> RemoteResult<FollowSummary> {
    let started = Instant::now();
    // What the remote holds now: a follower started again counts the versions it missed.
    let dst = BranchRef::new(
        b.db.clone(),
        opts.push.as_branch.clone().unwrap_or(b.branch.clone()),
    );
    let mut pushed: Option<Locator> = crate::head_of(&remote.store, &dst)?.map(|r| r.root);
    let mut lags: Vec<u64> = Vec::new();
    let mut summary = FollowSummary::default();
    loop {
        let round = Instant::now();
        let (r, _) = local.engine().read_ref(b)?;
        if pushed != Some(r.root) {
            let silent = scion_core::progress::ProgressSink::default();
            match push(local, remote, b, &opts.push, &*silent) {
                Ok(report) => {
                    let now_ms = unix_ms(local)?;
                    let made = made_since(local, r.root, pushed)?;
                    let version_lags: Vec<u64> =
                        made.iter().map(|m| now_ms.saturating_sub(*m)).collect();
                    let tick = FollowPush {
                        report,
                        versions: version_lags.len() as u64,
                        lag_ms: version_lags.iter().copied().max().unwrap_or(0),
                    };
                    summary.pushes += 1;
                    summary.versions += tick.versions;
                    lags.extend(version_lags);
                    pushed = Some(r.root);
                    on_push(&tick);
                }
                Err(e) if may_pass(&e) => {
                    summary.retries += 1;
                    on_retry(&e);
                }
                Err(e) => return Err(e),
            }
        }
        let done =
            stop.load(Ordering::Relaxed) || opts.duration.is_some_and(|d| started.elapsed() >= d);
        if done {
            break;
        }
        if let Some(rest) = opts.interval.checked_sub(round.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    lags.sort_unstable();
    let at = |q: f64| -> u64 {
        if lags.is_empty() {
            return 0;
        }
        lags[((lags.len() as f64 * q).ceil() as usize).clamp(1, lags.len()) - 1]
    };
    summary.lag_p50_ms = at(0.50);
    summary.lag_p99_ms = at(0.99);
    summary.lag_max_ms = lags.last().copied().unwrap_or(0);
    Ok(summary)
}

/// Whether a push may succeed if tried again as it is: the store briefly unavailable, a
/// race lost to a writer here, a commit outlived by `gc`.
fn may_pass(e: &RemoteError) -> bool {
    match e {
        RemoteError::Engine(e) => e.is_retryable(),
        RemoteError::Core(e) => e.is_retryable(),
        _ => false,
    }
}

/// The local store's clock, in Unix milliseconds (what root records' "made at" says).
fn unix_ms(s: &Scion) -> RemoteResult<u64> {
    let now = s.engine().store_clock()?.as_system_time();
    Ok(now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64))
}

/// When each version on `head`'s first-parent line since `since` was made (Unix ms, from
/// its root record), newest first; at most 100,000 of them. `since` is a version this store
/// holds (the remote's head was pushed from here or pulled).
fn made_since(s: &Scion, head: Locator, since: Option<Locator>) -> RemoteResult<Vec<u64>> {
    // A line that passes beside `since` (it was merged in, not built on) ends where it
    // gets older than `since`.
    let floor = match since {
        Some(v) => s
            .engine()
            .root_record(&v)
            .ok()
            .and_then(|r| r.ancestry)
            .map_or(0, |a| a.made_at_ms),
        None => 0,
    };
    let mut out = Vec::new();
    let mut at = head;
    while Some(at) != since && out.len() < 100_000 {
        let Some(ancestry) = s.engine().root_record(&at)?.ancestry else {
            break;
        };
        if ancestry.made_at_ms < floor {
            break;
        }
        out.push(ancestry.made_at_ms);
        match ancestry.parents {
            Parents::One(p) | Parents::Two(p, _) => at = p,
            Parents::None => break,
        }
        // A branch new at the remote: only its head counts.
        if since.is_none() {
            break;
        }
    }
    Ok(out)
}
