//! An S3-compatible store (`s3://bucket/prefix`), a [`CloudBackend`] over `object_store`'s
//! Amazon S3 client.
//!
//! Configuration comes from the environment: `SCION_S3_ENDPOINT`, `SCION_S3_REGION`,
//! `SCION_S3_PATH_STYLE`, `SCION_S3_TIMEOUT`, and credentials from the standard `AWS_*`
//! variables; `SCION_S3_MULTIPART_THRESHOLD` (a size, default 16 MiB) sets the size from
//! which create-only puts go up as multipart uploads in 8 MiB parts.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;

use crate::cloud::{CloudBackend, Requests, Service};
use crate::{StoreError, StoreResult};

/// Where an S3 store lives: `s3://bucket/prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    pub prefix: String,
}

impl S3Location {
    pub fn parse(spec: &str) -> Option<S3Location> {
        let (bucket, prefix) = crate::cloud::split_location(spec, "s3://")?;
        Some(S3Location { bucket, prefix })
    }
}

/// Settings read from the environment (and overridable in code, for tests).
#[derive(Debug, Clone, Default)]
pub struct S3Config {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub path_style: bool,
    pub request_timeout: Option<Duration>,
    pub max_retries: Option<usize>,
    /// Create-only puts of at least this many bytes use a multipart upload (None: 16 MiB).
    pub multipart_threshold: Option<usize>,
}

impl S3Config {
    /// The `SCION_S3_*` variables. A value that cannot be read is refused, naming the
    /// variable, rather than quietly replaced by the default.
    pub fn from_env() -> StoreResult<Self> {
        let text = |name: &str| std::env::var(name).ok().filter(|s| !s.trim().is_empty());
        let multipart_threshold = crate::units::env_value(
            "SCION_S3_MULTIPART_THRESHOLD",
            crate::units::parse_size_in_memory,
        )?;
        Ok(S3Config {
            endpoint: text("SCION_S3_ENDPOINT"),
            region: text("SCION_S3_REGION"),
            path_style: crate::units::env_value("SCION_S3_PATH_STYLE", crate::units::parse_switch)?
                .unwrap_or(false),
            request_timeout: crate::units::env_value(
                "SCION_S3_TIMEOUT",
                crate::units::parse_duration,
            )?,
            max_retries: None,
            multipart_threshold,
        })
    }

    fn requests(&self) -> Requests {
        Requests {
            timeout: self.request_timeout,
            max_retries: self.max_retries,
            multipart_threshold: self.multipart_threshold,
        }
    }
}

impl CloudBackend {
    /// Connect to `s3://bucket/prefix`. Does not probe the store ([`CloudBackend::attach_s3`] does).
    pub fn connect_s3(location: S3Location, config: &S3Config) -> StoreResult<Self> {
        let mut b = AmazonS3Builder::from_env().with_bucket_name(&location.bucket);
        let allow_http = config
            .endpoint
            .as_deref()
            .is_some_and(|ep| ep.starts_with("http://"));
        if let Some(ep) = &config.endpoint {
            b = b.with_endpoint(ep);
        }
        b = b.with_region(config.region.clone().unwrap_or_else(|| {
            if config.endpoint.is_some() {
                "us-east-1".into()
            } else {
                std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into())
            }
        }));
        if config.path_style {
            b = b.with_virtual_hosted_style_request(false);
        }
        let requests = config.requests();
        b = b
            .with_client_options(requests.client_options(allow_http))
            .with_retry(requests.retry());
        let store = b
            .build()
            .map_err(|e| StoreError::Config(format!("S3: {e}")))?;
        let url = format!("s3://{}/{}", location.bucket, location.prefix);
        let identity = format!("{url}@{}", config.endpoint.as_deref().unwrap_or("aws"));
        CloudBackend::new(
            Arc::new(store),
            Service::S3,
            url,
            location.prefix,
            identity,
            &requests,
        )
    }

    /// [`CloudBackend::connect_s3`], then a probe that the store enforces create-only puts
    /// and compare-and-swap (refused otherwise), which also learns its clock.
    pub fn attach_s3(location: S3Location, config: &S3Config) -> StoreResult<Self> {
        Self::connect_s3(location, config)?.probed()
    }
}
