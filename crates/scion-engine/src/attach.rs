//! Attaching to a store from a spec: a local directory (named, or the nearest `.scion`
//! above the current directory, as git finds `.git`), an S3 bucket or an Azure Blob
//! container. Every front end (the
//! CLI, the daemon, the SDKs) attaches this way and never builds backends itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use scion_store::clock::{boot_id, ClockReading};
use scion_store::{
    AzureConfig, AzureLocation, Backend, CacheLimit, CloudBackend, CountingBackend, LocalBackend,
    ObservedBackend, RequestObserver, S3Config, S3Location, SegmentCache, StoreError,
};

use crate::error::{EngineError, EngineResult};
use crate::{Engine, EngineOptions, StoreSettings, MANIFEST_KEY};

/// The directory name `scion init` creates and discovery looks for.
pub(crate) const DEFAULT_STORE: &str = ".scion";

/// The nearest `<dir>/.scion` holding a store, from `start` upward, and the last directory
/// looked in. The search stops at the home directory (a store above it is someone else's)
/// and where the filesystem changes (as git does without GIT_DISCOVERY_ACROSS_FILESYSTEM).
fn discover(start: &Path) -> (Option<PathBuf>, PathBuf) {
    use std::os::unix::fs::MetadataExt;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let device = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    let start_dev = device(start);
    let mut dir = start.to_path_buf();
    loop {
        let candidate = dir.join(DEFAULT_STORE);
        if candidate.join(MANIFEST_KEY).is_file() {
            return (Some(candidate), dir);
        }
        if home.as_deref() == Some(dir.as_path()) {
            return (None, dir);
        }
        match dir.parent() {
            Some(up) if device(up) == start_dev => dir = up.to_path_buf(),
            _ => return (None, dir),
        }
    }
}

/// Where a store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreSpec {
    /// A store in a local directory.
    Local(PathBuf),
    /// A store in an S3 bucket (`s3://bucket/prefix`).
    S3(S3Location),
    /// A store in an Azure Blob container (`az://container/prefix`).
    Azure(AzureLocation),
}

impl StoreSpec {
    /// A directory path, `file:///path`, `s3://bucket[/prefix]` or
    /// `az://container[/prefix]`. Relative paths are made absolute so that printed checkout
    /// paths work from anywhere. `gs://` is refused with the reason: no Google Cloud
    /// Storage client here enforces the conditional writes scion relies on in a way that
    /// can be tested.
    pub fn parse(spec: &str) -> EngineResult<StoreSpec> {
        let invalid = |reason: String| EngineError::InvalidInput { reason };
        if spec.starts_with("s3://") {
            return S3Location::parse(spec).map(StoreSpec::S3).ok_or_else(|| {
                invalid(format!(
                    "invalid S3 store {spec:?}: expected s3://bucket[/prefix]"
                ))
            });
        }
        if spec.starts_with("az://") {
            return AzureLocation::parse(spec)
                .map(StoreSpec::Azure)
                .ok_or_else(|| {
                    invalid(format!(
                        "invalid Azure store {spec:?}: expected az://container[/prefix]"
                    ))
                });
        }
        if spec.starts_with("gs://") {
            return Err(invalid(format!(
                "Google Cloud Storage stores ({spec:?}) are not supported: scion's refs need \
                 create-only and compare-and-swap writes proven against a real server, and no \
                 GCS emulator enforces them as GCS does; use s3:// with an S3-compatible \
                 gateway in front of GCS that enforces If-None-Match and If-Match (see the \
                 limitations in the README)"
            )));
        }
        let path = if let Some(rest) = spec.strip_prefix("file://") {
            PathBuf::from(rest)
        } else if spec.contains("://") {
            return Err(invalid(format!(
                "unsupported store {spec:?}: use a directory path, file:///path, s3://bucket/prefix or az://container/prefix"
            )));
        } else if let Some(home) = home_of(spec) {
            // `~` a shell left alone (quoted, or from a script or an API) is still the
            // home directory, never a directory named `~`.
            home
        } else {
            PathBuf::from(spec)
        };
        let abs = std::path::absolute(&path).map_err(|e| EngineError::io(&path, e))?;
        Ok(StoreSpec::Local(abs))
    }

