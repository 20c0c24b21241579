//! The CLI against Azure Blob Storage's emulator (Azurite, started by `./scripts/test`):
//! the README quickstart on an `az://` store, faults and a lost ref-write answer through a
//! fault-injecting proxy, and the refusal of `gs://` stores.

mod common;
mod fault_proxy;

use common::*;

/// Azurite's blob endpoint, or a loud failure that says how to get one.
fn endpoint() -> String {
    match std::env::var("AZURITE_BLOB_STORAGE_URL") {
        Ok(e) => e,
        Err(_) => panic!(
            "Azure tests need Azurite: ./scripts/test starts it and sets AZURITE_BLOB_STORAGE_URL{}",
            if std::env::var("CI").is_ok() {
                " (CI must not skip them)"
            } else {
                ""
            }
        ),
    }
}

/// A session whose store is a fresh prefix in the test container, with its own cache,
/// reaching the emulator at `endpoint`.
fn azure_session(endpoint: &str) -> (Session, Vec<(&'static str, String)>) {
    let container = std::env::var("SCION_AZURE_TEST_CONTAINER")
        .expect("SCION_AZURE_TEST_CONTAINER (set by ./scripts/test)");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let s = Session::new();
    let env = vec![
        ("SCION_STORE", format!("az://{container}/cli-{nanos:x}")),
        ("SCION_CHECKOUTS", s.path("cache").display().to_string()),
        ("AZURE_STORAGE_USE_EMULATOR", "true".to_string()),
        ("AZURITE_BLOB_STORAGE_URL", endpoint.to_string()),
    ];
    (s, env)
}

#[test]
fn readme_quickstart_on_azure() {
    let (s, env) = azure_session(&endpoint());
    let stdout = run_readme_quickstart(s.dir.path(), &env);
    assert!(
        stdout.contains("apple|2.0\npear|5.0\n") && stdout.contains("apple|1.0\npear|2.5\n"),
        "{stdout}"
    );
    assert!(stdout.contains("store:     az://"), "{stdout}");
    let out = s.ok_with(&env, &["verify"]);
    assert!(out.trim_end().ends_with("ok"), "{out}");
}

/// A ref write whose answer is lost (the write landed, the client saw a 500, its retry
/// got 412) is a success, never a conflict that deletes the new version's data: on Azure
/// as on S3.
#[test]
fn a_lost_ref_write_answer_on_azure_is_decided_by_reading_it_back() {
    let (s, env) = azure_session(&endpoint());
    fault_proxy::commits_survive_lost_ref_write_answers(&s, env, "AZURITE_BLOB_STORAGE_URL");
}

/// 500s, cut bodies and stalls between scion and Azure fail or retry cleanly: every
/// command succeeds or fails with a typed exit code, and what exists afterwards reads back.
#[test]
fn faults_between_scion_and_azure_fail_or_retry_cleanly() {
    fault_proxy::faults_fail_or_retry_cleanly(
        || azure_session(&endpoint()),
        "AZURITE_BLOB_STORAGE_URL",
        "SCION_AZURE_TIMEOUT",
    );
}

/// No emulator here enforces Google Cloud Storage's preconditions as GCS does, so a
/// `gs://` store is refused before any request, saying why and what to use instead.
#[test]
fn a_gs_store_is_refused_with_the_reason() {
    let s = Session::new();
    let r = s.run_with(
        &[("SCION_STORE", "gs://bucket/prefix".to_string())],
        &["--json", "status"],
    );
    assert_eq!(r.code, 8, "{}{}", r.stdout, r.stderr);
    let err: serde_json::Value = serde_json::from_str(r.stderr.trim()).unwrap();
    assert_eq!(err["error"]["code"], "invalid_input");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("Google Cloud Storage") && message.contains("S3-compatible gateway"),
        "{message}"
    );
}
