//! Stores attached by this process (one `Engine` per store, so every connection shares its
//! node cache), and the last error of each thread, for front ends to show what SQLite's
//! generic message ("unable to open database file") cannot say.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use scion_engine::attach::{AttachOptions, StoreSpec};
use scion_engine::{Engine, EngineError};

static STORES: Mutex<Option<HashMap<String, Arc<Engine>>>> = Mutex::new(None);

thread_local! {
    static LAST_ERROR: RefCell<Option<VfsFailure>> = const { RefCell::new(None) };
}

/// This thread's last VFS failure: what SQLite was told, and how scion's front ends
/// present it (exit code, error code, hint).
#[derive(Debug, Clone)]
pub struct VfsFailure {
    /// The SQLite result code the VFS returned (primary and extended).
    pub sqlite_code: i32,
    pub message: String,
    pub described: scion_described::Described,
}

/// The explanation of this thread's last VFS failure (what to do about it), if any.
pub fn last_error() -> Option<String> {
    LAST_ERROR.with(|e| e.borrow().as_ref().map(|f| f.message.clone()))
}

/// This thread's last VFS failure, whole.
pub fn last_failure() -> Option<VfsFailure> {
    LAST_ERROR.with(|e| e.borrow().clone())
}

pub(crate) fn set_last_error(failure: VfsFailure) {
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(failure));
}

pub(crate) fn clear_last_error() {
    LAST_ERROR.with(|e| *e.borrow_mut() = None);
}

/// Use `scion` for the store at `location` (as `StoreSpec::location` names it) instead of
/// attaching it again: a front end that already attached the store shares its caches and
/// its request counts with the VFS.
pub fn adopt(location: &str, scion: Arc<Engine>) {
    let mut stores = STORES.lock().unwrap_or_else(|p| p.into_inner());
    stores
        .get_or_insert_with(HashMap::new)
        .insert(location.to_string(), scion);
}

/// The store `spec` names (`store=` of the URI), else `SCION_STORE`, else the nearest
/// `.scion` at or above the working directory; attached once per process.
pub(crate) fn store(spec: Option<&str>) -> Result<Arc<Engine>, EngineError> {
    let cwd = std::env::current_dir().map_err(|source| EngineError::Io {
        path: ".".into(),
        source,
    })?;
    let found = StoreSpec::find_with_env(spec, &cwd, false)?;
    let key = found.location();
    let mut stores = STORES.lock().unwrap_or_else(|p| p.into_inner());
    let stores = stores.get_or_insert_with(HashMap::new);
    if let Some(s) = stores.get(&key) {
        return Ok(s.clone());
    }
    let engine = Arc::new(Engine::attach(&found, AttachOptions::default())?.engine);
    stores.insert(key, engine.clone());
    Ok(engine)
}
