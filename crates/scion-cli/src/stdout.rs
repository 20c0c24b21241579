//! Everything a command prints for its reader goes through here, so that a reader who
//! stops early never decides how the command ends.
//!
//! `scion branches shop | grep -q side` under `set -o pipefail`: grep exits at its first
//! match, and whether scion had already written its last line then is up to the scheduler.
//! A process killed by SIGPIPE (or panicking in `println!`) would fail such a pipeline now
//! and then, and a mutating command killed half way through its report would look failed
//! although its change landed. So SIGPIPE stays ignored (Rust's default), a write that
//! finds the reader gone drops the rest of the output, and the exit status says whether
//! the command did its work. Any other write error (a full disk behind `>`) fails the
//! command at its end, once its work is done.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static READER_GONE: AtomicBool = AtomicBool::new(false);
static FAILED: Mutex<Option<io::Error>> = Mutex::new(None);

/// Print a line on standard output (`println!` for the command's reader).
macro_rules! outln {
    () => {
        $crate::stdout::write_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write_line(format_args!($($arg)*))
    };
}

/// Print on standard output without a newline (`print!` for the command's reader).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write_text(format_args!($($arg)*))
    };
}

/// Write `args` and a newline.
pub fn write_line(args: fmt::Arguments) {
    write_with(|w| {
        w.write_fmt(args)?;
        w.write_all(b"\n")
    });
}

/// Write `args` as they are.
pub fn write_text(args: fmt::Arguments) {
    write_with(|w| w.write_fmt(args));
}

/// Write bytes as they are (a generated completion script, a man page).
pub fn write_bytes(bytes: &[u8]) {
    write_with(|w| w.write_all(bytes));
}

fn write_with(f: impl FnOnce(&mut io::StdoutLock<'static>) -> io::Result<()>) {
    if READER_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut lock = io::stdout().lock();
    if let Err(e) = f(&mut lock) {
        note_error(e);
    }
}

fn note_error(e: io::Error) {
    if e.kind() == io::ErrorKind::BrokenPipe {
        READER_GONE.store(true, Ordering::Relaxed);
        return;
    }
    let mut failed = FAILED.lock().unwrap_or_else(|p| p.into_inner());
    if failed.is_none() {
        *failed = Some(e);
    }
    // Nothing more is written after a failed write: half a report is worse than none.
    READER_GONE.store(true, Ordering::Relaxed);
}

/// Whether the reader stopped reading (or output failed): long listings may stop early.
pub fn reader_gone() -> bool {
    READER_GONE.load(Ordering::Relaxed)
}

/// Flush what is buffered and answer the first write error that was not the reader
/// going away.
pub fn finish() -> Option<io::Error> {
    if !reader_gone() {
        if let Err(e) = io::stdout().flush() {
            note_error(e);
        }
    }
    FAILED.lock().unwrap_or_else(|p| p.into_inner()).take()
}
