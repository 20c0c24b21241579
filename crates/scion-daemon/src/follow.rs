//! `scion serve --follow REMOTE:db@branch`: each followed branch is pushed to its remote as
//! it moves, on a thread of its own (a push is blocking work: reads here, uploads there).
//! A round that fails is counted and tried again; a follow that cannot go on (the remote's
//! branch moved on its own: someone must pull and merge) is logged and started again a
//! little later, so it resumes once the branches meet again. The lag of every push goes to
//! the metrics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use scion_core::progress::ProgressSink;
use scion_remote::{FollowOptions, Remote};

use crate::config::FollowTarget;
use crate::state::Shared;

/// How long a follow that stopped waits before it starts again.
const RESTART_AFTER: Duration = Duration::from_secs(10);

/// Start a thread per followed branch; each ends once `stop` is set.
pub fn start(shared: &Arc<Shared>, stop: Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    shared
        .config
        .follow
        .iter()
        .map(|target| {
            let (shared, stop, target) = (shared.clone(), stop.clone(), target.clone());
            std::thread::spawn(move || follow_one(&shared, &target, &stop))
        })
        .collect()
}

fn follow_one(shared: &Shared, target: &FollowTarget, stop: &AtomicBool) {
    let opts = FollowOptions {
        interval: shared.config.follow_every,
        ..Default::default()
    };
    let metrics = &shared.metrics;
    while !stop.load(Ordering::Relaxed) {
        let result = Remote::open(&shared.scion, &target.remote, ProgressSink::default())
            .and_then(|remote| {
                tracing::info!(branch = %target.branch, remote = %target.remote, location = %remote.location, "following");
                scion_remote::follow(
                    &shared.scion,
                    &remote,
                    &target.branch,
                    &opts,
                    stop,
                    |tick| {
                        metrics.follow_pushes.inc();
                        metrics
                            .follow_lag_seconds
                            .observe(tick.lag_ms as f64 / 1000.0);
                        tracing::debug!(branch = %target.branch, version = tick.report.remote_version, lag_ms = tick.lag_ms, "pushed");
                    },
                    |e| {
                        metrics.follow_failures.inc();
                        tracing::warn!(branch = %target.branch, error = %e, "push failed; trying again");
                    },
                )
            });
        match result {
            Ok(_) => return,
            Err(e) => {
                metrics.follow_failures.inc();
                tracing::error!(branch = %target.branch, remote = %target.remote, error = %e, "following stopped; starting again in 10 s");
            }
        }
        let mut waited = Duration::ZERO;
        while waited < RESTART_AFTER && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
            waited += Duration::from_millis(200);
        }
    }
}
