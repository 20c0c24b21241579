//! The janitor: on a schedule, reap branches whose TTL passed (never one with a live
//! session or a dirty or open checkout: the engine's GC keeps those), collect garbage
//! with the store's grace and, when configured, compact branches that many small
//! commits left fragmented. Each emits events. Each round also re-reads the store's
//! settings, so a `scion config --page-compression` made while the daemon runs reaches
//! its commits within one round.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scion_core::described::Context;
use scion_core::ops::gc::GcReport;
use tokio::sync::watch;

use crate::error::ApiResult;
use crate::events::EventKind;
use crate::handler::blocking;
use crate::state::Shared;

/// One GC run: branches past their TTL are reaped, unreachable segments older than
/// `grace` deleted.
pub async fn gc(shared: &Arc<Shared>, grace: Duration, force: bool) -> ApiResult<GcReport> {
    let report = blocking(shared, Context::Other, move |s| s.gc(grace, force)).await?;
    for b in &report.reaped {
        shared.metrics.janitor_reaped.inc();
        shared
            .events
            .emit(EventKind::Reaped, serde_json::json!({ "branch": b }));
    }
    shared
        .metrics
        .gc_reclaimed_bytes
        .inc_by(report.reclaimed_bytes);
    shared.events.emit(
        EventKind::Gc,
        serde_json::to_value(&report).unwrap_or_default(),
    );
    Ok(report)
}

/// Reap expired branches now.
pub async fn reap(shared: &Arc<Shared>) -> ApiResult<scion_core::ops::gc::ReapReport> {
    let report = blocking(shared, Context::Other, |s| s.reap_expired()).await?;
    for b in &report.reaped {
        shared.metrics.janitor_reaped.inc();
        shared
            .events
            .emit(EventKind::Reaped, serde_json::json!({ "branch": b }));
    }
    Ok(report)
}

/// Compact the branches fragmented past the policy (scattered pages only, idle heads).
pub async fn compact_fragmented(
    shared: &Arc<Shared>,
    policy: scion_core::ops::compact::FragmentationPolicy,
    judged: &mut HashMap<String, scion_core::format::Locator>,
) -> ApiResult<scion_core::ops::compact::FragmentationSweep> {
    let mut memo = std::mem::take(judged);
    let (sweep, memo) = blocking(shared, Context::Other, move |s| {
        let sweep = s.compact_fragmented(policy, &mut memo)?;
        Ok::<_, scion_core::CoreError>((sweep, memo))
    })
    .await?;
    *judged = memo;
    for c in &sweep.compacted {
        shared.metrics.janitor_compacted.inc();
        shared.events.emit(
            EventKind::Compacted,
            serde_json::to_value(c).unwrap_or_default(),
        );
    }
    Ok(sweep)
}

/// Re-read the store's settings; a failure is logged and the daemon keeps the ones it had.
async fn follow_settings(shared: &Arc<Shared>) {
    match blocking(shared, Context::Other, |s| s.engine().reload_settings()).await {
        Ok(Some(change)) => tracing::info!(
            before = %change.before,
            after = %change.after,
            "the store's page compression changed: new pages are stored the new way"
        ),
        Ok(None) => {}
        Err(e) => tracing::warn!(
            error = %e.body.message,
            "re-reading the store's settings failed; keeping the ones read before"
        ),
    }
}

pub async fn run(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut last_gc = Instant::now();
    // Heads found not fragmented enough, so later rounds skip them until they move.
    let mut judged = HashMap::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(shared.config.janitor_every) => {}
            _ = stop.changed() => return,
        }
        follow_settings(&shared).await;
        let gc_due = shared
            .config
            .gc_every
            .is_some_and(|every| last_gc.elapsed() >= every);
        let done = if gc_due {
            last_gc = Instant::now();
            gc(&shared, shared.scion.engine().min_grace(), false)
                .await
                .map(drop)
        } else {
            reap(&shared).await.map(drop)
        };
        if let Err(e) = done {
            tracing::warn!(error = %e.body.message, "janitor run failed");
        }
        if let Some(policy) = shared.config.compact_fragmented {
            if let Err(e) = compact_fragmented(&shared, policy, &mut judged).await {
                tracing::warn!(error = %e.body.message, "janitor compaction failed");
            }
        }
    }
}
