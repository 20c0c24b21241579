//! The C side: the `sqlite3_vfs` and `sqlite3_io_methods` SQLite calls, each a thin,
//! panic-proof shim over [`DbFile`] (the database) or [`MemFile`] (journals and temporary
//! files). Randomness, time and sleep are the default VFS's.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use rusqlite::ffi;

use crate::api::Api;
use crate::error::VfsError;
use crate::file::{DbFile, Lock};
use crate::memfile::MemFile;
use crate::registry;
use crate::target::OpenTarget;

enum Handle {
    Db(Box<DbFile>),
    Mem(MemFile),
}

/// What SQLite allocates per open file (`szOsFile`): its base struct, then our handle and
/// the SQLite library the file was opened through.
#[repr(C)]
struct FileSlot {
    base: ffi::sqlite3_file,
    handle: *mut Handle,
    library: *const Library,
}

/// One SQLite library the VFS is registered in. A process can hold more than one (the
/// SQLite linked into scion's own module and the one Python's `sqlite3` uses): each gets
/// its own `sqlite3_vfs`, whose `pAppData` points here, so every call answers through the
/// library that made it.
struct Library {
    api: Api,
    methods: ffi::sqlite3_io_methods,
}

// SAFETY: written once at registration, then only read; the io methods hold function
// pointers only.
unsafe impl Send for Library {}
unsafe impl Sync for Library {}

/// Every library registered so far, never freed: SQLite keeps their VFS pointers for the
/// life of the process.
static LIBRARIES: Mutex<Vec<&'static Library>> = Mutex::new(Vec::new());

pub(crate) fn register(api: Api) -> Result<(), i32> {
    let mut libraries = LIBRARIES.lock().unwrap_or_else(|e| e.into_inner());
    if libraries.iter().any(|l| l.api.same_library(&api)) {
        return Ok(());
    }
    let default = api.default_vfs();
    if default.is_null() {
        return Err(ffi::SQLITE_ERROR);
    }
    let library: &'static Library = Box::leak(Box::new(Library {
        api,
        methods: io_methods(),
    }));
    // SAFETY: reading plain fields of the default VFS, which lives as long as the process.
    let (max_path, default_ref) = unsafe { ((*default).mxPathname, &*default) };
    let vfs = Box::new(ffi::sqlite3_vfs {
        iVersion: 2,
        szOsFile: std::mem::size_of::<FileSlot>() as c_int,
        mxPathname: max_path.max(512),
        pNext: std::ptr::null_mut(),
        zName: c"scion".as_ptr(),
        pAppData: (library as *const Library).cast_mut().cast::<c_void>(),
        xOpen: Some(x_open),
        xDelete: Some(x_delete),
        xAccess: Some(x_access),
        xFullPathname: Some(x_full_pathname),
        xDlOpen: default_ref.xDlOpen,
        xDlError: default_ref.xDlError,
        xDlSym: default_ref.xDlSym,
        xDlClose: default_ref.xDlClose,
        xRandomness: default_ref.xRandomness,
        xSleep: default_ref.xSleep,
        xCurrentTime: default_ref.xCurrentTime,
        xGetLastError: default_ref.xGetLastError,
        xCurrentTimeInt64: default_ref.xCurrentTimeInt64,
        xSetSystemCall: None,
        xGetSystemCall: None,
        xNextSystemCall: None,
    });
    // SQLite keeps the pointer for the life of the process: the struct is never freed.
    match library.api.register(Box::into_raw(vfs)) {
        ffi::SQLITE_OK => {
            libraries.push(library);
            Ok(())
        }
        rc => Err(rc),
    }
}

fn io_methods() -> ffi::sqlite3_io_methods {
    ffi::sqlite3_io_methods {
        iVersion: 1,
        xClose: Some(x_close),
        xRead: Some(x_read),
        xWrite: Some(x_write),
        xTruncate: Some(x_truncate),
        xSync: Some(x_sync),
        xFileSize: Some(x_file_size),
        xLock: Some(x_lock),
        xUnlock: Some(x_unlock),
        xCheckReservedLock: Some(x_check_reserved_lock),
        xFileControl: Some(x_file_control),
        xSectorSize: Some(x_sector_size),
        xDeviceCharacteristics: Some(x_device_characteristics),
        xShmMap: None,
        xShmLock: None,
        xShmBarrier: None,
        xShmUnmap: None,
        xFetch: None,
        xUnfetch: None,
    }
}

