//! Prometheus metrics (`/metrics`, text format, `scion_` names).

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::{text::encode, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use scion_store::{Outcome, RequestObserver, StoreOp};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    pub op: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabels {
    pub op: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BranchLabels {
    pub branch: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

pub struct Metrics {
    registry: Mutex<Registry>,
    pub sessions_open: Gauge,
    pub capture_lag_bytes: Family<BranchLabels, Gauge>,
    pub durable_age_seconds: Family<BranchLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    pub flush_seconds: Histogram,
    pub committed_bytes: Counter,
    pub committed_pages: Counter,
    pub store_requests: Family<StoreLabels, Counter>,
    pub store_request_seconds: Family<OpLabels, Histogram>,
    pub janitor_reaped: Counter,
    pub gc_reclaimed_bytes: Counter,
    pub refused_requests: Family<ReasonLabels, Counter>,
    pub reconciles: Counter,
}

fn latency_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Metrics {
            registry: Mutex::new(Registry::with_prefix("scion")),
            sessions_open: Gauge::default(),
            capture_lag_bytes: Family::default(),
            durable_age_seconds: Family::default(),
            flush_seconds: latency_buckets(),
            committed_bytes: Counter::default(),
            committed_pages: Counter::default(),
            store_requests: Family::default(),
            store_request_seconds: Family::new_with_constructor(latency_buckets),
            janitor_reaped: Counter::default(),
            gc_reclaimed_bytes: Counter::default(),
            refused_requests: Family::default(),
            reconciles: Counter::default(),
        };
        {
            let mut r = m.registry.lock().expect("registry lock");
            r.register("sessions_open", "Sessions open", m.sessions_open.clone());
            r.register(
                "capture_lag_bytes",
                "Bytes committed by writers and not yet durable, per branch under capture",
                m.capture_lag_bytes.clone(),
            );
            r.register(
                "durable_age_seconds",
                "Age of the oldest captured transaction not yet durable, per branch",
                m.durable_age_seconds.clone(),
            );
            r.register(
                "flush_seconds",
                "Latency of session flushes",
                m.flush_seconds.clone(),
            );
            r.register(
                "committed_bytes",
                "Page bytes committed by session flushes",
                m.committed_bytes.clone(),
            );
            r.register(
                "committed_pages",
                "Pages committed by session flushes",
                m.committed_pages.clone(),
            );
            r.register(
                "store_requests",
                "Store requests by operation and outcome",
                m.store_requests.clone(),
            );
            r.register(
                "store_request_seconds",
                "Store request latency by operation",
                m.store_request_seconds.clone(),
            );
            r.register(
                "janitor_reaped",
                "Branches the janitor reaped after their TTL",
                m.janitor_reaped.clone(),
            );
            r.register(
                "gc_reclaimed_bytes",
                "Bytes the janitor's GC runs reclaimed",
                m.gc_reclaimed_bytes.clone(),
            );
            r.register(
                "refused_requests",
                "Requests refused before reaching the API (wrong uid, missing or wrong token)",
                m.refused_requests.clone(),
            );
            r.register(
                "reconciles",
                "Times capture compared a checkout page by page because its cursor could not resume",
                m.reconciles.clone(),
            );
        }
        m
    }
}

impl Metrics {
    pub fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry.lock().expect("registry lock"))
            .expect("writing to a String cannot fail");
        out
    }

    pub fn refuse(&self, reason: &'static str) {
        self.refused_requests
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }
}

/// Store requests, observed on the way to the store.
pub struct StoreObserver(pub std::sync::Arc<Metrics>);

impl RequestObserver for StoreObserver {
    fn observe(&self, op: StoreOp, outcome: Outcome, took: Duration) {
        self.0
            .store_requests
            .get_or_create(&StoreLabels {
                op: op.name(),
                outcome: outcome.name(),
            })
            .inc();
        self.0
            .store_request_seconds
            .get_or_create(&OpLabels { op: op.name() })
            .observe(took.as_secs_f64());
    }
}
