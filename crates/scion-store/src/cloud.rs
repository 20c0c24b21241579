//! A store in an object-storage service, through `object_store`: an S3-compatible bucket
//! (`s3.rs`) or an Azure Blob Storage container (`azure.rs`). Both give what scion needs:
//! create-only puts (`If-None-Match: *`), compare-and-swap (`If-Match: <etag>`), ranged
//! gets and batched deletes. Requests time out, and transient failures are retried with
//! backoff by `object_store` (never a failed precondition). The trait is synchronous, so
//! the backend owns a small Tokio runtime and blocks on it.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, PutMode as OsPutMode, PutOptions,
    PutPayload, RetryConfig, UpdateVersion,
};

use crate::clock::{ClockReading, StoreClock};
use crate::key::validate_prefix;
use crate::{validate_key, Backend, ETag, ObjectMeta, PutMode, StoreError, StoreResult};

/// Size of each part of a multipart upload (S3 wants at least 5 MiB but for the last).
pub(crate) const MULTIPART_PART_SIZE: usize = 8 << 20;
pub(crate) const DEFAULT_MULTIPART_THRESHOLD: usize = 16 << 20;
/// Parts in flight at once during a multipart upload.
const MULTIPART_CONCURRENCY: usize = 4;

/// Which service a [`CloudBackend`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Service {
    /// Amazon S3 or an S3-compatible server.
    S3,
    /// Azure Blob Storage (or Azurite).
    Azure,
}

impl Service {
    fn name(self) -> &'static str {
        match self {
            Service::S3 => "S3",
            Service::Azure => "Azure Blob",
        }
    }
}

/// `<scheme>bucket/prefix` as the bucket (or container) and the prefix without its
/// slashes; `None` for another scheme or no bucket.
pub(crate) fn split_location(spec: &str, scheme: &str) -> Option<(String, String)> {
    let rest = spec.strip_prefix(scheme)?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return None;
    }
    Some((bucket.to_string(), prefix.trim_matches('/').to_string()))
}

/// How requests are timed out and retried, whatever the service.
#[derive(Debug, Clone, Copy, Default)]
pub struct Requests {
    /// Per request (None: 30 s).
    pub timeout: Option<Duration>,
    /// Retries of a transient failure (None: 4).
    pub max_retries: Option<usize>,
    /// Create-only puts of at least this many bytes use a multipart upload (None: 16 MiB).
    pub multipart_threshold: Option<usize>,
}

impl Requests {
    pub(crate) fn client_options(&self, allow_http: bool) -> ClientOptions {
        let timeout = self.timeout.unwrap_or(Duration::from_secs(30));
        ClientOptions::new()
            .with_allow_http(allow_http)
            .with_timeout(timeout)
            .with_connect_timeout(Duration::from_secs(5).min(timeout))
    }

    pub(crate) fn retry(&self) -> RetryConfig {
        RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(50),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: self.max_retries.unwrap_or(4),
            retry_timeout: Duration::from_secs(60),
        }
    }
}

/// A scion store in a bucket or container of an object-storage service: made by
/// [`CloudBackend::connect_s3`] or [`CloudBackend::connect_azure`].
pub struct CloudBackend {
    store: Arc<dyn ObjectStore>,
    rt: tokio::runtime::Runtime,
    service: Service,
    /// The store's own name: `s3://bucket/prefix` or `az://container/prefix`.
    url: String,
    /// The key prefix inside the bucket or container ("" for none).
    prefix: String,
    /// The store's name with the service's endpoint or account, for naming local caches.
    identity: String,
    /// The store's clock, learned from the server's Last-Modified at attach.
    clock: StoreClock,
    multipart_threshold: usize,
}

impl std::fmt::Debug for CloudBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CloudBackend({})", self.describe())
    }
}

fn transient(key: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Transient {
        key: key.to_string(),
        message: e.to_string(),
    }
}