    /// The store to use: `spec` when given (a local one must exist unless `init`); else
    /// the nearest `.scion` holding a store in `cwd` or above it (stopping at the home
    /// directory and at filesystem boundaries); `init` without a spec means `cwd/.scion`.
    pub fn find(spec: Option<&str>, cwd: &Path, init: bool) -> EngineResult<StoreSpec> {
        if let Some(spec) = spec.filter(|s| !s.is_empty()) {
            let parsed = StoreSpec::parse(spec)?;
            if let StoreSpec::Local(dir) = &parsed {
                if !init && !dir.join(MANIFEST_KEY).exists() {
                    return Err(EngineError::NotInitialized {
                        location: dir.display().to_string(),
                    });
                }
            }
            return Ok(parsed);
        }
        if init {
            return Ok(StoreSpec::Local(cwd.join(DEFAULT_STORE)));
        }
        match discover(cwd) {
            (Some(dir), _) => Ok(StoreSpec::Local(dir)),
            (None, searched_up_to) => Err(EngineError::NotInitialized {
                location: format!(
                    "{}, nor in any directory above it up to {}",
                    cwd.join(DEFAULT_STORE).display(),
                    searched_up_to.display()
                ),
            }),
        }
    }

    /// [`StoreSpec::find`] for front ends without an argument parser that reads the
    /// environment (the VFS, the Python package): `spec`, else `SCION_STORE`, else the
    /// nearest `.scion`.
    pub fn find_with_env(spec: Option<&str>, cwd: &Path, init: bool) -> EngineResult<StoreSpec> {
        let env = std::env::var("SCION_STORE").ok();
        let spec = spec.filter(|s| !s.is_empty()).or(env.as_deref());
        StoreSpec::find(spec, cwd, init)
    }

    /// How the store is named in messages and `status`.
    pub fn location(&self) -> String {
        match self {
            StoreSpec::Local(dir) => dir.display().to_string(),
            StoreSpec::S3(loc) => format!("s3://{}/{}", loc.bucket, loc.prefix),
            StoreSpec::Azure(loc) => format!("az://{}/{}", loc.container, loc.prefix),
        }
    }
}

/// What a store spec opens to: the backend scion uses, the request counter right on the
/// store, the checkouts directory, and the store directory of a local store.
type Opened = (
    Arc<dyn Backend>,
    Arc<CountingBackend>,
    PathBuf,
    Option<PathBuf>,
);

/// A store in a cloud service as a scion backend: counted, observed, its conditional writes
/// proven (at most once an hour per host: the proof is remembered beside the cache) and
/// its clock learned, its segments cached on this host.
fn remote(
    cloud: CloudBackend,
    observe: impl Fn(Arc<dyn Backend>) -> Arc<dyn Backend>,
    segment_cache: bool,
) -> EngineResult<Opened> {
    let cloud = Arc::new(cloud);
    let counter = Arc::new(CountingBackend::new(observe(cloud.clone())));
    let checkouts = remote_cache_dir(&cloud.identity())?;
    let proof = checkouts.join(".probe.json");
    match recent_probe(&proof).filter(|r| cloud.resume_clock(r)) {
        Some(_) => {}
        None => {
            scion_store::probe::probe_with(counter.as_ref(), |key| cloud.learn_clock(key))
                .map_err(|e| match e {
                    // Before anything is read, "not found" is about the bucket or container.
                    StoreError::NotFound { key } => StoreError::Config(format!(
                        "the store answered \"not found\" for {key}: does the bucket (or container) exist?"
                    )),
                    other => other,
                })?;
            if let Some(reading) = cloud.clock_reading() {
                remember_probe(&proof, &reading);
            }
        }
    }
    if !segment_cache {
        return Ok((counter.clone(), counter, checkouts, None));
    }
    let cached = SegmentCache::new(counter.clone(), checkouts.join(".segments"), "segments/")?
        .with_limit(CacheLimit::from_env()?);
    Ok((Arc::new(cached), counter, checkouts, None))
}

