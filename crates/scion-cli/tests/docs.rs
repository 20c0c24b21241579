//! The docs are tests: every shell block README.md, docs/*.md and the TypeScript README show
//! a user runs here as written, with the real `scion` on `PATH`, in the order the doc gives
//! them. Each block says how, in the comment right above it:
//!
//! - `<!-- doc-test: run -->`: run with `bash -euo pipefail` in one fresh directory per doc
//!   (a doc other than the README starts from the README's quickstart, which it builds on);
//!   it must exit 0.
//! - `<!-- doc-test: background -->`: a second terminal running `scion serve`: started in the
//!   background, waited for until it answers, stopped when the doc is done.
//! - `<!-- doc-test: run-s3 -->`, `<!-- doc-test: run-azure -->`: run against the S3 and
//!   Azure test servers `./scripts/test` starts, the page's placeholders (bucket, container,
//!   `...` credentials) replaced by the runner.
//! - `<!-- doc-test: run-python -->`: needs the Python package; run by
//!   `sdk/python/tests/test_docs.py` (with the page's Python blocks) from `./scripts/test-python`.
//! - `<!-- doc-test: skip: <reason> -->`: not run, and why (printed).
//!
//! A shell block without one fails the test, so a doc cannot drift from the code unnoticed.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
enum How {
    Run,
    Background,
    Skip(String),
}

#[derive(Debug, Clone)]
struct Block {
    /// Where it is: `README.md:74`.
    at: String,
    line: usize,
    how: How,
    code: String,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Markdown files of a directory of the repository, sorted.
fn markdown_in(dir: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    found.sort();
    found
}

/// The docs a user reads, README first.
fn docs() -> Vec<PathBuf> {
    let mut docs = vec![repo().join("README.md")];
    docs.extend(markdown_in("docs"));
    docs.extend(markdown_in("docs/recipes"));
    docs.push(repo().join("sdk/typescript/README.md"));
    docs
}

/// The code a recipe page shows under `<!-- recipe: PATH -->`: the fenced block right after
/// the marker, and the repository file it says it is.
fn recipe_blocks(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(path) = line
            .trim()
            .strip_prefix("<!-- recipe:")
            .and_then(|l| l.strip_suffix("-->"))
        else {
            continue;
        };
        let open = i + 1;
        assert!(
            lines.get(open).is_some_and(|l| l.starts_with("```")),
            "line {}: a recipe marker not followed by a fenced block",
            i + 1
        );
        let close = (open + 1..lines.len())
            .find(|&j| lines[j].starts_with("```"))
            .unwrap_or_else(|| panic!("line {}: an unclosed block", open + 1));
        let shown = lines[open + 1..close].join("\n") + "\n";
        out.push((path.trim().to_string(), shown));
    }
    out
}

/// The shell blocks of `text` (the doc `name`) and how each is to be run; an error names a
/// block without a marker.
fn blocks(name: &str, text: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        let lang = fence.strip_prefix("```").map(str::trim);
        if !matches!(lang, Some("sh" | "bash" | "shell" | "console")) {
            i += 1;
            continue;
        }
        let marker = lines[..i]
            .iter()
            .rev()
            .map(|l| l.trim())
            .find(|l| !l.is_empty() && !l.starts_with("<!-- quickstart:"))
            .and_then(|l| l.strip_prefix("<!-- doc-test:"))
            .and_then(|l| l.strip_suffix("-->"))
            .map(str::trim);
        let how = match marker {
            Some("run") => How::Run,
            Some("background") => How::Background,
            Some(m) if m.starts_with("skip:") => How::Skip(m["skip:".len()..].trim().to_string()),
            Some(m @ ("run-s3" | "run-azure")) => {
                let start = i + 1;
                let mut end = start;
                while end < lines.len() && !lines[end].trim_start().starts_with("```") {
                    end += 1;
                }
                let shown = lines[start..end].join("\n") + "\n";
                out.push(Block {
                    at: format!("{name}:{}", i + 1),
                    line: i + 1,
                    how: How::Run,
                    code: test_server(m, &shown)?,
                });
                i = end + 1;
                continue;
            }
            Some("run-python") => How::Skip(
                "needs the Python package: sdk/python/tests/test_docs.py runs it (./scripts/test-python)".into(),
            ),
            other => {
                return Err(format!(
                    "line {}: a shell block without a doc-test marker (found {other:?})",
                    i + 1
                ))
            }
        };
        let start = i + 1;
        let mut end = start;
        while end < lines.len() && !lines[end].trim_start().starts_with("```") {
            end += 1;
        }
        out.push(Block {
            at: format!("{name}:{}", i + 1),
            line: i + 1,
            how,
            code: lines[start..end].join("\n") + "\n",
        });
        i = end + 1;
    }
    Ok(out)
}