/// Map an `object_store` error for `key`.
fn map_err(key: &str, e: object_store::Error) -> StoreError {
    use object_store::Error as E;
    match e {
        E::NotFound { .. } => StoreError::NotFound {
            key: key.to_string(),
        },
        E::AlreadyExists { .. } => StoreError::AlreadyExists {
            key: key.to_string(),
        },
        E::Precondition { .. } => StoreError::Conflict {
            key: key.to_string(),
        },
        E::NotModified { .. } => StoreError::Conflict {
            key: key.to_string(),
        },
        E::Unauthenticated { source, .. } | E::PermissionDenied { source, .. } => {
            StoreError::Unauthorized {
                key: key.to_string(),
                message: source.to_string(),
            }
        }
        E::UnknownConfigurationKey { key: k, .. } => {
            StoreError::Config(format!("unknown configuration key {k}"))
        }
        // Timeouts, resets and 5xx that outlived object_store's retries.
        other => transient(key, other),
    }
}

fn normalize_etag(e: Option<String>) -> ETag {
    let e = e.unwrap_or_default();
    let e = e.strip_prefix("W/").unwrap_or(&e);
    ETag(e.trim_matches('"').to_string())
}

impl CloudBackend {
    /// A backend over `store`, whose keys live under `prefix`. Does not probe; see
    /// [`CloudBackend::probed`].
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        service: Service,
        url: String,
        prefix: String,
        identity: String,
        requests: &Requests,
    ) -> StoreResult<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| {
                StoreError::Other(format!(
                    "starting the {} client runtime: {e}",
                    service.name()
                ))
            })?;
        Ok(CloudBackend {
            store,
            rt,
            service,
            url,
            prefix,
            identity,
            clock: StoreClock::ours(),
            multipart_threshold: requests
                .multipart_threshold
                .unwrap_or(DEFAULT_MULTIPART_THRESHOLD)
                .max(1),
        })
    }

    /// Prove the store enforces create-only puts and compare-and-swap (refusing it
    /// otherwise), and learn its clock.
    pub(crate) fn probed(self) -> StoreResult<Self> {
        crate::probe::probe_with(&self, |key| self.learn_clock(key))?;
        Ok(self)
    }

    /// A create-only put as a multipart upload. S3 enforces `If-None-Match` on
    /// CompleteMultipartUpload, but `object_store` does not expose it for uploads, and a
    /// server that checks it non-atomically (moto does) would let two racing uploads both
    /// succeed. Large create-only objects are segments, whose keys hold 64 random bits and
    /// have exactly one writer: this checks the key is free first (`AlreadyExists` makes the
    /// writer draw another id) and accepts a collision window of about 2^-64 per pair of
    /// concurrent writers. Refs, the objects two writers do race for, are small and always
    /// go up with one conditional PUT.
    fn put_multipart_create(&self, key: &str, data: &[u8]) -> StoreResult<ETag> {
        match self.head(key) {
            Ok(_) => {
                return Err(StoreError::AlreadyExists {
                    key: key.to_string(),
                })
            }
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let path = self.path(key);
        let result = self.rt.block_on(async {
            let upload = self.store.put_multipart(&path).await?;
            let mut w =
                object_store::WriteMultipart::new_with_chunk_size(upload, MULTIPART_PART_SIZE);
            for part in data.chunks(MULTIPART_PART_SIZE) {
                w.wait_for_capacity(MULTIPART_CONCURRENCY).await?;
                w.put(bytes::Bytes::copy_from_slice(part));
            }
            w.finish().await
        });
        match result {
            Ok(r) => Ok(normalize_etag(r.e_tag)),
            Err(e) => Err(map_err(key, e)),
        }
    }

    fn path(&self, key: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(key)
        } else {
            Path::from(format!("{}/{key}", self.prefix))
        }
    }

    fn key_of(&self, path: &Path) -> Option<String> {
        let p = path.as_ref();
        if self.prefix.is_empty() {
            Some(p.to_string())
        } else {
            p.strip_prefix(&format!("{}/", self.prefix))
                .map(str::to_string)
        }
    }

    /// The store's clock now, against this machine's boot clock, to hand to a later
    /// process (`None` without a boot clock).
    pub fn clock_reading(&self) -> Option<ClockReading> {
        let boot_ms = crate::clock::boot_ms()?;
        let store = self.clock.now().duration_since(UNIX_EPOCH).ok()?;
        Some(ClockReading {
            store_unix_ms: store.as_millis() as u64,
            boot_ms,
        })
    }

    /// Take the store's clock from a reading an earlier process took on this boot: false
    /// (and nothing changed) when it cannot be carried forward.
    pub fn resume_clock(&self, reading: &ClockReading) -> bool {
        match reading.store_now() {
            Some(t) => {
                self.clock.set(t);
                true
            }
            None => false,
        }
    }

    /// A stable identity for this store, for naming local caches.
    pub fn identity(&self) -> String {
        self.identity.clone()
    }

    /// Learn the store's clock from the Last-Modified of an object written just now.
    pub fn learn_clock(&self, key: &str) -> StoreResult<()> {
        let before = SystemTime::now();
        let meta = self.head(key)?;
        let after = SystemTime::now();
        let ours = before + after.duration_since(before).unwrap_or_default() / 2;
        let offset = match meta.last_modified.duration_since(ours) {
            Ok(d) => d.as_millis() as i64,
            Err(e) => -(e.duration().as_millis() as i64),
        };
        // Last-Modified has 1 s resolution: ignore offsets that rounding alone explains.
        let offset = if offset.abs() < 1500 { 0 } else { offset };
        let now = SystemTime::now();
        let skew = Duration::from_millis(offset.unsigned_abs());
        self.clock
            .set(if offset >= 0 { now + skew } else { now - skew });
        Ok(())
    }
}

