//! `scion bench fork --quick` runs end to end and its counted (never timed) figures hold.

mod common;

use std::collections::BTreeMap;

use common::*;

#[test]
fn bench_fork_quick_reports_counted_costs() {
    let s = Session::new();
    let dir = s.path("bench");
    let out = s.ok(&[
        "bench",
        "fork",
        "--quick",
        "--json",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("well-formed JSON");
    assert!(!v["machine"]["cpu"].as_str().unwrap().is_empty());
    for f in v["forks"].as_array().unwrap() {
        assert_eq!(f["objects_per_fork"], 1, "a fork is one object");
        assert!(f["bytes_per_fork"].as_u64().unwrap() <= 512);
        assert_eq!(f["objects_for_100_forks"], 100);
        assert_eq!(f["rollback"]["objects"], 2);
        assert_eq!(f["promote"]["objects"], 2);
        for mv in ["rollback", "promote"] {
            let bytes = f[mv]["bytes"].as_u64().unwrap();
            let history = f[mv]["history_bytes"].as_u64().unwrap();
            assert!(history > 0, "{mv} is recorded in the head history");
            assert!(
                bytes - history <= 1024,
                "{mv}: {bytes} B, {history} B of history"
            );
        }
        assert!(f["fork_at_head"]["runs"].as_u64().unwrap() >= 3);
        assert!(f["fork_with_checkout"]["runs"].as_u64().unwrap() >= 3);
    }
    assert!(
        v["commit_cost"]["store_bytes_added_per_commit"]
            .as_f64()
            .unwrap()
            <= 1536.0
    );
    assert_eq!(v["clean_checkpoint"]["data_objects_written"], 0);
    assert!(v["refresh"]["rollback"]["runs"].as_u64().unwrap() >= 3);
    assert!(
        v["refresh"]["rollback_discarding"]["runs"]
            .as_u64()
            .unwrap()
            >= 3
    );
    for side in ["materialize", "materialize_uncompressed", "export"] {
        let m = &v["against_cp"][side];
        assert!(m["scion"]["runs"].as_u64().unwrap() >= 3, "{side}");
        assert!(m["cp"]["runs"].as_u64().unwrap() >= 3, "{side}");
    }
    for d in v["diffs"].as_array().unwrap() {
        assert_eq!(d["rows_changed"], 10);
        assert!(d["attach_join"]["runs"].as_u64().unwrap() >= 3);
        assert!(d["time_store_only"]["runs"].as_u64().unwrap() >= 3);
    }
    assert!(!dir.exists(), "the bench removes its working directory");
}

fn ops_per_step(w: &serde_json::Value) -> BTreeMap<u64, u64> {
    w["ops_per_step"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.parse().unwrap(), v.as_u64().unwrap()))
        .collect()
}

/// The quick profile completes every workflow with the harness's op counts, depth and
/// fanout bounds, a row from every eval, a deterministic seed and tree, and harness-shaped
/// e2e files. Timings are never checked.
#[test]
fn branchbench_quick_holds_the_harness_invariants() {
    let s = Session::new();
    let out_dir = s.path("out");
    let run = |workflows: &str| -> serde_json::Value {
        let mut args = vec!["bench", "branchbench", "--profile", "quick", "--json"];
        let out = out_dir.to_str().unwrap().to_string();
        let work = s.path("work").to_str().unwrap().to_string();
        args.extend(["--out", &out, "--dir", &work]);
        if !workflows.is_empty() {
            args.extend(["--workflows", workflows]);
        }
        serde_json::from_str(&s.ok(&args)).expect("well-formed JSON")
    };
    let v = run("");
    assert_eq!(v["header"]["seed_rebuild_identical"], true);
    assert_eq!(v["header"]["seed"]["sha256"].as_str().unwrap().len(), 64);
    let workflows = v["workflows"].as_array().unwrap();
    assert_eq!(workflows.len(), 5);
    for w in workflows {
        let name = w["workflow"].as_str().unwrap();
        // The failure samples say which operation abandoned a step, should one ever be.
        let why = &w["failure_samples"];
        assert_eq!(
            w["completed_steps"], w["total_steps"],
            "{name}: every step completes; failures: {why}"
        );
        assert_eq!(w["skipped_steps"], 0, "{name}; failures: {why}");
        assert_eq!(w["timed_out"], false, "{name}");
        assert_eq!(w["ops_mismatches"], 0, "{name}: ops per step");
        assert!(
            w["failed_statements"].as_object().unwrap().is_empty(),
            "{name}: {:?}",
            w["failure_samples"]
        );
        assert_eq!(
            w["evals_without_row"], 0,
            "{name}: every eval returned a row"
        );
        assert!(w["evals"].as_u64().unwrap() >= w["completed_steps"].as_u64().unwrap());
        assert!(w["max_depth"].as_u64().unwrap() <= w["depth_bound"].as_u64().unwrap());
        assert_eq!(
            w["depth_bound"].as_u64().unwrap(),
            w["tuple"]["max_depth"].as_u64().unwrap() + 1,
            "{name}: the harness rule lets nodes reach D+1"
        );
        assert_eq!(w["fanout_overruns"], 0, "{name}: fanout limits hold");
        assert_eq!(
            w["checkpoints"], w["completed_steps"],
            "{name}: one publish per step"
        );
        let ops = ops_per_step(w);
        let counts: Vec<u64> = ops.keys().copied().collect();
        let expected: &[u64] = match name {
            "simulation" => &[55],
            "failure_repro" => &[54, 55],
            "data_cleaning" => &[5],
            "mcts" => &[4, 6],
            "software_dev" => &[6, 8],
            other => panic!("unexpected workflow {other}"),
        };
        assert!(
            counts.iter().all(|c| expected.contains(c)),
            "{name}: ops per step {ops:?}, expected among {expected:?}"
        );
        if name == "failure_repro" {
            assert_eq!(
                ops,
                BTreeMap::from([(54, 5), (55, 5)]),
                "45 DDL + 450 DML in 10 steps"
            );
        }
        // Checkouts stay until their branch goes, as the harness keeps them: the checkout
        // files' peak is counted apart from the store's, and both fit in the whole's.
        let st = &w["storage"];
        let (all, store, checkouts) = (
            st["peak"]["physical"].as_u64().unwrap(),
            st["peak_store"]["physical"].as_u64().unwrap(),
            st["peak_checkouts"]["physical"].as_u64().unwrap(),
        );
        assert!(checkouts > 0, "{name}: checkout files are kept: {st}");
        assert!(store <= all && checkouts <= all, "{name}: {st}");
        // The harness-shaped e2e file parses, carries its keys, and round-trips.
        let path = out_dir.join(format!("{}_e2e_stats.json", w["run_id"].as_str().unwrap()));
        let text = std::fs::read_to_string(&path).unwrap();
        let e2e: serde_json::Value = serde_json::from_str(&text).unwrap();
        for key in [
            "run_id",
            "backend",
            "workflow",
            "workers",
            "total_steps",
            "elapsed_sec",
            "max_runtime_sec",
            "timed_out",
            "completed_steps",
            "completed_ops",
            "worker_status",
            "storage_before_bytes",
            "storage_after_bytes",
            "storage_delta_bytes",
            "peak_live",
            "max_depth",
            "store_peak_bytes",
            "store_only_peak_bytes",
            "checkouts_peak_bytes",
            "reclaimed_bytes",
            "skipped_steps",
            "failed_statements",
        ] {
            assert!(e2e.get(key).is_some(), "{name}: e2e lacks {key}");
        }
        // As the harness writes them: steps per worker, "completed" workers, and op
        // times in Unix seconds.
        assert_eq!(
            e2e["total_steps"], w["tuple"]["steps"],
            "{name}: steps per worker"
        );
        for (_, status) in e2e["worker_status"].as_object().unwrap() {
            assert_eq!(status, "completed", "{name}");
        }
        let ops_path = out_dir.join(format!("{}_ops.jsonl", w["run_id"].as_str().unwrap()));
        let first_op: serde_json::Value = serde_json::from_str(
            std::fs::read_to_string(&ops_path)
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        let start = first_op["start_time"].as_f64().unwrap();
        assert!(start > 1.7e9, "{name}: start_time {start} is Unix time");
        assert!(first_op["end_time"].as_f64().unwrap() >= start);
        let again: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&e2e).unwrap()).unwrap();
        assert_eq!(again, e2e);
        let ops_file = out_dir.join(format!("{}_ops.jsonl", w["run_id"].as_str().unwrap()));
        let lines = std::fs::read_to_string(ops_file).unwrap();
        let completed_ops: u64 = e2e["completed_ops"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        let harness_ops = lines
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|r| r["op_type"] != 6 && r["cross_branch"] == false)
            .count() as u64;
        assert_eq!(harness_ops, completed_ops, "{name}: one record per op");
    }
    // Lockstep rounds give the same trees on a second run.
    let again = run("data_cleaning,mcts");
    for w in again["workflows"].as_array().unwrap() {
        let first = workflows
            .iter()
            .find(|f| f["workflow"] == w["workflow"])
            .unwrap();
        assert_eq!(w["depth_histogram"], first["depth_histogram"]);
        assert_eq!(w["ops_per_step"], first["ops_per_step"]);
        assert_eq!(w["peak_live"], first["peak_live"]);
    }
    assert!(!s.path("work/data_cleaning").exists(), "stores are removed");
}

