//! Which store a command works on, and opening it: a local directory (named, or the
//! nearest `.scion` above the current directory, as git finds `.git`) or an S3 bucket.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use scion_core::clock::parse_duration;
use scion_core::{ClonePolicy, CoreError, Scion, ScionOptions, MANIFEST_KEY};
use scion_store::{
    Backend, CountingBackend, LocalBackend, S3Backend, S3Config, S3Location, SegmentCache,
};

use crate::cli::Cli;

/// The directory name `scion init` creates and discovery looks for.
const DEFAULT_STORE: &str = ".scion";

/// The store a command uses: `spec` (from `--store` or `SCION_STORE`) when given; else the
/// nearest `.scion` holding a store in the current directory or above it (stopping at the
/// home directory and at filesystem boundaries); `init` without a spec makes `./.scion`.
fn store_spec(spec: Option<&str>, init: bool) -> Result<StoreSpec> {
    if let Some(spec) = spec.filter(|s| !s.is_empty()) {
        let parsed = parse_spec(spec)?;
        if let StoreSpec::Local(dir) = &parsed {
            if !init && !dir.join(MANIFEST_KEY).exists() {
                return Err(CoreError::NotInitialized {
                    location: dir.display().to_string(),
                }
                .into());
            }
        }
        return Ok(parsed);
    }
    let cwd = std::env::current_dir().context("reading the current directory")?;
    if init {
        return Ok(StoreSpec::Local(cwd.join(DEFAULT_STORE)));
    }
    let (found, searched_up_to) = discover(&cwd);
    match found {
        Some(dir) => Ok(StoreSpec::Local(dir)),
        None => Err(CoreError::NotInitialized {
            location: format!(
                "{}, nor in any directory above it up to {}",
                cwd.join(DEFAULT_STORE).display(),
                searched_up_to.display()
            ),
        }
        .into()),
    }
}

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

/// Where a store lives, from `--store` / `SCION_STORE`, or found upward from the current
/// directory.
enum StoreSpec {
    Local(PathBuf),
    S3(S3Location),
}

/// Relative paths are made absolute so that printed checkout paths work from anywhere.
fn parse_spec(spec: &str) -> Result<StoreSpec> {
    if spec.starts_with("s3://") {
        return S3Location::parse(spec).map(StoreSpec::S3).ok_or_else(|| {
            anyhow::anyhow!("invalid S3 store {spec:?}: expected s3://bucket[/prefix]")
        });
    }
    let path = if let Some(rest) = spec.strip_prefix("file://") {
        PathBuf::from(rest)
    } else if spec.contains("://") {
        bail!(
            "unsupported store {spec:?}: use a directory path, file:///path or s3://bucket/prefix"
        );
    } else {
        PathBuf::from(spec)
    };
    Ok(StoreSpec::Local(std::path::absolute(&path).with_context(
        || format!("resolving store path {spec:?}"),
    )?))
}

/// The local cache directory of a remote store: `SCION_CHECKOUTS`, or the user's cache
/// directory keyed by the store's identity.
fn remote_cache_dir(identity: &str) -> Result<PathBuf> {
    if let Ok(dir) = std::env::var("SCION_CHECKOUTS") {
        if !dir.is_empty() {
            return Ok(std::path::absolute(dir)?);
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
        .ok_or_else(|| anyhow::anyhow!("no cache directory: set SCION_CHECKOUTS"))?;
    // FNV-1a: stable across builds, so the cache survives upgrades.
    let hash = identity.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    Ok(base
        .join("scion")
        .join(format!("{hash:016x}"))
        .join("checkouts"))
}

const PROBE_VALID: std::time::Duration = std::time::Duration::from_secs(3600);

/// The clock offset of a probe this machine ran against the store in the last hour.
fn recent_probe(path: &std::path::Path) -> Option<i64> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(v["probed_at_unix"].as_u64()?);
    let age = std::time::SystemTime::now().duration_since(at).ok()?;
    (age < PROBE_VALID)
        .then(|| v["clock_offset_ms"].as_i64())
        .flatten()
}

fn remember_probe(path: &std::path::Path, offset: i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let body = serde_json::json!({"probed_at_unix": now, "clock_offset_ms": offset}).to_string();
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(path, body);
}

/// The opened store and the request counter around it (for `--stats`).
pub struct Opened {
    pub scion: Scion,
    pub counter: Arc<CountingBackend>,
}

pub fn open_store(cli: &Cli, init: bool) -> Result<Opened> {
    let policy: ClonePolicy = cli.clone.parse().map_err(anyhow::Error::msg)?;
    // The counter sits right on the store, so --stats counts real requests (a segment
    // served from the local cache is not one).
    let (backend, counter, location, checkouts, store_dir): (
        Arc<dyn Backend>,
        Arc<CountingBackend>,
        String,
        PathBuf,
        Option<PathBuf>,
    ) = match store_spec(cli.store.as_deref(), init)? {
        StoreSpec::Local(dir) => {
            let location = dir.display().to_string();
            let b =
                LocalBackend::open(&dir).with_context(|| format!("opening store {location}"))?;
            let counter = Arc::new(CountingBackend::new(Arc::new(b)));
            let checkouts = dir.join("checkouts");
            (counter.clone(), counter, location, checkouts, Some(dir))
        }
        StoreSpec::S3(loc) => {
            let location = format!("s3://{}/{}", loc.bucket, loc.prefix);
            let s3 = Arc::new(
                S3Backend::connect(loc, &S3Config::from_env())
                    .with_context(|| format!("connecting to {location}"))?,
            );
            let counter = Arc::new(CountingBackend::new(s3.clone()));
            let checkouts = remote_cache_dir(&s3.identity())?;
            // Refuse a store that does not enforce conditional writes, and learn its
            // clock. The proof is remembered for an hour per store in the local cache.
            let proof = checkouts.join(".probe.json");
            match recent_probe(&proof) {
                Some(offset) => s3.set_clock_offset_ms(offset),
                None => {
                    scion_store::probe::probe_with(counter.as_ref(), |key| s3.learn_clock(key))
                        .with_context(|| format!("attaching to {location}"))?;
                    remember_probe(&proof, s3.clock_offset_ms());
                }
            }
            let cached =
                SegmentCache::new(counter.clone(), checkouts.join(".segments"), "segments/")?;
            (Arc::new(cached), counter, location, checkouts, None)
        }
    };
    let mut options = ScionOptions::new(checkouts, policy);
    options.store_dir = store_dir;
    options.progress =
        scion_core::progress::ProgressSink(Arc::new(crate::progress::Bar::default()));
    if let Some(h) = &cli.holder {
        options.holder = h.clone();
    }
    let scion = if init {
        let min_grace = match &cli.command {
            crate::cli::Command::Init { min_grace } => parse_duration(min_grace)?,
            _ => scion_core::DEFAULT_MIN_GRACE,
        };
        Scion::init_with_min_grace(backend, &location, options, min_grace)?
    } else {
        Scion::open(backend, &location, options)?
    };
    Ok(Opened { scion, counter })
}