/// A block written for a real bucket or container, pointed at the test servers
/// `./scripts/test` runs: the page's placeholders (`s3://my-bucket/scion`, `...`
/// credentials) replaced by the runner, never by hand.
fn test_server(kind: &str, shown: &str) -> Result<String, String> {
    let var = |k: &str| {
        std::env::var(k).map_err(|_| {
            format!(
                "{kind} blocks run against the test servers ./scripts/test starts ({k} is not set)"
            )
        })
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let unique = format!("doc-{}-{nanos}", std::process::id());
    Ok(match kind {
        "run-s3" => shown
            .replace(
                "s3://my-bucket/scion",
                &format!("s3://{}/{unique}", var("SCION_S3_TEST_BUCKET")?),
            )
            .replace(
                "AWS_ACCESS_KEY_ID=...",
                &format!("AWS_ACCESS_KEY_ID={}", var("AWS_ACCESS_KEY_ID")?),
            )
            .replace(
                "AWS_SECRET_ACCESS_KEY=...",
                &format!("AWS_SECRET_ACCESS_KEY={}", var("AWS_SECRET_ACCESS_KEY")?),
            ),
        _ => {
            // Azurite's well-known development account.
            let key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
            var("AZURITE_BLOB_STORAGE_URL")?;
            shown
                .replace(
                    "az://my-container/scion",
                    &format!("az://{}/{unique}", var("SCION_AZURE_TEST_CONTAINER")?),
                )
                .replace(
                    "AZURE_STORAGE_ACCOUNT_NAME=...",
                    "AZURE_STORAGE_ACCOUNT_NAME=devstoreaccount1",
                )
                .replace(
                    "AZURE_STORAGE_ACCOUNT_KEY=...",
                    &format!("AZURE_STORAGE_ACCOUNT_KEY={key}"),
                )
        }
    })
}

/// A shell for the docs' blocks: `scion` on `PATH`, a home of its own (so a daemon's socket
/// goes there), no store or socket from the environment.
fn shell(dir: &Path, code: &str) -> Command {
    let bin_dir = common::bin().parent().unwrap().to_path_buf();
    let mut c = Command::new("bash");
    c.args(["-euo", "pipefail", "-c", code])
        .current_dir(dir)
        .env(
            "PATH",
            format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap()),
        )
        .env("HOME", dir.join("home"))
        .env_remove("SCION_STORE")
        .env_remove("SCION_SOCKET")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_STATE_HOME")
        .stdin(Stdio::null());
    c
}

