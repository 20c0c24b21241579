//! `scion-vfs`: a SQLite VFS named `scion` that serves a branch's version straight from the
//! store. Opening `file:shop@main?vfs=scion` pins the head at each read transaction (no
//! file is materialized), reads pages through the page map (verified frames), buffers what
//! a write transaction changes, and commits those pages through the engine's one commit
//! path when SQLite commits (`SQLITE_FCNTL_COMMIT_PHASETWO`). Journals live in memory; WAL
//! is refused. One writer per branch: a write transaction takes the branch's writing turn on
//! this host (a lock the kernel drops with its process), is refused while anyone holds the
//! branch's lease (a daemon session, an at-rest operation), and publishes by
//! compare-and-swap, so a writer elsewhere that came first makes it `SQLITE_BUSY_SNAPSHOT`
//! and nothing is overwritten.
//!
//! [`register`] installs it in the SQLite linked into this program (rusqlite's bundled
//! one); the `scion-vfs-ext` crate builds the loadable extension for any other SQLite.

mod ahead;
mod api;
mod dirty;
mod error;
mod file;
mod memfile;
mod registry;
mod target;
mod vfs;

pub use api::Api;
pub use registry::{adopt, last_error, last_failure, VfsFailure};
pub(crate) use target::TargetError;

/// `file:<target>?vfs=scion&store=<store>` (`&mode=ro` when `read_only`): the URI SQLite
/// opens a target through the VFS by, the store's location escaped for a URI.
pub fn uri(target: &str, store: &str, read_only: bool) -> String {
    let mut escaped = String::new();
    for c in store.chars() {
        match c {
            '%' | '&' | '#' | '=' | '?' | ' ' => escaped += &format!("%{:02X}", c as u32),
            c => escaped.push(c),
        }
    }
    let mode = if read_only { "&mode=ro" } else { "" };
    format!("file:{target}?vfs=scion&store={escaped}{mode}")
}

/// Register the VFS with the SQLite linked into this program. Idempotent.
pub fn register() -> Result<(), i32> {
    vfs::register(Api::linked())
}

/// SQLITE_OK_LOAD_PERMANENTLY (sqlite3.h): keep the library loaded after the connection
/// that loaded it closes, since the VFS it registered points into it.
pub(crate) const OK_LOAD_PERMANENTLY: i32 = 256;

/// The body of a loadable extension's entry point: register the VFS into the SQLite that
/// is loading it, and ask to stay loaded.
///
/// # Safety
/// `routines` must be the `sqlite3_api_routines` pointer SQLite passed to the entry point.
pub unsafe fn extension_entry(routines: *const std::ffi::c_void) -> i32 {
    // SAFETY: forwarded from the caller's contract.
    let registered = std::panic::catch_unwind(|| unsafe { register_from_extension(routines) });
    match registered {
        Ok(Ok(())) => OK_LOAD_PERMANENTLY,
        Ok(Err(rc)) => rc,
        Err(_) => rusqlite::ffi::SQLITE_ERROR,
    }
}

/// Register the VFS through a loadable extension's API routines.
///
/// # Safety
/// `routines` must be the `sqlite3_api_routines` pointer SQLite passed to the extension's
/// entry point.
pub(crate) unsafe fn register_from_extension(routines: *const std::ffi::c_void) -> Result<(), i32> {
    // SAFETY: forwarded from the caller's contract.
    let api = unsafe { Api::from_routines(routines) }.ok_or(rusqlite::ffi::SQLITE_ERROR)?;
    vfs::register(api)
}
