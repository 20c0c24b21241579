//! `scion._native`: the engine inside the Python process. A store is attached once and the
//! daemon's `/v1` API is answered in-process through the daemon's own router, so the Python
//! package speaks one set of request and answer shapes (and error codes) whether it talks to
//! this engine or to a `scion serve` over its socket. The GIL is released while the engine
//! works; one [`Engine`] may be used from many threads at once.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use scion_core::attach::{AttachOptions, StoreSpec};
use scion_core::described::Context;
use scion_core::{CoreError, PageCompression, Scion, StoreSettings};
use scion_daemon::embedded::Embedded;
use scion_daemon::{ApiError, Config, ErrorEnvelope};

create_exception!(
    _native,
    EngineError,
    PyException,
    "An engine error before any request: its argument is the API's error envelope as JSON."
);

fn engine_error(e: &CoreError) -> PyErr {
    let body = ApiError::core(e, Context::Other).body;
    let text = serde_json::to_string(&ErrorEnvelope { error: body }).unwrap_or_default();
    EngineError::new_err(text)
}

/// One attached store and the API over it.
#[pyclass(frozen, module = "scion._native")]
struct Engine {
    api: Embedded,
    runtime: tokio::runtime::Runtime,
    location: String,
    store_id: String,
    checkouts: PathBuf,
}

#[pymethods]
impl Engine {
    /// Attach the store `spec` names (a directory, `file:///path`, `s3://bucket/prefix` or
    /// `az://container/prefix`), or the nearest `.scion` at or above `cwd` when `spec` is empty. `create` makes a
    /// local store that does not exist yet, its pages stored as `page_compression` says
    /// (`"lz4"`, the default, or `"none"`). Naming a compression a store that exists does
    /// not use is an error rather than a setting silently ignored.
    #[new]
    #[pyo3(signature = (spec, cwd, create=false, page_compression=None))]
    fn new(
        py: Python<'_>,
        spec: Option<String>,
        cwd: PathBuf,
        create: bool,
        page_compression: Option<String>,
    ) -> PyResult<Engine> {
        let requested = page_compression
            .as_deref()
            .map(str::parse::<PageCompression>)
            .transpose()
            .map_err(pyo3::exceptions::PyValueError::new_err)?;
        py.detach(|| attach(spec.as_deref(), &cwd, create, requested))
            .map_err(|e| engine_error(&e.into()))
    }

    /// Answer one API request: its HTTP status and JSON body (as text).
    #[pyo3(signature = (method, path, body=None))]
    fn request(
        &self,
        py: Python<'_>,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> PyResult<(u16, String)> {
        let body: Option<serde_json::Value> = body
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        let (status, value) = py.detach(|| {
            self.runtime
                .block_on(self.api.request(method, path, body.as_ref(), &[]))
        });
        Ok((status, value.to_string()))
    }

    /// Where the store is (`status` names it so).
    #[getter]
    fn location(&self) -> &str {
        &self.location
    }

    #[getter]
    fn store_id(&self) -> &str {
        &self.store_id
    }

    /// The directory writable checkouts are made in.
    #[getter]
    fn checkouts_dir(&self) -> PathBuf {
        self.checkouts.clone()
    }
}

fn attach(
    spec: Option<&str>,
    cwd: &std::path::Path,
    create: bool,
    requested: Option<PageCompression>,
) -> Result<Engine, scion_core::EngineError> {
    let settings = StoreSettings {
        page_compression: requested.unwrap_or_default(),
        ..StoreSettings::default()
    };
    let open = |init: bool| -> Result<Scion, scion_core::EngineError> {
        let found = StoreSpec::find_with_env(spec, cwd, init)?;
        let options = AttachOptions {
            init: init.then_some(settings),
            ..AttachOptions::default()
        };
        Ok(Scion::attach(&found, options)?.scion)
    };
    let scion = match open(false) {
        Err(scion_core::EngineError::NotInitialized { .. }) if create => match open(true) {
            // Another process made it in between: open theirs.
            Err(scion_core::EngineError::AlreadyInitialized { .. }) => open(false)?,
            other => other?,
        },
        other => other?,
    };
    if let Some(asked) = requested.filter(|c| *c != scion.engine().page_compression()) {
        return Err(scion_core::EngineError::InvalidInput {
            reason: format!(
                "page_compression=\"{asked}\" but store {} keeps pages {}; it is chosen when a store is created (change it with `scion config --page-compression {asked}`)",
                scion.engine().location(),
                scion.engine().page_compression()
            ),
        });
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("scion-engine")
        .enable_all()
        .build()
        .map_err(|source| scion_core::EngineError::Io {
            path: "tokio runtime".into(),
            source,
        })?;
    let location = scion.engine().location().to_string();
    let store_id = scion.engine().store_id().to_string();
    let checkouts = scion.checkouts_dir().to_path_buf();
    // The API's tasks (sessions, its watch channel) need the runtime entered when made.
    let api = {
        let _entered = runtime.enter();
        Embedded::new(Arc::new(scion), Config::default())
    };
    Ok(Engine {
        api,
        runtime,
        location,
        store_id,
        checkouts,
    })
}

/// This module is also a SQLite loadable extension: loaded into the SQLite that Python's
/// `sqlite3` module uses, it registers the scion VFS there (`scion.vfs.load`). SQLite
/// derives this entry point's name from the module's file name (`_native.abi3.so`).
///
/// # Safety
/// Called by SQLite with its API routines table.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_native_init(
    _db: *mut std::ffi::c_void,
    _err: *mut *mut std::ffi::c_char,
    routines: *const std::ffi::c_void,
) -> std::ffi::c_int {
    // SAFETY: `routines` is the table SQLite passed to this entry point.
    unsafe { scion_vfs::extension_entry(routines) }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Engine>()?;
    m.add("EngineError", m.py().get_type::<EngineError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
