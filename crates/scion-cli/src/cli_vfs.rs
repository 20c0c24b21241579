//! `scion sql` and `scion shell`: SQL on a branch through the scion VFS, with nothing
//! materialized. `sql` runs statements in this process; `shell` starts the stock `sqlite3`
//! CLI with the VFS loaded as an extension.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use scion_core::Target;

#[derive(Debug, Args)]
pub struct SqlArgs {
    /// db[@branch[@checkpoint]]: a checkpoint opens read-only.
    pub target: String,
    /// Statements, separated by semicolons. Each change commits as a new version (wrap
    /// several in BEGIN ... COMMIT to make them one).
    pub sql: String,
    /// Open read-only (no statement may write).
    #[arg(long)]
    pub read_only: bool,
    /// Read another version beside the target, as NAME=db@branch[@checkpoint]: attached
    /// read-only under NAME (`SELECT ... FROM NAME.items`). Repeatable, up to 125 times.
    #[arg(long = "attach", value_name = "NAME=TARGET")]
    pub attach: Vec<String>,
    /// Print a line of column names first (default: only when stdout is a terminal, so
    /// output read by a script holds rows alone, as with sqlite3 in a pipe).
    #[arg(long, overrides_with = "no_header")]
    pub header: bool,
    /// Print no line of column names, even on a terminal.
    #[arg(long)]
    pub no_header: bool,
    /// Rows as CSV (RFC 4180 quoting), as sqlite3's `.mode csv`.
    #[arg(long, conflicts_with = "line")]
    pub csv: bool,
    /// One `column = value` line per cell and a blank line between rows, as sqlite3's
    /// `.mode line`.
    #[arg(long)]
    pub line: bool,
}

/// How `scion sql` prints rows (`--json` prints the whole report instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlMode {
    /// `a|b|c`, as sqlite3's default.
    List,
    Csv,
    Line,
}

impl SqlArgs {
    pub fn mode(&self) -> SqlMode {
        if self.csv {
            SqlMode::Csv
        } else if self.line {
            SqlMode::Line
        } else {
            SqlMode::List
        }
    }

    /// Whether to print the column names: asked for, or on a terminal unless refused.
    pub fn header(&self, stdout_is_terminal: bool) -> bool {
        self.header || (stdout_is_terminal && !self.no_header)
    }
}

/// Most databases one connection attaches besides its own (`main` and `temp`): SQLite's
/// maximum, which this build is compiled with (`SQLITE_MAX_ATTACHED`).
const MAX_ATTACHED: usize = 125;

/// One `--attach NAME=TARGET`, checked.
struct Attachment {
    name: String,
    target: Target,
}

fn parse_attachment(text: &str) -> Result<Attachment, scion_core::EngineError> {
    let invalid = |reason: String| scion_core::EngineError::InvalidInput { reason };
    let Some((name, target)) = text.split_once('=') else {
        return Err(invalid(format!(
            "--attach {text:?}: give NAME=db@branch[@checkpoint], e.g. --attach base=shop@main"
        )));
    };
    let plain = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !plain || name.eq_ignore_ascii_case("main") || name.eq_ignore_ascii_case("temp") {
        return Err(invalid(format!(
            "--attach {text:?}: the name is an SQL schema name: letters, digits and '_' (not starting with a digit, at most 64), and neither main nor temp"
        )));
    }
    Ok(Attachment {
        name: name.to_string(),
        target: target.parse()?,
    })
}

#[derive(Debug, Args)]
pub struct ShellArgs {
    /// db[@branch[@checkpoint]]: a checkpoint opens read-only.
    pub target: String,
    /// The sqlite3 program to start.
    #[arg(long, default_value = "sqlite3", value_name = "PROGRAM")]
    pub sqlite3: PathBuf,
    /// The loadable extension (default: libscion_vfs.so beside the scion binary, or
    /// SCION_VFS_EXTENSION).
    #[arg(long, env = "SCION_VFS_EXTENSION", value_name = "PATH")]
    pub extension: Option<PathBuf>,
    /// Arguments passed on to sqlite3 after the database (SQL to run, then exit).
    #[arg(last = true)]
    pub args: Vec<String>,
}

/// One statement's result.
#[derive(Debug, serde::Serialize)]
pub struct StatementResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<serde_json::Value>>,
}