/// Run `f`, turning a panic into an error code: nothing may unwind into SQLite.
fn guarded(f: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(ffi::SQLITE_INTERNAL)
}

fn fail(api: &Api, e: VfsError) -> c_int {
    api.log(e.code, &e.message);
    let failure = registry::VfsFailure {
        sqlite_code: e.code,
        message: e.message,
        described: e.described,
    };
    report_failure(&failure);
    registry::set_last_error(failure);
    e.code
}

/// Where a process that loaded the extension (`scion shell`'s `sqlite3`) wants its
/// failures, one line each, `exit-code<TAB>error-code<TAB>message<TAB>hint`: the process
/// that started it presents the last one as the cause of a failed run.
const FAILURES_ENV: &str = "SCION_VFS_FAILURES";

fn report_failure(f: &registry::VfsFailure) {
    use std::io::Write;
    static PATH: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let Some(path) = PATH.get_or_init(|| std::env::var_os(FAILURES_ENV).map(Into::into)) else {
        return;
    };
    let flat = |s: &str| s.replace(['\t', '\n'], " ");
    let line = format!(
        "{}\t{}\t{}\t{}\n",
        f.described.exit as u8,
        f.described.code,
        flat(&f.message),
        flat(f.described.hint.as_deref().unwrap_or(""))
    );
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(line.as_bytes());
    }
}

/// # Safety
/// `file` must be a FileSlot that x_open filled.
unsafe fn handle<'a>(file: *mut ffi::sqlite3_file) -> Option<(&'static Api, &'a mut Handle)> {
    // SAFETY: per the contract; the handle lives until x_close, the library forever.
    unsafe {
        let slot = file.cast::<FileSlot>().as_mut()?;
        Some((&slot.library.as_ref()?.api, slot.handle.as_mut()?))
    }
}

unsafe extern "C" fn x_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    guarded(|| {
        // SQLite requires pMethods set (null on failure) whatever happens.
        // SAFETY: SQLite passes szOsFile bytes for us to fill.
        let slot = unsafe { &mut *file.cast::<FileSlot>() };
        slot.base.pMethods = std::ptr::null();
        slot.handle = std::ptr::null_mut();
        slot.library = std::ptr::null();
        // SAFETY: SQLite passes the sqlite3_vfs `register` made, whose pAppData is its
        // never-freed Library.
        let Some(library) = (unsafe { (*vfs).pAppData.cast::<Library>().as_ref() }) else {
            return ffi::SQLITE_INTERNAL;
        };
        let api = &library.api;
        let handle = if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
            match open_db(api, name, flags) {
                Ok(db) => Handle::Db(Box::new(db)),
                Err(e) => return fail(api, e),
            }
        } else if flags & ffi::SQLITE_OPEN_WAL != 0 {
            return fail(api, VfsError::new(
                ffi::SQLITE_CANTOPEN,
                "scion: a WAL file cannot be opened through the scion VFS (it keeps journals in memory)",
            ));
        } else {
            Handle::Mem(MemFile::default())
        };
        if !out_flags.is_null() {
            let ro = matches!(&handle, Handle::Db(db) if db.read_only());
            let f = if ro {
                (flags & !ffi::SQLITE_OPEN_READWRITE) | ffi::SQLITE_OPEN_READONLY
            } else {
                flags
            };
            // SAFETY: checked non-null.
            unsafe { *out_flags = f };
        }
        slot.handle = Box::into_raw(Box::new(handle));
        slot.library = library;
        slot.base.pMethods = &library.methods;
        registry::clear_last_error();
        ffi::SQLITE_OK
    })
}