/// Wait for `child` at most `limit`; kill it (and what it started) past that.
fn finish(mut child: Child, limit: Duration) -> Result<std::process::Output, String> {
    let started = Instant::now();
    loop {
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            return child.wait_with_output().map_err(|e| e.to_string());
        }
        if started.elapsed() > limit {
            // SAFETY: kill(2) on the group this test made for the block.
            unsafe { libc::killpg(child.id() as i32, libc::SIGKILL) };
            let out = child.wait_with_output().map_err(|e| e.to_string())?;
            return Err(format!(
                "still running after {limit:?}:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The blocks of one doc, in order, in `dir`; what each did, or the first failure.
fn run_doc(dir: &Path, blocks: &[Block]) -> Result<(usize, usize), String> {
    let mut background: Vec<Child> = Vec::new();
    let mut result = Ok((0, 0));
    for b in blocks {
        let (ran, skipped) = result.clone()?;
        match &b.how {
            How::Skip(reason) => {
                eprintln!("{}: skipped: {reason}", b.at);
                result = Ok((ran, skipped + 1));
            }
            How::Background => {
                let child = shell(dir, &b.code)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .process_group(0)
                    .spawn()
                    .unwrap();
                background.push(child);
                let started = Instant::now();
                while !shell(dir, "scion session list >/dev/null 2>&1")
                    .status()
                    .unwrap()
                    .success()
                {
                    if started.elapsed() > Duration::from_secs(30) {
                        result = Err(format!("{}: the daemon never answered", b.at));
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                if result.is_err() {
                    break;
                }
                eprintln!("{}: started in the background", b.at);
                result = Ok((ran + 1, skipped));
            }
            How::Run => {
                let child = shell(dir, &b.code)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .process_group(0)
                    .spawn()
                    .unwrap();
                match finish(child, Duration::from_secs(120)) {
                    Ok(out) if out.status.success() => {
                        eprintln!("{}: ran", b.at);
                        result = Ok((ran + 1, skipped));
                    }
                    Ok(out) => {
                        result = Err(format!(
                            "{}: exit {:?}\n--- block\n{}--- stdout\n{}--- stderr\n{}",
                            b.at,
                            out.status.code(),
                            b.code,
                            String::from_utf8_lossy(&out.stdout),
                            String::from_utf8_lossy(&out.stderr)
                        ));
                        break;
                    }
                    Err(e) => {
                        result = Err(format!("{}: {e}\n--- block\n{}", b.at, b.code));
                        break;
                    }
                }
            }
        }
    }
    for child in background {
        // SAFETY: kill(2) on the group this test made for the block; SIGTERM lets the
        // daemon flush and close its sessions.
        unsafe { libc::killpg(child.id() as i32, libc::SIGTERM) };
        let _ = finish(child, Duration::from_secs(30));
    }
    result
}

#[test]
fn every_shell_block_of_the_docs_has_a_marker_and_the_runnable_ones_run() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let quickstart: Vec<Block> = blocks("README.md", &readme)
        .unwrap()
        .into_iter()
        .filter(|b| {
            readme
                .lines()
                .nth(b.line - 3)
                .is_some_and(|l| l.contains("quickstart:start"))
        })
        .collect();
    assert_eq!(quickstart.len(), 1, "the README's quickstart block");
    let (mut ran, mut skipped, mut failures) = (0, 0, Vec::new());
    for doc in docs() {
        let name = doc
            .strip_prefix(repo())
            .unwrap_or(&doc)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&doc).unwrap();
        let found = match blocks(&name, &text) {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        if found.is_empty() {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let mut todo = found.clone();
        let runs_any = found.iter().any(|b| !matches!(b.how, How::Skip(_)));
        if name != "README.md" && runs_any {
            todo.splice(0..0, quickstart.iter().cloned());
        }
        match run_doc(dir.path(), &todo) {
            Ok((r, s)) => {
                // The prelude is counted once, with the README.
                let prelude = todo.len() - found.len();
                ran += r - prelude;
                skipped += s;
            }
            Err(e) => failures.push(e),
        }
    }
    eprintln!("docs: {ran} shell blocks run, {skipped} skipped (each with its reason)");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 5, "only {ran} blocks ran");
}

/// Each recipe page shows its code whole, and that code is a file the tests run: the block
/// under `<!-- recipe: PATH -->` is PATH, byte for byte, so the page cannot drift from what
/// runs.
#[test]
fn every_recipe_shows_the_file_its_tests_run() {
    let pages = markdown_in("docs/recipes");
    assert!(!pages.is_empty(), "docs/recipes holds the recipes");
    let mut shown = 0;
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let blocks = recipe_blocks(&text);
        assert!(
            !blocks.is_empty(),
            "{}: a recipe page shows the code its test runs, under <!-- recipe: PATH -->",
            page.display()
        );
        for (path, code) in blocks {
            let file = std::fs::read_to_string(repo().join(&path))
                .unwrap_or_else(|e| panic!("{}: {path}: {e}", page.display()));
            assert!(
                file == code,
                "{}: the block under <!-- recipe: {path} --> is not that file; copy it again",
                page.display()
            );
            shown += 1;
        }
    }
    eprintln!("recipes: {shown} files shown whole");
}

#[test]
fn a_block_without_a_marker_is_an_error() {
    let doc = "text\n\n```sh\nscion init\n```\n";
    assert!(blocks("x.md", doc).is_err());
    let doc =
        "<!-- doc-test: skip: why -->\n```sh\nx\n```\n<!-- doc-test: run -->\n```bash\ny\n```\n";
    let b = blocks("x.md", doc).unwrap();
    assert_eq!(b[0].how, How::Skip("why".into()));
    assert_eq!(b[1].how, How::Run);
    assert_eq!(b[1].code, "y\n");
}