#[derive(Debug, serde::Serialize)]
pub struct SqlReport {
    pub target: String,
    /// The version the connection read when it opened.
    pub version_before: u64,
    /// The version the connection reads after the last statement: the head then, which
    /// holds other writers' commits made meanwhile too.
    pub version: u64,
    /// How many versions the statements committed.
    pub commits: u64,
    /// The version the statements' last commit made (absent when they committed nothing).
    pub committed: Option<u64>,
    pub results: Vec<StatementResult>,
}

/// A statement the VFS failed, presented as the engine presents the cause (exit code,
/// error code, hint) rather than as a bare SQLite error.
#[derive(Debug)]
pub struct SqlFailure {
    pub failure: scion_vfs::VfsFailure,
    pub sqlite: String,
}

impl std::fmt::Display for SqlFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (SQLite: {})", self.failure.message, self.sqlite)
    }
}

impl std::error::Error for SqlFailure {}

fn explain(e: rusqlite::Error) -> anyhow::Error {
    // The VFS's last failure explains this error only if SQLite passed its code on (an
    // earlier failure SQLite recovered from says nothing about this one).
    let code = match &e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.extended_code),
        _ => None,
    };
    match scion_vfs::last_failure() {
        Some(failure) if code.is_some_and(|c| c & 0xff == failure.sqlite_code & 0xff) => {
            SqlFailure {
                failure,
                sqlite: e.to_string(),
            }
            .into()
        }
        // SQLite refuses the write itself on a database opened read-only (a checkpoint,
        // an --attach'ed version, or --read-only): bad input, as for a checkout of a
        // checkpoint.
        _ if code.is_some_and(|c| c & 0xff == rusqlite::ffi::SQLITE_READONLY) => SqlFailure {
            failure: scion_vfs::VfsFailure {
                sqlite_code: rusqlite::ffi::SQLITE_READONLY,
                message:
                    "that database is read-only (a checkpoint, a version given with --attach, or --read-only)"
                        .into(),
                described: scion_core::described::Described {
                    exit: scion_core::described::Exit::InvalidInput,
                    code: "invalid_input",
                    hint: Some(
                        "write to the target branch; to write a checkpoint, fork it: `scion fork <db>@<branch> <new> --at <checkpoint>`"
                            .into(),
                    ),
                },
            },
            sqlite: e.to_string(),
        }
        .into(),
        _ => anyhow::anyhow!("SQLite: {e}"),
    }
}

fn json_value(v: ValueRef<'_>) -> serde_json::Value {
    match v {
        ValueRef::Null => serde_json::Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(f) => serde_json::json!(f),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned().into(),
        ValueRef::Blob(b) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            format!("x'{hex}'").into()
        }
    }
}

