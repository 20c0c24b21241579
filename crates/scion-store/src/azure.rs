//! An Azure Blob Storage store (`az://container/prefix`), a [`CloudBackend`] over
//! `object_store`'s Azure client. A second create-only upload is answered 409 and a stale
//! `If-Match` 412, which `object_store` reports as `AlreadyExists` and `Precondition`: the
//! same create-only puts and compare-and-swap as S3.
//!
//! Credentials and the account come from the environment as `object_store` reads them
//! (`AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_KEY`,
//! `AZURE_STORAGE_ENDPOINT`, ...; `AZURE_STORAGE_USE_EMULATOR=true` and
//! `AZURITE_BLOB_STORAGE_URL` for Azurite). `SCION_AZURE_TIMEOUT` and
//! `SCION_AZURE_MULTIPART_THRESHOLD` are as their `SCION_S3_*` namesakes.

use std::sync::Arc;

use object_store::azure::MicrosoftAzureBuilder;

use crate::cloud::{CloudBackend, Requests, Service};
use crate::{StoreError, StoreResult};

/// Where an Azure store lives: `az://container/prefix` (the account is the environment's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AzureLocation {
    pub container: String,
    pub prefix: String,
}

impl AzureLocation {
    pub fn parse(spec: &str) -> Option<AzureLocation> {
        let (container, prefix) = crate::cloud::split_location(spec, "az://")?;
        Some(AzureLocation { container, prefix })
    }
}

/// Settings read from the environment (and overridable in code, for tests).
#[derive(Debug, Clone, Default)]
pub struct AzureConfig {
    pub requests: Requests,
}

impl AzureConfig {
    /// The `SCION_AZURE_*` variables; a value that cannot be read is refused, naming it.
    pub fn from_env() -> StoreResult<Self> {
        let timeout = crate::units::env_value("SCION_AZURE_TIMEOUT", crate::units::parse_duration)?;
        let threshold = crate::units::env_value(
            "SCION_AZURE_MULTIPART_THRESHOLD",
            crate::units::parse_size_in_memory,
        )?;
        Ok(AzureConfig {
            requests: Requests {
                timeout,
                max_retries: None,
                multipart_threshold: threshold,
            },
        })
    }
}

impl CloudBackend {
    /// Connect to `az://container/prefix`. Does not probe the store ([`CloudBackend::attach_azure`] does).
    pub fn connect_azure(location: AzureLocation, config: &AzureConfig) -> StoreResult<Self> {
        let builder = MicrosoftAzureBuilder::from_env().with_container_name(&location.container);
        let emulator = std::env::var("AZURE_STORAGE_USE_EMULATOR")
            .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "TRUE" | "True"));
        let endpoint = if emulator {
            std::env::var("AZURITE_BLOB_STORAGE_URL")
                .unwrap_or_else(|_| "http://127.0.0.1:10000".into())
        } else {
            let account = std::env::var("AZURE_STORAGE_ACCOUNT_NAME").unwrap_or_default();
            std::env::var("AZURE_STORAGE_ENDPOINT")
                .unwrap_or_else(|_| format!("https://{account}.blob.core.windows.net"))
        };
        let allow_http = endpoint.starts_with("http://");
        let requests = config.requests;
        let store = builder
            .with_client_options(requests.client_options(allow_http))
            .with_retry(requests.retry())
            .build()
            .map_err(|e| StoreError::Config(format!("Azure: {e}")))?;
        let url = format!("az://{}/{}", location.container, location.prefix);
        let identity = format!("{url}@{endpoint}");
        CloudBackend::new(
            Arc::new(store),
            Service::Azure,
            url,
            location.prefix,
            identity,
            &requests,
        )
    }

    /// [`CloudBackend::connect_azure`], then a probe that the store enforces create-only puts
    /// and compare-and-swap (refused otherwise), which also learns its clock.
    pub fn attach_azure(location: AzureLocation, config: &AzureConfig) -> StoreResult<Self> {
        Self::connect_azure(location, config)?.probed()
    }
}

#[cfg(test)]
mod tests {
    use crate::azure::AzureLocation;

    #[test]
    fn az_urls_name_a_container_and_a_prefix() {
        let loc = AzureLocation::parse("az://fleet/stores/evals/").unwrap();
        assert_eq!(loc.container, "fleet");
        assert_eq!(loc.prefix, "stores/evals");
        assert_eq!(AzureLocation::parse("az://fleet").unwrap().prefix, "");
        assert_eq!(AzureLocation::parse("az:///x"), None);
        assert_eq!(AzureLocation::parse("s3://fleet"), None);
    }
}
