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
    pub janitor_compacted: Counter,
    pub gc_reclaimed_bytes: Counter,
    pub refused_requests: Family<ReasonLabels, Counter>,
    pub reconciles: Counter,
    /// Pushes of followed branches (`scion serve --follow`), the lag each closed, and
    /// rounds that failed.
    pub follow_pushes: Counter,
    pub follow_lag_seconds: Histogram,
    pub follow_failures: Counter,
    /// The process's page cache ([`scion_core::PageCache`]), read at each scrape.
    page_cache_hits: Counter,
    page_cache_decodes: Counter,
    page_cache_waits: Counter,
    page_cache_bytes: Gauge,
    page_cache_capacity_bytes: Gauge,
    page_cache_pages: Gauge,
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
            janitor_compacted: Counter::default(),
            gc_reclaimed_bytes: Counter::default(),
            refused_requests: Family::default(),
            reconciles: Counter::default(),
            follow_pushes: Counter::default(),
            follow_lag_seconds: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            follow_failures: Counter::default(),
            page_cache_hits: Counter::default(),
            page_cache_decodes: Counter::default(),
            page_cache_waits: Counter::default(),
            page_cache_bytes: Gauge::default(),
            page_cache_capacity_bytes: Gauge::default(),
            page_cache_pages: Gauge::default(),
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
                "janitor_compacted",
                "Branches the janitor compacted because small commits had scattered their pages",
                m.janitor_compacted.clone(),
            );
            r.register(
                "gc_reclaimed_bytes",
                "Bytes the janitor's GC runs reclaimed",
                m.gc_reclaimed_bytes.clone(),
            );
            r.register(
                "refused_requests",
                "Requests refused before reaching the API (wrong uid, missing, wrong or expired token, a scoped token's missing grant)",
                m.refused_requests.clone(),
            );
            // Every reason exists from the first scrape, at 0: a dashboard's rate() of a
            // series that appears only on the first refusal misses that refusal.
            for reason in REFUSAL_REASONS {
                let _ = m.refused_requests.get_or_create(&ReasonLabels { reason });
            }
            r.register(
                "reconciles",
                "Times capture compared a checkout page by page because its cursor could not resume",
                m.reconciles.clone(),
            );
            r.register(
                "follow_pushes",
                "Pushes of followed branches to their remotes",
                m.follow_pushes.clone(),
            );
            r.register(
                "follow_lag_seconds",
                "Per push of a followed branch: from the oldest version it brought being made to the remote's ref naming it",
                m.follow_lag_seconds.clone(),
            );
            r.register(
                "follow_failures",
                "Rounds of a followed branch that failed (tried again)",
                m.follow_failures.clone(),
            );
            r.register(
                "page_cache_hits",
                "Page reads served from the process's cache of decoded pages",
                m.page_cache_hits.clone(),
            );
            r.register(
                "page_cache_decodes",
                "Pages decoded and verified from their frames (the cache's misses)",
                m.page_cache_decodes.clone(),
            );
            r.register(
                "page_cache_waits",
                "Page reads that waited for another thread's decode of the same page",
                m.page_cache_waits.clone(),
            );
            r.register(
                "page_cache_bytes",
                "What the cached pages weigh (page bytes and per-entry overhead)",
                m.page_cache_bytes.clone(),
            );
            r.register(
                "page_cache_capacity_bytes",
                "The page cache's bound (SCION_PAGE_CACHE; 0: off)",
                m.page_cache_capacity_bytes.clone(),
            );
            r.register(
                "page_cache_pages",
                "Pages the cache holds",
                m.page_cache_pages.clone(),
            );
        }
        m
    }
}

/// The two exposition formats a scraper may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// OpenMetrics 1.0, which Prometheus asks for first in its `Accept` header.
    OpenMetrics,
    /// Prometheus text format 0.0.4, for every other reader (`curl`, `promtool check
    /// metrics`, older scrapers).
    Text,
}

impl Exposition {
    /// The format an `Accept` header asks for.
    pub(crate) fn from_accept(accept: Option<&str>) -> Exposition {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Exposition::OpenMetrics,
            _ => Exposition::Text,
        }
    }

    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Exposition::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

impl Metrics {
    pub fn render(&self, format: Exposition) -> String {
        let registry = self.registry.lock().expect("registry lock");
        // Under the registry's lock: two scrapes at once advance the counters once.
        self.read_page_cache();
        let mut out = String::new();
        encode(&mut out, &registry).expect("writing to a String cannot fail");
        drop(registry);
        match format {
            Exposition::OpenMetrics => out,
            Exposition::Text => openmetrics_to_text(&out),
        }
    }

    /// Bring the page cache's figures up to date: its counters only grow, so each of ours
    /// is advanced by what it moved since the last scrape.
    fn read_page_cache(&self) {
        let s = scion_core::PageCache::process().stats();
        for (counter, now) in [
            (&self.page_cache_hits, s.hits),
            (&self.page_cache_decodes, s.decodes),
            (&self.page_cache_waits, s.waits),
        ] {
            counter.inc_by(now.saturating_sub(counter.get()));
        }
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.page_cache_bytes.set(gauge(s.used_bytes));
        self.page_cache_capacity_bytes.set(gauge(s.capacity_bytes));
        self.page_cache_pages.set(gauge(s.pages));
    }

    /// Count a refused request; `reason` is one of the reasons `REFUSAL_REASONS` lists.
    pub(crate) fn refuse(&self, reason: &'static str) {
        debug_assert!(REFUSAL_REASONS.contains(&reason), "{reason}");
        self.refused_requests
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }
}

/// Why a request is refused before it reaches the API, as `scion_refused_requests_total`
/// labels them.
pub(crate) const REFUSAL_REASONS: [&str; 7] = [
    "other_uid",
    "missing_token",
    "wrong_token",
    "token_expired",
    "token_file",
    "missing_grant",
    "read_only",
];

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

/// OpenMetrics as the Prometheus text format reads it: a counter family is named by its
/// sample (`scion_x_total`, where OpenMetrics names it `scion_x`), and there is no `# EOF`
/// or `# UNIT` line. Samples are the same bytes in both.
fn openmetrics_to_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let described = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match described {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let name = if counters.contains(name) {
                    format!("{name}_total")
                } else {
                    name.to_string()
                };
                out.push_str(&format!("{prefix}{name} {tail}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::metrics::{Exposition, Metrics};

    #[test]
    fn the_text_format_names_counters_by_their_samples_and_has_no_eof() {
        let m = Metrics::default();
        m.committed_bytes.inc_by(7);
        let open = m.render(Exposition::OpenMetrics);
        assert!(open.contains("# TYPE scion_committed_bytes counter\n"));
        assert!(open.ends_with("# EOF\n"));
        let text = m.render(Exposition::Text);
        assert!(text.contains("# HELP scion_committed_bytes_total Page bytes committed"));
        assert!(text.contains(
            "# TYPE scion_committed_bytes_total counter\nscion_committed_bytes_total 7\n"
        ));
        assert!(text.contains("# TYPE scion_flush_seconds histogram\n"));
        assert!(!text.contains("# EOF"));
        let samples = |s: &str| {
            s.lines()
                .filter(|l| !l.starts_with('#'))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(samples(&open), samples(&text));
    }

    #[test]
    fn prometheus_gets_openmetrics_and_everyone_else_the_text_format() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(
            Exposition::from_accept(Some(prometheus)),
            Exposition::OpenMetrics
        );
        assert_eq!(Exposition::from_accept(Some("*/*")), Exposition::Text);
        assert_eq!(Exposition::from_accept(None), Exposition::Text);
    }
}