/// The local cache directory of a remote store: `SCION_CHECKOUTS`, or the user's cache
/// directory keyed by the store's identity.
fn remote_cache_dir(identity: &str) -> EngineResult<PathBuf> {
    if let Ok(dir) = std::env::var("SCION_CHECKOUTS") {
        if !dir.is_empty() {
            return std::path::absolute(&dir).map_err(|e| EngineError::io(&dir, e));
        }
    }
    let base = std::env::var("XDG_CACHE_HOME")
        .ok()
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var("HOME")
                .ok()
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .ok_or_else(|| EngineError::InvalidInput {
            reason: "no cache directory for the remote store's checkouts: set SCION_CHECKOUTS"
                .to_string(),
        })?;
    let hash = stable_hash(identity);
    Ok(base
        .join("scion")
        .join(format!("{hash:016x}"))
        .join("checkouts"))
}

const PROBE_VALID: std::time::Duration = std::time::Duration::from_secs(3600);

/// The store's clock as a probe this machine ran against the store in the last hour (by
/// the boot clock) left it. The store's time is kept against the boot clock rather than
/// as an offset from the wall clock, so a wall clock stepped since the probe (NTP, an
/// operator, a resumed VM) does not carry its error into lease, TTL and GC judgements.
fn recent_probe(path: &std::path::Path) -> Option<ClockReading> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    if v["boot_id"].as_str()? != boot_id()? {
        return None;
    }
    let reading = ClockReading {
        store_unix_ms: v["store_unix_ms"].as_u64()?,
        boot_ms: v["boot_ms"].as_u64()?,
    };
    (reading.age()? < PROBE_VALID).then_some(reading)
}

fn remember_probe(path: &std::path::Path, reading: &ClockReading) {
    let Some(boot) = boot_id() else {
        return;
    };
    let body = serde_json::json!({
        "boot_id": boot,
        "boot_ms": reading.boot_ms,
        "store_unix_ms": reading.store_unix_ms,
    })
    .to_string();
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(path, body);
}

/// A hash of a store's name for local paths (its cache, a daemon's socket): FNV-1a, stable
/// across builds, so what it names survives upgrades.
pub fn stable_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// How to attach.
#[derive(Clone)]
pub struct AttachOptions {
    /// Lease holder name; the default names this process.
    pub holder: Option<String>,
    /// Create the store, with these settings, instead of opening one.
    pub init: Option<StoreSettings>,
    /// Where progress of long operations goes.
    pub progress: crate::progress::ProgressSink,
    /// Told of every store request (operation, outcome, latency).
    pub observer: Option<Arc<dyn RequestObserver>>,
    /// Keep a local copy of the segments of an S3 or Azure store as they are read and
    /// written (on by default). Off for a store only transferred to and from (a remote):
    /// its segments are copied into the other store anyway.
    pub segment_cache: bool,
}

impl std::fmt::Debug for AttachOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachOptions")
            .field("holder", &self.holder)
            .field("init", &self.init)
            .finish()
    }
}

impl Default for AttachOptions {
    fn default() -> Self {
        AttachOptions {
            holder: None,
            init: None,
            progress: Default::default(),
            observer: None,
            segment_cache: true,
        }
    }
}

/// An attached engine, the request counter that sits right on it (a segment served from
/// the local cache is not a request), and where this host keeps the store's files.
pub struct AttachedEngine {
    /// The engine, opened.
    pub engine: Engine,
    /// The requests made to the store, counted.
    pub counter: Arc<CountingBackend>,
    /// Where this host keeps the store's checkouts (and its page writers' turns).
    pub checkouts_dir: PathBuf,
    /// The local directory holding the store, if it is one.
    pub store_dir: Option<PathBuf>,
}