fn open_db(api: &Api, name: ffi::sqlite3_filename, flags: c_int) -> Result<DbFile, VfsError> {
    if name.is_null() {
        return Err(VfsError::new(
            ffi::SQLITE_CANTOPEN,
            "scion: name a database to open, e.g. file:shop@main?vfs=scion",
        ));
    }
    // SAFETY: SQLite's filename is a NUL-terminated string (followed by URI parameters).
    let path = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    let bad = |e: crate::TargetError| VfsError::new(ffi::SQLITE_CANTOPEN, format!("scion: {e}"));
    let mut target = OpenTarget::parse(&path).map_err(bad)?;
    // SAFETY: `name` is the filename SQLite passed to xOpen.
    if let Some(v) = unsafe { api.uri_parameter(name, "version") } {
        target = target.at_version(&v).map_err(bad)?;
    }
    // SAFETY: `name` is the filename SQLite passed to xOpen.
    if let Some(r) = unsafe { api.uri_parameter(name, "root") } {
        target = target.at_root(&r).map_err(bad)?;
    }
    // SAFETY: `name` is the filename SQLite passed to xOpen.
    let store = unsafe { api.uri_parameter(name, "store") };
    let scion = registry::store(store.as_deref()).map_err(|e| {
        VfsError::new(
            ffi::SQLITE_CANTOPEN,
            format!("scion: {e} (name the store with ?store=DIR or SCION_STORE)"),
        )
    })?;
    let read_only = flags & ffi::SQLITE_OPEN_READONLY != 0;
    // SAFETY: `name` is the filename SQLite passed to xOpen.
    let spill_after = match unsafe { api.uri_parameter(name, "spill_kib") } {
        None => crate::dirty::DEFAULT_SPILL_AFTER,
        Some(text) => text.trim().parse::<u64>().map(|k| k * 1024).map_err(|_| {
            VfsError::new(
                ffi::SQLITE_CANTOPEN,
                format!("scion: spill_kib={text:?} is not a number of KiB"),
            )
        })?,
    };
    DbFile::open(scion, target, read_only, spill_after)
}