/// All five workflows through the scion VFS: every step completes, no statement fails,
/// every eval returns a row, one publish per step; the report says how it connected.
#[test]
fn branchbench_quick_through_the_vfs_completes_every_workflow() {
    let s = Session::new();
    let work = s.path("work");
    let out = s.ok(&[
        "bench",
        "branchbench",
        "--profile",
        "quick",
        "--connect",
        "vfs",
        "--json",
        "--dir",
        work.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["header"]["connect"], "vfs");
    let workflows = v["workflows"].as_array().unwrap();
    assert_eq!(workflows.len(), 5);
    for w in workflows {
        let name = w["workflow"].as_str().unwrap();
        assert_eq!(w["completed_steps"], w["total_steps"], "{name}");
        assert!(
            w["failed_statements"].as_object().unwrap().is_empty(),
            "{name}: {:?}",
            w["failure_samples"]
        );
        assert_eq!(w["evals_without_row"], 0, "{name}");
        assert_eq!(
            w["checkpoints"], w["completed_steps"],
            "{name}: one publish per step"
        );
    }
    let deviations = v["header"]["deviations"].to_string();
    assert!(deviations.contains("scion VFS"), "{deviations}");
}

/// `scion bench <bench> --quick --json` in a directory of its own: the report, and the
/// directory (which the bench must remove).
fn quick(s: &Session, bench: &str, extra: &[&str]) -> (serde_json::Value, std::path::PathBuf) {
    let dir = s.path(bench);
    let mut args = vec![
        "bench",
        bench,
        "--quick",
        "--json",
        "--dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = s.ok(&args);
    (serde_json::from_str(&out).unwrap(), dir)
}

/// `scion bench isolation --quick` measures scion and each baseline; the PostgreSQL rows run
/// when the test command started a server (SCION_BENCH_PG), and say why when not.
/// `--sizes` replaces the bench's own sizes.
#[test]
fn bench_isolation_quick_measures_every_method() {
    let s = Session::new();
    let (v, dir) = quick(&s, "isolation", &["--sizes", "1"]);
    assert_eq!(v["sizes"].as_array().unwrap().len(), 1);
    let size = &v["sizes"][0];
    assert_eq!(size["size_mib"], 1, "--sizes 1");
    let methods = size["methods"].as_array().unwrap();
    let names: Vec<&str> = methods
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert!(names[0].starts_with("scion"));
    assert!(names.contains(&"file copy"));
    assert!(names.contains(&"SQLite backup API"));
    assert!(names.contains(&"scion serve session (ephemeral fork)"));
    assert!(names.contains(&"scion VFS (fork + open through the VFS)"));
    let optional = |m: &serde_json::Value| {
        let name = m["method"].as_str().unwrap();
        name.starts_with("PostgreSQL") || name.starts_with("Python")
    };
    for m in methods.iter().filter(|m| !optional(m)) {
        assert!(m["per_test"]["runs"].as_u64().unwrap() >= 3);
    }
    // Measured by scripts/test-python, which has a Python with the package installed.
    let python: Vec<&serde_json::Value> = methods
        .iter()
        .filter(|m| m["method"].as_str().unwrap().starts_with("Python"))
        .collect();
    assert_eq!(
        python.len(),
        2,
        "the scion_db fixture and the file-copy fixture"
    );
    if std::env::var_os("SCION_BENCH_PYTHON").is_none() {
        for m in python {
            assert!(m["missing"].as_str().unwrap().contains("--python"), "{m}");
        }
    }
    assert_eq!(methods[0]["times_scion"], 1.0);
    let pg: Vec<&serde_json::Value> = methods
        .iter()
        .filter(|m| m["method"].as_str().unwrap().starts_with("PostgreSQL"))
        .collect();
    if std::env::var_os("SCION_BENCH_PG").is_some() {
        assert_eq!(pg.len(), 2, "WAL_LOG and FILE_COPY rows");
        for m in pg {
            assert!(m["per_test"]["runs"].as_u64().unwrap() >= 3, "{m}");
        }
        assert!(size["postgres_bytes"].as_u64().unwrap() > 0);
    } else {
        assert_eq!(pg.len(), 1);
        assert!(pg[0]["missing"]
            .as_str()
            .unwrap()
            .contains("SCION_BENCH_PG"));
    }
    assert!(!dir.exists());
}

/// `scion bench live --quick`: a session's flush of a single-row commit writes at most
/// 1.5 KiB to the store (counted, not timed), less than a checkpoint at rest reads and
/// writes; throughput and durable age are measured.
#[test]
fn bench_live_quick_measures_flush_throughput_and_durable_age() {
    let s = Session::new();
    let dir = s.path("live");
    let out = s.ok(&[
        "bench",
        "live",
        "--quick",
        "--json",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = &v["flush"][0];
    let bytes = row["flush_store_bytes"].as_u64().unwrap();
    assert!(
        bytes > 0 && bytes <= 1536,
        "single-row flush wrote {bytes} B"
    );
    assert!(row["flush"]["runs"].as_u64().unwrap() >= 3);
    assert!(row["checkpoint"]["runs"].as_u64().unwrap() >= 3);
    // Every writer committed in every round, the synchronous=NORMAL pair included.
    for row in [
        "without_session",
        "with_session",
        "with_barrier",
        "normal_without",
        "normal_with",
    ] {
        let rates = v["throughput"][row].as_array().unwrap();
        assert!(
            !rates.is_empty() && rates.iter().all(|r| r.as_f64().unwrap() > 0.0),
            "{row}: {}",
            v["throughput"]
        );
    }
    // One ratio a round for the second tier, each from that round's pair of runs.
    let ratios = v["throughput"]["barrier_round_ratios"].as_array().unwrap();
    assert_eq!(
        ratios.len(),
        v["throughput"]["with_barrier"].as_array().unwrap().len()
    );
    assert!(ratios.iter().all(|r| r.as_f64().unwrap() > 0.0));
    // The second tier's run measured its WAL (the writer wrote through the session's
    // checkout; capture tests pin the bound itself).
    let wal = v["throughput"]["barrier_wal_bytes"].as_u64().unwrap();
    assert!(wal > 0, "{}", v["throughput"]);
    // The session's own count of its barriers reached the report (whether any was due in
    // so short a run depends on the writer's pace).
    for k in ["barriers", "barriers_skipped"] {
        assert!(
            v["throughput"][k].as_u64().is_some(),
            "{k}: {}",
            v["throughput"]
        );
    }
    assert!(v["durable_age"]["samples"].as_u64().unwrap() > 0);
    assert!(!dir.exists());
}

/// `scion bench vfs --quick` measures every row; the commit's cost is counted, not timed:
/// two writes (segment, ref) of at most 1.5 KiB for a one-row update.
#[test]
fn bench_vfs_quick_counts_a_one_row_commit() {
    let s = Session::new();
    let (v, dir) = quick(&s, "vfs", &[]);
    let size = &v["sizes"][0];
    for row in ["fork_open_query", "lookups", "scan_cold", "scan_warm"] {
        for side in ["vfs", "native"] {
            assert!(
                size[row][side]["runs"].as_u64().unwrap() >= 3,
                "{row} {side}"
            );
        }
    }
    // A segment and the ref: no lease write, and page 1 is not rewritten for its change
    // counter alone (one page and its map path).
    assert_eq!(size["commit_puts"], 2, "{size}");
    let written = size["commit_bytes_written"].as_u64().unwrap();
    assert!(
        written > 0 && written <= 1536,
        "one-row commit wrote {written} B"
    );
    // The fragmented branch's cold scan makes more store reads than the seed's, and
    // `compact --scattered` brings them back down (counted, not timed).
    let reads = |k: &str| size[k].as_u64().unwrap();
    assert!(
        reads("scan_cold_fragmented_reads") > reads("scan_cold_reads"),
        "{size}"
    );
    assert!(
        reads("scan_cold_compacted_reads") < reads("scan_cold_fragmented_reads"),
        "{size}"
    );
    assert!(reads("compact_pages_rewritten") > 0, "{size}");
    assert!(!dir.exists(), "the bench's files are removed");
}

/// `scion bench merge --quick` merges one row on each side per run and pins what that costs
/// at the store in bytes, beside `scion diff` and the sqldiff alternative.
#[test]
fn bench_merge_quick_counts_a_one_row_merge() {
    let s = Session::new();
    let (v, dir) = quick(&s, "merge", &[]);
    let size = &v["sizes"][0];
    for row in ["dry_run", "merge", "sqldiff"] {
        assert!(size[row]["runs"].as_u64().unwrap() >= 3, "{row}");
    }
    // Both sides' one-row changes: a few leaves and the interior pages above them, as
    // `scion diff` of each side reads.
    let (pages, diff_pages) = (
        size["pages_read"].as_u64().unwrap(),
        size["diff_pages_read"].as_u64().unwrap(),
    );
    assert!(pages <= 2 * diff_pages + 2, "{size}");
    // A scratch fork, one commit of the rewritten pages, the head, the scratch's removal:
    // kilobytes, not the database.
    let written = size["merge_bytes_written"].as_u64().unwrap();
    assert!(
        written > 0 && written <= 16 * 1024,
        "a one-row merge wrote {written} B"
    );
    assert!(!dir.exists(), "the bench's files are removed");
}

/// `scion bench graph --quick` finds each base it built its histories with, on a local
/// store and on S3, reading the versions between the heads and the base and not the rest
/// of the history: a recent base costs a handful of root reads however long the history.
#[test]
fn bench_graph_quick_reads_only_what_lies_between_the_heads_and_the_base() {
    let bucket = std::env::var("SCION_S3_TEST_BUCKET")
        .expect("S3 tests need ./scripts/test (it starts moto and sets SCION_S3_TEST_BUCKET)");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let s3 = format!("s3://{bucket}/bench-graph-{}-{nanos}", std::process::id());
    let s = Session::new();
    let (v, dir) = quick(&s, "graph", &["--versions", "300", "--s3", &s3]);
    let rows = v["searches"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        12,
        "two histories, three bases, two stores: {v}"
    );
    for r in rows {
        let (between, visited, requests) = (
            r["versions_between"].as_u64().unwrap(),
            r["versions_visited"].as_u64().unwrap(),
            r["requests"].as_u64().unwrap(),
        );
        // The versions between, the two heads, the side version and the base.
        assert!(visited <= between + 4, "{r}");
        assert!(visited >= between, "{r}");
        // One root read is one request when nothing is cached.
        assert!(requests <= visited + 1, "{r}");
        if r["base"] == "recent" {
            assert!(visited <= 4, "a recent base is found at once: {r}");
        }
    }
    assert!(rows.iter().any(|r| r["store"] == "s3"), "{v}");
    assert!(!dir.exists(), "the bench's files are removed");
}

/// `scion bench remote --quick` pushes to a directory and to S3, and counts what a
/// one-row commit costs to push and to pull at the store that receives it: one small
/// segment and the refs, whatever the database's size.
#[test]
fn bench_remote_quick_counts_what_a_one_row_commit_sends() {
    let bucket = std::env::var("SCION_S3_TEST_BUCKET")
        .expect("S3 tests need ./scripts/test (it starts moto and sets SCION_S3_TEST_BUCKET)");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let s3 = format!("s3://{bucket}/bench-remote-{}-{nanos}", std::process::id());
    let s = Session::new();
    let (v, dir) = quick(&s, "remote", &["--s3", &s3]);
    let size = &v["sizes"][0];
    let store = size["branch_store_bytes"].as_u64().unwrap();
    for first in ["to_directory", "to_s3"] {
        // A first push sends the branch's segments: the store's size of it.
        assert_eq!(
            size[first]["bytes_sent"].as_u64().unwrap(),
            store,
            "{first}: {size}"
        );
    }
    let push = &size["push_one_row"];
    assert_eq!(push["objects_sent"], 1, "{push}");
    // The segment and the ref.
    assert_eq!(push["puts"], 2, "{push}");
    assert!(
        push["bytes_written"].as_u64().unwrap() <= 16 * 1024,
        "{push}"
    );
    let pull = &size["pull_one_row"];
    assert_eq!(pull["objects_sent"], 1, "{pull}");
    // The segment, the tracking branch and the local branch.
    assert_eq!(pull["puts"], 3, "{pull}");
    assert!(
        pull["bytes_written"].as_u64().unwrap() <= 16 * 1024,
        "{pull}"
    );
    let follow = &v["follow"];
    assert!(follow["commits"].as_u64().unwrap() > 10, "{follow}");
    assert!(
        follow["summary"]["versions"].as_u64().unwrap() > 10,
        "{follow}"
    );
    assert!(!dir.exists(), "the bench's files are removed");
}
