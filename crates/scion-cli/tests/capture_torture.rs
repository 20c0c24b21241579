//! The capture torture in CI: 200 rounds of real writers (the `sqlite3` CLI with no busy
//! timeout, Python's `sqlite3`) and a real daemon, SIGKILLed at random points. The long
//! run is `scion bench capture` (3,500 rounds by default).

use std::process::Command;

#[test]
fn capture_survives_200_rounds_of_kill_9_with_every_durable_version_a_prefix() {
    let seed = std::env::var("SCION_TORTURE_SEED").unwrap_or_else(|_| "20261130".into());
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_scion"))
        .args([
            "bench", "capture", "--rounds", "200", "--seed", &seed, "--json", "--dir",
        ])
        .arg(dir.path())
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|_| {
        panic!(
            "no report (seed {seed}):\n{stdout}\n{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default()
        )
    });
    assert!(out.status.success(), "seed {seed}: {report:#}");
    assert_eq!(report["rounds"], 200);
    assert_eq!(report["failures"], serde_json::json!([]));
    assert_eq!(report["final_equal"], true);
    assert_eq!(
        report["verify_ok"], true,
        "the store passes `scion verify` after the run"
    );
    assert_eq!(
        report["locked_errors"], 0,
        "a writer without busy timeout was refused"
    );
    // The schedule did what it is for: kills of both kinds, and restarts that resumed
    // from the durable cursor as well as ones that had to reconcile.
    for key in [
        "writer_kills",
        "daemon_kills",
        "dead_daemon_writes",
        "resumes",
        "reconciles",
        "foreign_checkpoints",
    ] {
        assert!(report[key].as_u64().unwrap() > 0, "{key} = 0 in {report:#}");
    }
    eprintln!("{report:#}");
}
