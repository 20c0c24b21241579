//! The few SQLite functions the VFS calls, taken either from the SQLite linked into this
//! program or from a loadable extension's `sqlite3_api_routines` (so an extension registers
//! into the host's SQLite, never a second copy).

use std::ffi::{c_char, c_int, c_void, CString};

use rusqlite::ffi;

type Register = unsafe extern "C" fn(*mut ffi::sqlite3_vfs, c_int) -> c_int;
type Find = unsafe extern "C" fn(*const c_char) -> *mut ffi::sqlite3_vfs;
type UriParameter = unsafe extern "C" fn(*const c_char, *const c_char) -> *const c_char;
type Mprintf = unsafe extern "C" fn(*const c_char, ...) -> *mut c_char;
type Log = unsafe extern "C" fn(c_int, *const c_char, ...);

/// Function pointers into one SQLite library.
#[derive(Clone, Copy)]
pub struct Api {
    register: Register,
    find: Find,
    uri_parameter: UriParameter,
    mprintf: Mprintf,
    log: Log,
}

// Positions in `struct sqlite3_api_routines` (sqlite3ext.h), which SQLite only ever extends
// at its end: every extension compiled against any release relies on them.
const MPRINTF: usize = 69;
const VFS_FIND: usize = 141;
const VFS_REGISTER: usize = 142;
const LOG: usize = 167;
const URI_PARAMETER: usize = 189;

impl Api {
    /// The SQLite linked into this program.
    pub(crate) fn linked() -> Api {
        Api {
            register: ffi::sqlite3_vfs_register,
            find: ffi::sqlite3_vfs_find,
            uri_parameter: ffi::sqlite3_uri_parameter,
            mprintf: ffi::sqlite3_mprintf,
            log: ffi::sqlite3_log,
        }
    }

    /// The SQLite behind an extension's routines table.
    ///
    /// # Safety
    /// `routines` must point to a `sqlite3_api_routines` of SQLite 3.7.7 or later.
    pub(crate) unsafe fn from_routines(routines: *const c_void) -> Option<Api> {
        if routines.is_null() {
            return None;
        }
        let slots = routines.cast::<*const c_void>();
        // SAFETY: every slot up to URI_PARAMETER exists in the table the caller vouches for;
        // each is a function pointer of the type its position has in sqlite3ext.h.
        unsafe {
            let slot = |i: usize| -> Option<*const c_void> {
                let p = *slots.add(i);
                (!p.is_null()).then_some(p)
            };
            Some(Api {
                register: std::mem::transmute::<*const c_void, Register>(slot(VFS_REGISTER)?),
                find: std::mem::transmute::<*const c_void, Find>(slot(VFS_FIND)?),
                uri_parameter: std::mem::transmute::<*const c_void, UriParameter>(slot(
                    URI_PARAMETER,
                )?),
                mprintf: std::mem::transmute::<*const c_void, Mprintf>(slot(MPRINTF)?),
                log: std::mem::transmute::<*const c_void, Log>(slot(LOG)?),
            })
        }
    }

    /// Whether `other` calls into the same SQLite library (the VFS registers once in each).
    pub(crate) fn same_library(&self, other: &Api) -> bool {
        std::ptr::fn_addr_eq(self.register, other.register)
    }

    pub(crate) fn register(&self, vfs: *mut ffi::sqlite3_vfs) -> c_int {
        // SAFETY: `vfs` is a fully initialized, never freed sqlite3_vfs.
        unsafe { (self.register)(vfs, 0) }
    }

    /// The default VFS, which the scion VFS leaves randomness, time and sleep to.
    pub(crate) fn default_vfs(&self) -> *mut ffi::sqlite3_vfs {
        // SAFETY: a null name asks for the default VFS.
        unsafe { (self.find)(std::ptr::null()) }
    }

    /// A URI parameter of the file SQLite is opening.
    ///
    /// # Safety
    /// `filename` must be the name SQLite passed to xOpen.
    pub(crate) unsafe fn uri_parameter(
        &self,
        filename: *const c_char,
        key: &str,
    ) -> Option<String> {
        let key = CString::new(key).ok()?;
        // SAFETY: per the caller's contract; SQLite returns null or a NUL-terminated string
        // living as long as the filename.
        unsafe {
            let v = (self.uri_parameter)(filename, key.as_ptr());
            (!v.is_null()).then(|| std::ffi::CStr::from_ptr(v).to_string_lossy().into_owned())
        }
    }

    /// `text` in memory SQLite frees (a pragma's answer or error message).
    pub(crate) fn sqlite_string(&self, text: &str) -> *mut c_char {
        let Ok(text) = CString::new(text.replace('\0', " ")) else {
            return std::ptr::null_mut();
        };
        // SAFETY: "%s" with one C string argument.
        unsafe { (self.mprintf)(c"%s".as_ptr(), text.as_ptr()) }
    }

    /// Tell SQLite's error log (where applications that configure one see it).
    pub(crate) fn log(&self, code: c_int, text: &str) {
        if let Ok(text) = CString::new(text.replace('\0', " ")) {
            // SAFETY: "%s" with one C string argument.
            unsafe { (self.log)(code, c"%s".as_ptr(), text.as_ptr()) }
        }
    }
}