/// A store's backend as attached, before an engine opens it.
struct Connected {
    backend: Arc<dyn Backend>,
    counter: Arc<CountingBackend>,
    /// Where this host keeps the store's checkouts (and its page writers' turns).
    checkouts: PathBuf,
    /// The local directory holding the store, if it is one.
    store_dir: Option<PathBuf>,
}

/// Reach the store `spec` names: S3 and Azure stores must enforce conditional writes, which
/// is probed once an hour per store and machine, and the store's clock learnt at the same
/// time.
fn connect(spec: &StoreSpec, options: &AttachOptions) -> EngineResult<Connected> {
    let observe = |b: Arc<dyn Backend>| -> Arc<dyn Backend> {
        match &options.observer {
            Some(o) => Arc::new(ObservedBackend::new(b, o.clone())),
            None => b,
        }
    };
    let (backend, counter, checkouts, store_dir) = match spec {
        StoreSpec::Local(dir) => {
            let b = LocalBackend::open(dir)?;
            let counter = Arc::new(CountingBackend::new(observe(Arc::new(b))));
            (
                counter.clone() as Arc<dyn Backend>,
                counter,
                dir.join("checkouts"),
                Some(dir.clone()),
            )
        }
        StoreSpec::S3(loc) => {
            let cloud = CloudBackend::connect_s3(loc.clone(), &S3Config::from_env()?)?;
            remote(cloud, observe, options.segment_cache)?
        }
        StoreSpec::Azure(loc) => {
            let cloud = CloudBackend::connect_azure(loc.clone(), &AzureConfig::from_env()?)?;
            remote(cloud, observe, options.segment_cache)?
        }
    };
    Ok(Connected {
        backend,
        counter,
        checkouts,
        store_dir,
    })
}

impl Engine {
    /// Open (or, with `options.init`, create) the store `spec` names, without a working
    /// tree: what the VFS holds. Its page writers take turns where the working tree's
    /// checkouts of the same store would be.
    pub fn attach(spec: &StoreSpec, options: AttachOptions) -> EngineResult<AttachedEngine> {
        let location = spec.location();
        let c = connect(spec, &options)?;
        let mut o = EngineOptions::new(c.checkouts.clone());
        o.progress = options.progress;
        if let Some(h) = options.holder {
            o.holder = h;
        }
        let engine = match options.init {
            Some(settings) => Engine::init(c.backend, &location, o, settings)?,
            None => Engine::open(c.backend, &location, o)?,
        };
        Ok(AttachedEngine {
            engine,
            counter: c.counter,
            checkouts_dir: c.checkouts,
            store_dir: c.store_dir,
        })
    }
}

/// `~` or `~/rest` as a path under `$HOME`; `None` for any other spec (or without a home).
fn home_of(spec: &str) -> Option<PathBuf> {
    let rest = match spec {
        "~" => "",
        _ => spec.strip_prefix("~/")?,
    };
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_add_r_tilde_x_is_the_home_directory_not_cwd_tilde() {
        let home = PathBuf::from(std::env::var_os("HOME").unwrap());
        for (spec, want) in [("~/x", home.join("x")), ("~", home.clone())] {
            match StoreSpec::parse(spec).unwrap() {
                StoreSpec::Local(p) => assert_eq!(p, std::path::absolute(want).unwrap()),
                other => panic!("{spec}: {other:?}"),
            }
        }
        // Only a leading `~/`: `a/~` and `~user` are paths as written.
        match StoreSpec::parse("a/~").unwrap() {
            StoreSpec::Local(p) => assert!(p.ends_with("a/~")),
            other => panic!("{other:?}"),
        }
    }
}
