//! Byte-range locks that belong to an open file description (Linux's `F_OFD_SETLK`), the
//! kind scion uses wherever two holders may be in one process: a POSIX (`F_SETLK`) lock
//! belongs to the process, so a second descriptor of the same process would be granted it
//! again, and closing any descriptor of the file would drop it. Elsewhere the POSIX lock is
//! the fallback.

use std::fs::File;
use std::os::fd::AsRawFd;

#[cfg(target_os = "linux")]
const SET: libc::c_int = libc::F_OFD_SETLK;
#[cfg(target_os = "linux")]
const SET_WAIT: libc::c_int = libc::F_OFD_SETLKW;
#[cfg(not(target_os = "linux"))]
const SET: libc::c_int = libc::F_SETLK;
#[cfg(not(target_os = "linux"))]
const SET_WAIT: libc::c_int = libc::F_SETLKW;

/// What to do to a byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeLock {
    /// A read lock: any number of holders.
    Shared,
    /// A write lock: one holder, and no shared ones.
    Exclusive,
    /// Release what this file description holds on the range.
    Unlock,
}

/// Whether to wait for a range another holder has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Yes,
    No,
}

/// What a lock request found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locked {
    /// Done: the lock is held (or released).
    Granted,
    /// Another holder has a conflicting lock (only without waiting).
    Contended,
}

/// Lock (or unlock) `len` bytes of `file` from `start`. A signal's interruption is retried.
pub fn lock_range(
    file: &File,
    start: u64,
    len: u64,
    what: RangeLock,
    wait: Wait,
) -> std::io::Result<Locked> {
    // SAFETY: an all-zero `flock` is a valid value; the fields that matter are set below.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = match what {
        RangeLock::Shared => libc::F_RDLCK,
        RangeLock::Exclusive => libc::F_WRLCK,
        RangeLock::Unlock => libc::F_UNLCK,
    } as _;
    fl.l_whence = libc::SEEK_SET as _;
    fl.l_start = start as _;
    fl.l_len = len as _;
    let cmd = match wait {
        Wait::Yes => SET_WAIT,
        Wait::No => SET,
    };
    loop {
        // SAFETY: a plain fcntl on a descriptor `file` owns, with a valid `flock`.
        if unsafe { libc::fcntl(file.as_raw_fd(), cmd, &fl) } == 0 {
            return Ok(Locked::Granted);
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::EACCES) => return Ok(Locked::Contended),
            _ => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_descriptors_of_one_process_contend_for_a_range() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        // A write lock needs a descriptor open for writing.
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .unwrap()
        };
        let (a, b) = (open(), open());
        let lock = |f: &File, what| lock_range(f, 4, 2, what, Wait::No).unwrap();
        assert_eq!(lock(&a, RangeLock::Shared), Locked::Granted);
        assert_eq!(lock(&b, RangeLock::Shared), Locked::Granted);
        assert_eq!(lock(&b, RangeLock::Exclusive), Locked::Contended);
        assert_eq!(lock(&a, RangeLock::Unlock), Locked::Granted);
        assert_eq!(lock(&b, RangeLock::Exclusive), Locked::Granted);
        assert_eq!(lock(&a, RangeLock::Shared), Locked::Contended);
        // Other bytes are free; closing a descriptor releases its locks, and only its own.
        let byte_6 = |f: &File| lock_range(f, 6, 1, RangeLock::Exclusive, Wait::No).unwrap();
        assert_eq!(byte_6(&a), Locked::Granted);
        let c = open();
        assert_eq!(byte_6(&c), Locked::Contended);
        drop(a);
        assert_eq!(byte_6(&c), Locked::Granted);
        assert_eq!(lock(&c, RangeLock::Shared), Locked::Contended);
    }
}