/// `scion sql`: run it and print what it answered.
pub fn sql_command(
    p: &crate::output::Printer,
    scion: scion_core::Scion,
    args: &SqlArgs,
) -> Result<()> {
    let report = sql(scion, args)?;
    let header = args.header(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    p.rendered(&report, &report.render(args.mode(), header));
    if let Some(line) = report.summary().filter(|_| !p.json) {
        eprintln!("{line}");
    }
    Ok(())
}

pub fn sql(scion: scion_core::Scion, args: &SqlArgs) -> Result<SqlReport> {
    let target: Target = args.target.parse()?;
    // The engine says what is wrong with a target (and which exit code that is); SQLite
    // could only say "unable to open database file".
    scion.engine().resolve(&target)?;
    if args.attach.len() > MAX_ATTACHED {
        return Err(scion_core::EngineError::InvalidInput {
            reason: format!(
                "--attach: at most {MAX_ATTACHED} versions beside the target ({} given)",
                args.attach.len()
            ),
        }
        .into());
    }
    let mut attachments: Vec<Attachment> = Vec::new();
    for text in &args.attach {
        let a = parse_attachment(text)?;
        if attachments
            .iter()
            .any(|b| b.name.eq_ignore_ascii_case(&a.name))
        {
            return Err(scion_core::EngineError::InvalidInput {
                reason: format!("--attach: the name {} is given twice", a.name),
            }
            .into());
        }
        scion.engine().resolve(&a.target)?;
        attachments.push(a);
    }
    scion_vfs::register()
        .map_err(|rc| anyhow::anyhow!("registering the scion VFS failed ({rc})"))?;
    let location = scion.engine().location().to_string();
    // The VFS works on this very attachment: `--stats` counts what it reads and writes.
    scion_vfs::adopt(&location, scion.engine().clone());
    let uri = scion_vfs::uri(&target.to_string(), &location, args.read_only);
    let flags = if args.read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
    } | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(&uri, flags).map_err(explain)?;
    conn.set_limit(
        rusqlite::limits::Limit::SQLITE_LIMIT_ATTACHED,
        MAX_ATTACHED as i32,
    )
    .map_err(explain)?;
    for a in &attachments {
        // Read-only: a statement of this run writes its target, never another version.
        let other = scion_vfs::uri(&a.target.to_string(), &location, true);
        conn.execute(&format!("ATTACH DATABASE ?1 AS \"{}\"", a.name), [other])
            .map_err(explain)?;
    }
    let read_version = |conn: &Connection| -> Result<u64> {
        let v: String = conn
            .pragma_query_value(None, "scion_version", |r| r.get(0))
            .map_err(explain)?;
        Ok(v.parse().unwrap_or(0))
    };
    let version_before = read_version(&conn)?;
    let mut results = Vec::new();
    let mut batch = rusqlite::Batch::new(&conn, &args.sql);
    while let Some(mut stmt) = batch.next().map_err(explain)? {
        let columns: Vec<String> = stmt.column_names().map(str::to_string).collect();
        let n = columns.len();
        let mut rows = Vec::new();
        let mut q = stmt.raw_query();
        while let Some(r) = q.next().map_err(explain)? {
            rows.push((0..n).map(|i| json_value(r.get_ref_unwrap(i))).collect());
        }
        if n > 0 {
            results.push(StatementResult { columns, rows });
        }
    }
    let commits: String = conn
        .pragma_query_value(None, "scion_commits", |r| r.get(0))
        .map_err(explain)?;
    let (commits, committed) = match commits.split_once(' ') {
        Some((n, v)) => (n.parse().unwrap_or(0), v.parse().ok()),
        None => (0, None),
    };
    Ok(SqlReport {
        target: target.to_string(),
        version_before,
        version: read_version(&conn)?,
        commits,
        committed,
        results,
    })
}

impl SqlReport {
    /// What the statements committed, for people (stderr): nothing for a read.
    pub fn summary(&self) -> Option<String> {
        let last = self.committed?;
        let commits = self.commits;
        let plural = if commits == 1 { "" } else { "s" };
        Some(
            if self.version_before + commits == last && last == self.version {
                format!(
                    "committed to {}: version {} -> {last} ({commits} commit{plural})",
                    self.target, self.version_before
                )
            } else {
                // Another writer committed in between: say which version is this run's.
                format!(
                "committed to {}: {commits} commit{plural}, the last made version {last} (the head read {} before, {} after: other writers committed too)",
                self.target, self.version_before, self.version
            )
            },
        )
    }

    /// The rows as sqlite3 prints them in `mode`, with a header line when `header`
    /// (`.mode line` always names each column).
    pub fn render(&self, mode: SqlMode, header: bool) -> String {
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::Null => String::new(),
            serde_json::Value::String(t) => t.clone(),
            other => other.to_string(),
        };
        let csv = |t: String| {
            if t.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", t.replace('"', "\"\""))
            } else {
                t
            }
        };
        let mut s = String::new();
        for r in &self.results {
            match mode {
                SqlMode::List | SqlMode::Csv => {
                    let (sep, cell): (&str, &dyn Fn(String) -> String) = match mode {
                        SqlMode::Csv => (",", &csv),
                        _ => ("|", &|t| t),
                    };
                    if header {
                        let names: Vec<String> =
                            r.columns.iter().map(|c| cell(c.clone())).collect();
                        s += &names.join(sep);
                        s.push('\n');
                    }
                    for row in &r.rows {
                        let cells: Vec<String> = row.iter().map(|v| cell(text(v))).collect();
                        s += &cells.join(sep);
                        s.push('\n');
                    }
                }
                SqlMode::Line => {
                    let width = r
                        .columns
                        .iter()
                        .map(|c| c.chars().count())
                        .max()
                        .unwrap_or(0);
                    for (i, row) in r.rows.iter().enumerate() {
                        if i > 0 {
                            s.push('\n');
                        }
                        for (c, v) in r.columns.iter().zip(row) {
                            s += &format!("{c:>width$} = {}\n", text(v));
                        }
                    }
                }
            }
        }
        s
    }
}

