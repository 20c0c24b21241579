//! The conformance suite against Azure Blob Storage's emulator (Azurite, started by
//! `./scripts/test`), the conditional-write probe, and large uploads.

use std::sync::Arc;

use scion_store::{AzureConfig, AzureLocation, Backend, CloudBackend, PutMode, Requests};

/// The test container, or a loud failure that says how to get one.
fn container() -> String {
    match std::env::var("SCION_AZURE_TEST_CONTAINER") {
        Ok(c) => c,
        Err(_) if std::env::var("CI").is_ok() => {
            panic!("CI must run the Azure tests: SCION_AZURE_TEST_CONTAINER is unset (./scripts/test starts Azurite)")
        }
        Err(_) => panic!(
            "Azure tests need a server: run ./scripts/test, which starts Azurite and sets SCION_AZURE_TEST_CONTAINER"
        ),
    }
}

fn unique(what: &str) -> AzureLocation {
    let mut r = [0u8; 6];
    getrandom::fill(&mut r).unwrap();
    let prefix: String = r.iter().map(|x| format!("{x:02x}")).collect();
    AzureLocation::parse(&format!("az://{}/{what}-{prefix}", container())).unwrap()
}

/// A fresh, empty store: a unique prefix in the test container, its conditional writes
/// proven by the same probe every attach runs.
fn fresh() -> Arc<dyn Backend> {
    Arc::new(
        CloudBackend::attach_azure(unique("conformance"), &AzureConfig::from_env().unwrap())
            .expect("attach to the test Azure store"),
    )
}

mod azure {
    scion_store::conformance_tests!(super::fresh());
}

#[test]
fn the_emulator_enforces_create_only_and_compare_and_swap() {
    let b = fresh();
    scion_store::probe_conditional_writes(b.as_ref()).unwrap();
    let first = b.put("refs/x", b"one", PutMode::Create).unwrap();
    assert!(matches!(
        b.put("refs/x", b"two", PutMode::Create),
        Err(scion_store::StoreError::AlreadyExists { .. })
    ));
    let second = b
        .put("refs/x", b"two", PutMode::Update(first.clone()))
        .unwrap();
    assert!(matches!(
        b.put("refs/x", b"three", PutMode::Update(first)),
        Err(scion_store::StoreError::Conflict { .. })
    ));
    assert_eq!(b.get("refs/x").unwrap(), (b"two".to_vec(), second));
    assert!(
        b.describe().starts_with("Azure Blob store az://"),
        "{}",
        b.describe()
    );
}

/// Create-only puts from the threshold up go as block uploads: the object reads back byte
/// for byte, across block boundaries, and a taken key is still refused.
#[test]
fn large_create_only_puts_use_multipart_uploads() {
    let config = AzureConfig {
        requests: Requests {
            multipart_threshold: Some(6 << 20),
            ..AzureConfig::from_env().unwrap().requests
        },
    };
    let b = CloudBackend::attach_azure(unique("multipart"), &config).unwrap();
    scion_store::conformance::large_create_only_put(&b, 8 << 20);
}