impl Backend for CloudBackend {
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)> {
        validate_key(key)?;
        self.rt.block_on(async {
            let r = self
                .store
                .get(&self.path(key))
                .await
                .map_err(|e| map_err(key, e))?;
            let etag = normalize_etag(r.meta.e_tag.clone());
            let size = r.meta.size;
            let bytes = r.bytes().await.map_err(|e| map_err(key, e))?;
            if bytes.len() as u64 != size {
                return Err(transient(key, "short body"));
            }
            Ok((bytes.to_vec(), etag))
        })
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> StoreResult<Vec<u8>> {
        validate_key(key)?;
        if range.start == range.end {
            self.head(key)?;
            return Ok(Vec::new());
        }
        let want = range.end - range.start;
        let bytes = self
            .rt
            .block_on(self.store.get_range(&self.path(key), range.clone()))
            .map_err(|e| match e {
                object_store::Error::Generic { .. } => {
                    StoreError::Other(format!("range {range:?} of {key}: {e}"))
                }
                e => map_err(key, e),
            })?;
        if bytes.len() as u64 != want {
            return Err(StoreError::Other(format!(
                "range {}..{} of {key}: got {} bytes (never a short read)",
                range.start,
                range.end,
                bytes.len()
            )));
        }
        Ok(bytes.to_vec())
    }

    fn head(&self, key: &str) -> StoreResult<ObjectMeta> {
        validate_key(key)?;
        let m = self
            .rt
            .block_on(self.store.head(&self.path(key)))
            .map_err(|e| map_err(key, e))?;
        Ok(ObjectMeta {
            key: key.to_string(),
            size: m.size,
            etag: normalize_etag(m.e_tag),
            last_modified: m.last_modified.into(),
        })
    }

    fn put(&self, key: &str, data: &[u8], mode: PutMode) -> StoreResult<ETag> {
        validate_key(key)?;
        if matches!(mode, PutMode::Create) && data.len() >= self.multipart_threshold {
            return self.put_multipart_create(key, data);
        }
        let mode = match mode {
            PutMode::Create => OsPutMode::Create,
            PutMode::Overwrite => OsPutMode::Overwrite,
            PutMode::Update(etag) => OsPutMode::Update(UpdateVersion {
                e_tag: Some(format!("\"{}\"", etag.0)),
                version: None,
            }),
        };
        let is_update = matches!(mode, OsPutMode::Update(_));
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        let payload = PutPayload::from(bytes::Bytes::copy_from_slice(data));
        match self
            .rt
            .block_on(self.store.put_opts(&self.path(key), payload, opts))
        {
            Ok(r) => Ok(normalize_etag(r.e_tag)),
            // An update of a missing object is a conflict, as on every backend.
            Err(object_store::Error::NotFound { .. }) if is_update => Err(StoreError::Conflict {
                key: key.to_string(),
            }),
            Err(e) => Err(map_err(key, e)),
        }
    }

    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        validate_prefix(prefix)?;
        // object_store lists whole path segments; list the enclosing directory and filter
        // by the string prefix, as the trait promises.
        let dir = match prefix.rfind('/') {
            Some(i) => &prefix[..i],
            None => "",
        };
        let list_path = if dir.is_empty() {
            if self.prefix.is_empty() {
                None
            } else {
                Some(Path::from(self.prefix.as_str()))
            }
        } else {
            Some(self.path(dir))
        };
        let metas: Vec<object_store::ObjectMeta> = self
            .rt
            .block_on(self.store.list(list_path.as_ref()).try_collect())
            .map_err(|e| map_err(prefix, e))?;
        let mut out: Vec<ObjectMeta> = metas
            .into_iter()
            .filter_map(|m| {
                let key = self.key_of(&m.location)?;
                key.starts_with(prefix).then(|| ObjectMeta {
                    key,
                    size: m.size,
                    etag: normalize_etag(m.e_tag),
                    last_modified: m.last_modified.into(),
                })
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &str) -> StoreResult<()> {
        validate_key(key)?;
        match self.rt.block_on(self.store.delete(&self.path(key))) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(map_err(key, e)),
        }
    }

    /// `object_store` has no conditional delete (S3 has none; Azure's If-Match on delete is
    /// not exposed): compare the etag, then delete.
    /// The window between the two is why scion claims refs (by compare-and-swap) before it
    /// deletes them.
    fn delete_if(&self, key: &str, etag: &ETag) -> StoreResult<()> {
        let m = match self.head(key) {
            Ok(m) => m,
            Err(StoreError::NotFound { .. }) => {
                return Err(StoreError::Conflict {
                    key: key.to_string(),
                })
            }
            Err(e) => return Err(e),
        };
        if &m.etag != etag {
            return Err(StoreError::Conflict {
                key: key.to_string(),
            });
        }
        self.delete(key)
    }

    fn exists(&self, key: &str) -> StoreResult<bool> {
        crate::backend::exists_by_head(self, key)
    }

    fn delete_many(&self, keys: &[String]) -> StoreResult<()> {
        for k in keys {
            validate_key(k)?;
        }
        let paths: Vec<object_store::Result<Path>> =
            keys.iter().map(|k| Ok(self.path(k))).collect();
        self.rt.block_on(async {
            let mut results = self
                .store
                .delete_stream(futures::stream::iter(paths).boxed());
            while let Some(r) = results.next().await {
                match r {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(map_err("(batch delete)", e)),
                }
            }
            Ok(())
        })
    }

    fn evict(&self, _key: &str) -> StoreResult<()> {
        // Every read goes to the store itself: there is no local copy to drop.
        Ok(())
    }

    fn describe(&self) -> String {
        format!("{} store {}", self.service.name(), self.url)
    }

    fn now(&self) -> StoreResult<SystemTime> {
        Ok(self.clock.now())
    }
}
