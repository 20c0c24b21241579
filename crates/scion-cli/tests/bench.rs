//! `scion bench fork --quick` runs end to end and its counted (never timed) figures hold.

mod common;

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
        assert!(f["rollback"]["bytes"].as_u64().unwrap() <= 1024);
        assert!(f["fork_at_head"]["runs"].as_u64().unwrap() >= 3);
    }
    assert!(
        v["commit_cost"]["store_bytes_added_per_commit"]
            .as_f64()
            .unwrap()
            <= 1536.0
    );
    assert_eq!(v["clean_checkpoint"]["data_objects_written"], 0);
    assert_eq!(v["diff"]["rows_changed"], 10);
    assert!(!dir.exists(), "the bench removes its working directory");
}
