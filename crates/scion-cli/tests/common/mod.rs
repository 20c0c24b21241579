//! Run the real `scion` binary in a temp directory.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Run `c` to its end and collect what it said.
pub fn outcome(c: &mut Command) -> Run {
    let out = c.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

pub struct Session {
    pub dir: tempfile::TempDir,
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_scion"))
}

/// Run the README's quickstart block (between its `quickstart` markers) as written, with
/// `bash -euo pipefail` in `dir`, the built `scion` first on PATH and `env` set (no
/// `SCION_STORE` unless `env` names one); require success and return what it printed.
pub fn run_readme_quickstart(dir: &Path, env: &[(&str, String)]) -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let start = readme
        .find("<!-- quickstart:start -->")
        .expect("quickstart start marker");
    let end = readme
        .find("<!-- quickstart:end -->")
        .expect("quickstart end marker");
    let code = readme[start..end]
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh code block between the markers");
    let path = format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap()
    );
    let mut c = Command::new("bash");
    c.args(["-euo", "pipefail", "-c", code])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("SCION_STORE");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "quickstart failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

impl Default for Session {
    fn default() -> Self {
        Self::new()
    }
}

impl Session {
    pub fn new() -> Self {
        Session {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        // The session directory is home: store discovery stops there, as it would at a
        // user's home, whatever is above the temp directory on this machine.
        c.args(args)
            .current_dir(self.dir.path())
            .env("HOME", self.dir.path())
            .env_remove("SCION_STORE")
            .env_remove("SCION_CLONE")
            .env("SCION_LOG", "warn");
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        outcome(&mut self.cmd(args))
    }

    /// Run with the environment variables `env` set.
    pub fn run_with(&self, env: &[(&str, String)], args: &[&str]) -> Run {
        let mut c = self.cmd(args);
        for (k, v) in env {
            c.env(k, v);
        }
        outcome(&mut c)
    }

    /// Run with `env` set and require success; returns stdout.
    pub fn ok_with(&self, env: &[(&str, String)], args: &[&str]) -> String {
        let r = self.run_with(env, args);
        assert_eq!(r.code, 0, "scion {args:?}: {}{}", r.stdout, r.stderr);
        r.stdout
    }

    /// Run and require success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let r = self.run(args);
        assert_eq!(
            r.code, 0,
            "scion {args:?} failed:\n{}{}",
            r.stdout, r.stderr
        );
        r.stdout
    }

    /// Run with `--json`, require success, and parse what it printed.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("scion {all:?}: {e}:\n{out}"))
    }

    /// Make output stable: temp paths, ids and times.
    pub fn scrub(&self, s: &str) -> String {
        let dir = self.dir.path().canonicalize().unwrap();
        let mut out = s.replace(&dir.display().to_string(), "[DIR]");
        out = out.replace(&self.dir.path().display().to_string(), "[DIR]");
        // Checkouts are recorded as `host:path`; the host is the machine's.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        if !host.trim().is_empty() {
            out = out.replace(&format!("\"{}:[DIR]", host.trim()), "\"[HOST]:[DIR]");
        }
        let re_time = regex_lite(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", "[TIME]");
        out = re_time(&out);
        let re_id = regex_lite(r"[0-9a-f]{32}", "[ID]");
        out = re_id(&out);
        // Whether the temp filesystem can clone is the machine's business, not the CLI's;
        // so are its name and how long a checkout has been held, in `status`.
        let host = host.trim().to_string();
        out.lines()
            .map(scrub_small_byte_counts)
            .map(|l| match l.find("filesystem ") {
                Some(i) if l.starts_with("clone:") => format!("{}filesystem [CAPABILITY]", &l[..i]),
                _ if !host.is_empty() && l == format!("  {host}") => "  [HOST]".to_string(),
                _ if l.starts_with("    checkout of ") && l.ends_with(')') => {
                    match l.rfind(" (for ") {
                        Some(i) => format!("{} (for [AGE])", &l[..i]),
                        None => l.to_string(),
                    }
                }
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
            + if out.ends_with('\n') { "\n" } else { "" }
    }
}

/// A write of a few hundred bytes is mostly page-map nodes and a root record, which name
/// segments by random 64-bit ids and are lz4-compressed: now and then an id holds bytes
/// lz4 can match, and the same change is written a byte or two smaller. The count is
/// shown as `[N] B written`; what a change costs is pinned by the tests that count
/// objects and bytes, not by the transcripts.
fn scrub_small_byte_counts(line: &str) -> String {
    let Some(end) = line.find(" B written") else {
        return line.to_string();
    };
    let start = line[..end]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    if start == end {
        return line.to_string();
    }
    format!("{}[N]{}", &line[..start], &line[end..])
}

/// A tiny regex-free replacer for the two fixed shapes the snapshots scrub.
fn regex_lite(pattern: &'static str, with: &'static str) -> impl Fn(&str) -> String {
    move |s: &str| {
        let is_time = pattern.starts_with(r"\d{4}");
        let n = if is_time { 24 } else { 32 };
        let matches = |w: &[u8]| -> bool {
            if is_time {
                let shape = b"dddd-dd-ddTdd:dd:dd.dddZ";
                w.iter().zip(shape).all(|(c, t)| {
                    if *t == b'd' {
                        c.is_ascii_digit()
                    } else {
                        c == t
                    }
                })
            } else {
                w.iter()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
            }
        };
        let b = s.as_bytes();
        let mut out = String::new();
        let mut i = 0;
        while i < b.len() {
            if i + n <= b.len() && matches(&b[i..i + n]) {
                out.push_str(with);
                i += n;
            } else {
                let ch = s[i..].chars().next().unwrap();
                out.push(ch);
                i += ch.len_utf8();
            }
        }
        out
    }
}

pub fn sqlite(path: &Path, sql: &str) -> String {
    let c = rusqlite::Connection::open(path).unwrap();
    let mut out = Vec::new();
    for stmt in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let mut st = c.prepare(stmt).unwrap();
        let n = st.column_count();
        let mut rows = st.query([]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            let vals: Vec<String> = (0..n)
                .map(|i| format!("{:?}", r.get::<_, rusqlite::types::Value>(i).unwrap()))
                .collect();
            out.push(vals.join("|"));
        }
    }
    out.join("\n")
}

pub fn seed(path: &Path, rows: usize) {
    sqlite(
        path,
        &format!(
            "PRAGMA journal_mode=WAL; CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
             INSERT INTO items(name, price) SELECT 'item-' || i, i * 1.25 FROM n;"
        ),
    );
}

/// A cheap, seeded generator so a failure can be replayed from the printed seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A documented route of docs/openapi.json with its parameters filled in, so that it can be
/// sent: a database, a branch, a session id and a remote that exist in the tests' stores.
pub fn concrete_route(path: &str) -> String {
    path.replace("{db}", "shop")
        .replace("{branch}", "shop@main")
        .replace("{id}", "s-000000000000")
        .replace("{name}", "origin")
}