/// The loadable extension: `--extension`, else beside this binary.
fn extension(args: &ShellArgs) -> Result<PathBuf> {
    if let Some(p) = &args.extension {
        if !p.is_file() {
            bail!("no loadable extension at {}", p.display());
        }
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().context("finding the scion binary")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    for candidate in [
        dir.join("libscion_vfs.so"),
        dir.join("../lib/libscion_vfs.so"),
    ] {
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "no libscion_vfs.so beside {} (build it with `cargo build --release -p scion-vfs-ext`, or pass --extension / SCION_VFS_EXTENSION)",
        exe.display()
    )
}

/// Run `sqlite3` with the extension loaded and the target open, and end as it ends: a run
/// that failed because of scion (a lease, a head that moved, damaged data) exits with that
/// cause's code and hint, as `scion sql` does; any other failure with sqlite3's own code.
pub fn shell(scion: scion_core::Scion, args: &ShellArgs) -> Result<()> {
    let target: Target = args.target.parse()?;
    // As for `sql`: the engine says what is wrong with a target (sqlite3 would print
    // "unable to open database file" and go on with an in-memory database).
    scion.engine().resolve(&target)?;
    let ext = extension(args)?;
    let uri = scion_vfs::uri(&target.to_string(), scion.engine().location(), false);
    // The extension's entry point is derived from its file name; load it without the
    // suffix as sqlite3 expects.
    let load = ext.with_extension("");
    let failures = std::env::temp_dir().join(format!(
        "scion-shell-{}-{}.failures",
        std::process::id(),
        scion_core::clock::unix_ms(std::time::SystemTime::now())
    ));
    let mut child = std::process::Command::new(&args.sqlite3);
    child
        // SQLite's own messages for the VFS's refusals are generic ("database is locked");
        // the VFS logs why (who holds the branch, that the head moved), so show the log.
        .arg("-cmd")
        .arg(".log stderr")
        .arg("-cmd")
        .arg(format!(".load {}", load.display()))
        .arg("-cmd")
        .arg(format!(".open {uri}"))
        .arg(":memory:")
        .args(&args.args)
        .env("SCION_VFS_FAILURES", &failures);
    // Ctrl-C is the shell's (it cancels a statement); this process only waits for it.
    // SAFETY: setting a signal's disposition to "ignore" has no preconditions.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let status = match child.status() {
        Ok(status) => status,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => bail!(
            "no {} program to start: install the sqlite3 shell (Debian: apt-get install sqlite3), or pass --sqlite3 PATH; `scion sql` needs no shell",
            args.sqlite3.display()
        ),
        Err(err) => {
            return Err(err).with_context(|| format!("starting {}", args.sqlite3.display()))
        }
    };
    let last = std::fs::read_to_string(&failures)
        .ok()
        .and_then(|t| t.lines().last().map(str::to_string));
    let _ = std::fs::remove_file(&failures);
    if status.success() {
        return Ok(());
    }
    let code = status.code().unwrap_or(1);
    Err(match last.as_deref().and_then(shell_failure) {
        Some(failure) => SqlFailure {
            failure,
            sqlite: format!("sqlite3 exited with {code}"),
        }
        .into(),
        None => SqlFailure {
            failure: scion_vfs::VfsFailure {
                sqlite_code: 0,
                message: format!("{} failed", args.sqlite3.display()),
                described: scion_core::described::Described {
                    exit: scion_core::described::Exit::Failure,
                    code: "sqlite_error",
                    hint: None,
                },
            },
            sqlite: format!("exit {code}"),
        }
        .into(),
    })
}

/// A line the extension wrote for a failure: `exit-code<TAB>error-code<TAB>message<TAB>hint`.
fn shell_failure(line: &str) -> Option<scion_vfs::VfsFailure> {
    use scion_core::described::{Described, Exit};
    let mut parts = line.splitn(4, '\t');
    let exit = match parts.next()?.parse::<u8>().ok()? {
        3 => Exit::NotFound,
        4 => Exit::AlreadyExists,
        5 => Exit::Conflict,
        6 => Exit::Refused,
        7 => Exit::Corrupt,
        8 => Exit::InvalidInput,
        9 => Exit::Transient,
        10 => Exit::Unsupported,
        _ => Exit::Failure,
    };
    // Read once, as this process ends.
    let code: &'static str = Box::leak(parts.next()?.to_string().into_boxed_str());
    let message = parts.next().unwrap_or_default().to_string();
    let hint = parts.next().filter(|h| !h.is_empty()).map(str::to_string);
    Some(scion_vfs::VfsFailure {
        sqlite_code: 0,
        message,
        described: Described { exit, code, hint },
    })
}
