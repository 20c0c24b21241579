//! `libscion_vfs.so`: load it into any SQLite (`.load ./libscion_vfs` in the `sqlite3` CLI,
//! `conn.load_extension(...)` in Python) and open `file:shop@main?vfs=scion`. The VFS is
//! registered into the loading SQLite through its API routines and stays registered for
//! the life of the process.

use std::ffi::{c_char, c_int, c_void};

/// The entry point SQLite calls after loading the library (named after the file).
///
/// # Safety
/// Called by SQLite with its API routines table.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_scionvfs_init(
    _db: *mut c_void,
    _err: *mut *mut c_char,
    routines: *const c_void,
) -> c_int {
    // SAFETY: `routines` is the table SQLite passed to this entry point.
    unsafe { scion_vfs::extension_entry(routines) }
}
