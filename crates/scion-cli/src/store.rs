//! Which store a command works on: `--store` / `SCION_STORE`, or the nearest `.scion`
//! found upward from the current directory. Attaching is the engine's job.

use anyhow::{Context, Result};
use scion_core::attach::{AttachOptions, Attached, StoreSpec};
use scion_core::clock::parse_duration;
use scion_core::{ClonePolicy, Scion, StoreSettings};

use crate::cli::Cli;

pub fn open_store(cli: &Cli, init: bool) -> Result<Attached> {
    open_with(cli, init, None)
}

/// The store, with every request told to `observer` (the daemon's metrics).
pub fn open_store_observed(
    cli: &Cli,
    observer: std::sync::Arc<dyn scion_store::RequestObserver>,
) -> Result<Attached> {
    open_with(cli, false, Some(observer))
}

fn open_with(
    cli: &Cli,
    init: bool,
    observer: Option<std::sync::Arc<dyn scion_store::RequestObserver>>,
) -> Result<Attached> {
    let clone_policy: ClonePolicy = cli.clone.parse().map_err(anyhow::Error::msg)?;
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let spec = StoreSpec::find(cli.store.as_deref(), &cwd, init)?;
    let init = if init {
        Some(match &cli.command {
            crate::cli::Command::Init(a) => StoreSettings {
                min_grace: parse_duration(&a.min_grace)?,
                page_compression: a.page_compression,
                history_retention: parse_duration(&a.history_retention)?,
            },
            _ => StoreSettings::default(),
        })
    } else {
        None
    };
    let options = AttachOptions {
        holder: cli.holder.clone(),
        init,
        progress: scion_core::progress::ProgressSink(std::sync::Arc::new(
            crate::progress::Bar::default(),
        )),
        observer,
        segment_cache: true,
    };
    // Local stores' errors already name the directory; a remote one's say only the key.
    match &spec {
        StoreSpec::S3(_) | StoreSpec::Azure(_) => {
            let location = spec.location();
            Scion::attach(&spec, options).with_context(|| format!("attaching to {location}"))
        }
        _ => Ok(Scion::attach(&spec, options)?),
    }
    .map(|a| Attached {
        scion: a.scion.with_clone_policy(clone_policy),
        ..a
    })
}
