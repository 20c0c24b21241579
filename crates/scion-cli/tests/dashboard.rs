//! The Grafana dashboard in `deploy/grafana/scion-daemon.json` reads what a live daemon
//! exports: every series its expressions name is a family of a real scrape taken under
//! load, every family is on the dashboard, and `promtool check metrics` (Prometheus' own
//! linter) passes the scrape.

mod served;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use served::Served;

/// Every PromQL expression of the dashboard, with the title of its panel.
fn expressions(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut todo = vec![dashboard];
    while let Some(v) = todo.pop() {
        if let Some(panels) = v["panels"].as_array() {
            todo.extend(panels);
        }
        for t in v["targets"].as_array().into_iter().flatten() {
            out.push((
                v["title"].as_str().unwrap_or("?").to_string(),
                t["expr"]
                    .as_str()
                    .expect("a target without expr")
                    .to_string(),
            ));
        }
    }
    out
}

/// The `scion_*` series names in a PromQL expression.
fn series_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(at) = expr[i..].find("scion_") {
        let start = i + at;
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        let boundary =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        if boundary {
            names.insert(expr[start..end].to_string());
        }
        i = end.max(start + 1);
    }
    names
}

/// The families of a scrape in the Prometheus text format: name to type.
fn families(scrape: &str) -> BTreeMap<String, String> {
    scrape
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect()
}

/// The family a series name is read from: itself for a gauge or a counter (named by its
/// sample in this format), or a histogram's `_bucket`, `_sum` and `_count`.
fn family_of<'f>(name: &str, families: &'f BTreeMap<String, String>) -> Option<&'f str> {
    if let Some((f, t)) = families.get_key_value(name) {
        return (t != "histogram").then_some(f.as_str());
    }
    ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
        let base = name.strip_suffix(suffix)?;
        let (f, t) = families.get_key_value(base)?;
        (t == "histogram").then_some(f.as_str())
    })
}

/// The value of an unlabelled sample.
fn sample(scrape: &str, name: &str) -> f64 {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no sample {name} in\n{scrape}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_dashboard_reads_families_a_live_daemon_exports_and_promtool_passes_the_scrape() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/grafana/scion-daemon.json"
    );
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();

    // Load: two sessions, writers committing to their checkouts, flushes between bursts,
    // a burst left unflushed so capture lag is a live series when scraped, and a TCP
    // client without the token (refused).
    let dir = tempfile::tempdir().unwrap();
    let mut s = Served::prepare(dir.path(), 200);
    let token = dir.path().join("token");
    std::fs::write(&token, "dashboard-token\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    s.start(&[
        "--flush-every",
        "1h",
        "--listen",
        &addr,
        "--token-file",
        token.to_str().unwrap(),
    ]);
    {
        use std::io::Read;
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        write!(
            c,
            "GET /v1/databases HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut said = String::new();
        c.read_to_string(&mut said).unwrap();
        assert!(said.starts_with("HTTP/1.1 401"), "{said}");
    }
    let mut sessions = Vec::new();
    for branch in ["a", "b"] {
        let opened = s
            .post(
                "/v1/sessions",
                json!({"db": "shop", "branch": branch, "fork_from": "main"}),
            )
            .unwrap();
        let id = opened.body["id"].as_str().unwrap().to_string();
        let file = std::path::PathBuf::from(opened.body["path"].as_str().unwrap());
        sessions.push((id, file));
    }
    for round in 0..4 {
        for (id, file) in &sessions {
            let c = rusqlite::Connection::open(file).unwrap();
            c.busy_timeout(Duration::from_secs(5)).unwrap();
            for n in 0..50 {
                c.execute(
                    "INSERT INTO marks(writer, seq) VALUES (?1, ?2)",
                    rusqlite::params![format!("w{round}"), n],
                )
                .unwrap();
            }
            if round < 3 {
                s.post(&format!("/v1/sessions/{id}/flush"), json!({}))
                    .unwrap();
            }
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let scrape = s.client().raw("GET", "/metrics", None, &[]).unwrap();
    let scrape = scrape.body.as_str().unwrap().to_string();

    // What Prometheus itself asks for: OpenMetrics, the same samples.
    let prometheus_accept =
        "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    let open = s
        .client()
        .raw("GET", "/metrics", None, &[("accept", prometheus_accept)])
        .unwrap();
    let open = open.body.as_str().unwrap().to_string();
    assert!(
        open.ends_with("# EOF\n") && !scrape.contains("# EOF"),
        "{open}"
    );
    assert!(
        open.contains("# TYPE scion_committed_bytes counter\n"),
        "{open}"
    );

    let families = families(&scrape);
    assert!(families.len() >= 10, "{scrape}");
    let mut used = BTreeSet::new();
    let mut unknown = Vec::new();
    let exprs = expressions(&dashboard);
    assert!(exprs.len() >= 10, "{} expressions", exprs.len());
    for (title, expr) in &exprs {
        let names = series_names(expr);
        assert!(
            !names.is_empty(),
            "panel {title}: {expr} reads no scion_ series"
        );
        for name in names {
            match family_of(&name, &families) {
                Some(f) => {
                    used.insert(f.to_string());
                }
                None => unknown.push(format!("panel {title}: {name} (in {expr})")),
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "series the daemon does not export:\n{}\nfamilies: {families:?}",
        unknown.join("\n")
    );
    let left_out: Vec<_> = families.keys().filter(|f| !used.contains(*f)).collect();
    assert!(left_out.is_empty(), "families no panel shows: {left_out:?}");

    // The scrape was taken under load: the panels have something to draw.
    assert_eq!(sample(&scrape, "scion_sessions_open"), 2.0);
    assert!(
        sample(&scrape, "scion_flush_seconds_count") >= 6.0,
        "{scrape}"
    );
    assert!(sample(&scrape, "scion_committed_bytes_total") > 0.0);
    assert!(sample(&scrape, "scion_committed_pages_total") > 0.0);
    assert!(
        scrape.contains("scion_capture_lag_bytes{branch="),
        "{scrape}"
    );
    assert!(
        scrape.contains("scion_store_requests_total{op=\"put\",outcome=\"ok\"}"),
        "{scrape}"
    );

    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; ./scripts/test installs it)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(scrape.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}\n{scrape}"
    );
    eprintln!(
        "dashboard: {} expressions over {} families; promtool check metrics on a {}-line scrape: ok",
        exprs.len(),
        families.len(),
        scrape.lines().count()
    );
}

#[test]
fn series_names_are_read_out_of_promql() {
    let names = series_names(
        "histogram_quantile(0.99, sum by (le) (rate(scion_flush_seconds_bucket[5m]))) / scion_x",
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["scion_flush_seconds_bucket", "scion_x"]
    );
    assert!(series_names("my_scion_y").is_empty());
}