unsafe extern "C" fn x_delete(
    _vfs: *mut ffi::sqlite3_vfs,
    _name: *const c_char,
    _sync: c_int,
) -> c_int {
    // Only journals are ever deleted, and they live in their handles' memory.
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_access(
    _vfs: *mut ffi::sqlite3_vfs,
    _name: *const c_char,
    _flags: c_int,
    out: *mut c_int,
) -> c_int {
    // No journal or WAL ever exists on disk, so none is ever hot.
    if !out.is_null() {
        // SAFETY: checked non-null.
        unsafe { *out = 0 };
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_full_pathname(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n_out: c_int,
    out: *mut c_char,
) -> c_int {
    // Names are store names, not paths: kept as they are.
    if name.is_null() || out.is_null() || n_out <= 0 {
        return ffi::SQLITE_CANTOPEN;
    }
    // SAFETY: `name` is NUL-terminated; `out` has room for n_out bytes.
    unsafe {
        let bytes = CStr::from_ptr(name).to_bytes();
        if bytes.len() + 1 > n_out as usize {
            return ffi::SQLITE_CANTOPEN;
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), out, bytes.len());
        *out.add(bytes.len()) = 0;
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    guarded(|| {
        // SAFETY: SQLite closes each file once; the handle was boxed by x_open.
        let slot = unsafe { &mut *file.cast::<FileSlot>() };
        if !slot.handle.is_null() {
            // SAFETY: see above.
            let mut h = unsafe { Box::from_raw(slot.handle) };
            if let Handle::Db(db) = h.as_mut() {
                db.close();
            }
            slot.handle = std::ptr::null_mut();
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amt: c_int,
    offset: i64,
) -> c_int {
    guarded(|| {
        // SAFETY: x_open filled the slot; SQLite gives a buffer of `amt` bytes.
        let (Some((api, h)), out) = (unsafe { handle(file) }, unsafe {
            std::slice::from_raw_parts_mut(buf.cast::<u8>(), amt.max(0) as usize)
        }) else {
            return ffi::SQLITE_IOERR_READ;
        };
        let complete = match h {
            Handle::Mem(m) => m.read(offset as usize, out),
            Handle::Db(db) => match db.read(offset as u64, out) {
                Ok(c) => c,
                Err(e) => return fail(api, e),
            },
        };
        if complete {
            ffi::SQLITE_OK
        } else {
            ffi::SQLITE_IOERR_SHORT_READ
        }
    })
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    offset: i64,
) -> c_int {
    guarded(|| {
        // SAFETY: as in x_read.
        let (Some((api, h)), data) = (unsafe { handle(file) }, unsafe {
            std::slice::from_raw_parts(buf.cast::<u8>(), amt.max(0) as usize)
        }) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        match h {
            Handle::Mem(m) => {
                m.write(offset as usize, data);
                ffi::SQLITE_OK
            }
            Handle::Db(db) => match db.write(offset as u64, data) {
                Ok(()) => ffi::SQLITE_OK,
                Err(e) => fail(api, e),
            },
        }
    })
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    guarded(|| match unsafe { handle(file) } {
        Some((_, Handle::Mem(m))) => {
            m.truncate(size as usize);
            ffi::SQLITE_OK
        }
        Some((api, Handle::Db(db))) => match db.truncate(size as u64) {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => fail(api, e),
        },
        None => ffi::SQLITE_IOERR_TRUNCATE,
    })
}

unsafe extern "C" fn x_sync(_file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    // Durability comes from the commit: a version is published durably or not at all.
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_file_size(file: *mut ffi::sqlite3_file, out: *mut i64) -> c_int {
    guarded(|| {
        let size = match unsafe { handle(file) } {
            Some((_, Handle::Mem(m))) => m.data.len() as u64,
            Some((api, Handle::Db(db))) => match db.size() {
                Ok(s) => s,
                Err(e) => return fail(api, e),
            },
            None => return ffi::SQLITE_IOERR_FSTAT,
        };
        // SAFETY: SQLite passes a valid out pointer.
        unsafe { *out = size as i64 };
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    guarded(|| match unsafe { handle(file) } {
        Some((api, Handle::Db(db))) => match db.lock(Lock::from_raw(level)) {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => fail(api, e),
        },
        Some((_, Handle::Mem(_))) => ffi::SQLITE_OK,
        None => ffi::SQLITE_IOERR_LOCK,
    })
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    guarded(|| match unsafe { handle(file) } {
        Some((api, Handle::Db(db))) => match db.unlock(Lock::from_raw(level)) {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => fail(api, e),
        },
        Some((_, Handle::Mem(_))) => ffi::SQLITE_OK,
        None => ffi::SQLITE_IOERR_UNLOCK,
    })
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    guarded(|| {
        let held = matches!(unsafe { handle(file) }, Some((_, Handle::Db(db))) if db.has_writer());
        // SAFETY: SQLite passes a valid out pointer.
        unsafe { *out = held as c_int };
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    guarded(|| {
        let Some((api, Handle::Db(db))) = (unsafe { handle(file) }) else {
            return ffi::SQLITE_NOTFOUND;
        };
        match op {
            ffi::SQLITE_FCNTL_COMMIT_PHASETWO => match db.commit() {
                Ok(()) => ffi::SQLITE_OK,
                Err(e) => fail(api, e),
            },
            // SAFETY: for FCNTL_PRAGMA, `arg` is SQLite's char*[3] (result, name, value).
            ffi::SQLITE_FCNTL_PRAGMA => unsafe { pragma(api, db, arg.cast::<*mut c_char>()) },
            _ => ffi::SQLITE_NOTFOUND,
        }
    })
}

/// # Safety
/// `args` must be FCNTL_PRAGMA's array: [0] the result slot, [1] the name, [2] the value.
unsafe fn pragma(api: &Api, db: &mut DbFile, args: *mut *mut c_char) -> c_int {
    // SAFETY: per the contract.
    let (name, value) = unsafe {
        let text = |p: *mut c_char| {
            (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().to_lowercase())
        };
        (text(*args.add(1)).unwrap_or_default(), text(*args.add(2)))
    };
    let answer = |text: &str| {
        // SAFETY: SQLite frees the result slot with sqlite3_free.
        unsafe { *args = api.sqlite_string(text) };
    };
    match (name.as_str(), value.as_deref()) {
        ("journal_mode", Some("wal")) => {
            answer("the scion VFS does not do journal_mode=WAL: its readers never block the writer anyway (each read transaction sees one version); use the default journal mode");
            ffi::SQLITE_ERROR
        }
        // A connection that keeps its lock between transactions trusts its page cache
        // and never re-reads the head: it would never see another writer's commit, and
        // would commit pages made from a stale cache on top of it.
        ("locking_mode", Some("exclusive")) => {
            answer("the scion VFS does not do locking_mode=EXCLUSIVE: a connection that keeps its lock would not see other writers' commits; keep the default (normal) mode: each transaction reads one version, and readers never block a writer anyway");
            ffi::SQLITE_ERROR
        }
        ("scion_version", None) => match db.version() {
            Ok(v) => {
                answer(&v.to_string());
                ffi::SQLITE_OK
            }
            Err(e) => fail(api, e),
        },
        // "<count> <last version>", or "0" before this connection's first commit.
        ("scion_commits", None) => {
            let c = db.commits();
            match c.last {
                Some(v) => answer(&format!("{} {v}", c.count)),
                None => answer("0"),
            }
            ffi::SQLITE_OK
        }
        _ => ffi::SQLITE_NOTFOUND,
    }
}

unsafe extern "C" fn x_sector_size(_file: *mut ffi::sqlite3_file) -> c_int {
    4096
}

unsafe extern "C" fn x_device_characteristics(_file: *mut ffi::sqlite3_file) -> c_int {
    ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE
}
