//! The scion VFS against plain SQLite: random workloads (DDL, inserts, updates, deletes,
//! large blobs on overflow pages, savepoints, ROLLBACK, VACUUM, page sizes 512-65536,
//! several connections, a second writer process, dirty pages spilled); after every
//! transaction both agree row by row, and every committed version re-read agrees.

mod common;

use rusqlite::{Connection, OpenFlags};
use scion_core::BranchRef;

use common::*;

/// How the branch side of the differential test writes.
enum Writers {
    /// One connection in this process (with `?spill_kib=` when given).
    OneProcess { spill_kib: Option<u64> },
    /// Every other transaction from a second process (this test binary run again).
    TwoProcesses,
}

/// The same random workload on a branch through the VFS and on a plain file: after every
/// transaction both agree, and at the end every committed version, re-read through a fresh
/// connection, agrees too.
fn differential(seed: u64, page_size: u32, steps: usize, writers: Writers) -> usize {
    let e = Env::new();
    let plain = e.create(
        "diff",
        page_size,
        "CREATE TABLE base(x); INSERT INTO base VALUES (1);",
    );
    let reference = Connection::open(&plain).unwrap();
    let scion_conn = match writers {
        Writers::OneProcess {
            spill_kib: Some(kib),
        } => e.open_with("diff@main", &format!("&spill_kib={kib}")),
        _ => e.open("diff@main"),
    };
    if matches!(writers, Writers::OneProcess { spill_kib: Some(_) }) {
        // A tiny page cache makes SQLite write pages out mid-transaction and read them
        // back: from the spill file, once they were set aside.
        scion_conn.execute_batch("PRAGMA cache_size=5").unwrap();
    }
    let mut child = matches!(writers, Writers::TwoProcesses).then(|| ChildWriter::spawn(&e));
    // A second connection on the branch, which must see every commit at its next read.
    let other = e.open("diff@main");
    let mut rng = Rng(seed);
    let b: BranchRef = "diff@main".parse().unwrap();
    let first = e.head_version("diff@main");
    e.scion
        .checkpoint(
            &b,
            &format!("v{first}").parse().unwrap(),
            Default::default(),
        )
        .unwrap();
    let mut committed = vec![(first, dump(&reference))];
    for step in 0..steps {
        let (stmts, commit) = transaction(&mut rng, step);
        let vacuum = rng.below(25) == 0;
        let script = {
            let mut all = vec!["BEGIN".to_string()];
            all.extend(stmts.iter().cloned());
            all.push(if commit { "COMMIT" } else { "ROLLBACK" }.to_string());
            if vacuum {
                all.push("VACUUM".to_string());
            }
            all
        };
        for s in &script {
            reference.execute_batch(s).unwrap();
        }
        match child.as_mut().filter(|_| step % 2 == 1) {
            Some(child) => child.run(&script),
            None => {
                for s in &script {
                    scion_conn.execute_batch(s).unwrap();
                }
            }
        }
        let want = dump(&reference);
        assert_eq!(
            dump(&scion_conn),
            want,
            "seed {seed}, page size {page_size}, step {step}"
        );
        assert_eq!(dump(&other), want, "a second connection, step {step}");
        let v = e.head_version("diff@main");
        if committed.last().map(|(last, _)| *last) != Some(v) {
            // Named, to read this version again at the end.
            e.scion
                .checkpoint(&b, &format!("v{v}").parse().unwrap(), Default::default())
                .unwrap();
            committed.push((v, want));
        }
    }
    // Every version committed is still there, whole: through the VFS (in a fresh process
    // too, when a second one wrote), and exported to a plain file SQLite reads without scion.
    drop(child);
    let mut fresh = matches!(writers, Writers::TwoProcesses).then(|| ChildWriter::spawn(&e));
    for (v, want) in &committed {
        if let Some(fresh) = fresh.as_mut() {
            assert_eq!(
                fresh.dump_hash(&format!("diff@main@v{v}")),
                fnv1a(want.as_bytes()),
                "version {v} read by a fresh process"
            );
        }
        let c = e.open(&format!("diff@main@v{v}"));
        assert_eq!(&dump(&c), want, "version {v} through the VFS");
        let out = e.path(&format!("v{v}.db"));
        e.scion
            .export(&format!("diff@main@v{v}").parse().unwrap(), &out, true)
            .unwrap();
        let plain = Connection::open(&out).unwrap();
        assert_eq!(&dump(&plain), want, "version {v} exported");
        let ok: String = plain
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok", "version {v}");
    }
    let report = e.scion.verify().unwrap();
    assert!(report.ok(), "{report:?}");
    committed.len()
}

/// Set in the second process of the two-process differential: the store's directory.
const DIFF_CHILD: &str = "SCION_VFS_DIFF_CHILD";

/// The second process: this test binary, running `differential_with_a_second_writer_process` as the
/// child, which runs each script it reads (statements separated by a unit separator, one
/// script a line) through its own VFS connection and answers `@@ok`; `@dump <target>` is
/// answered with the hash of that target's dump, read by that process.
struct ChildWriter {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl ChildWriter {
    fn spawn(e: &Env) -> ChildWriter {
        use std::process::{Command, Stdio};
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "differential_with_a_second_writer_process",
                "--nocapture",
                "-q",
            ])
            .env(DIFF_CHILD, e.store())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        ChildWriter {
            child,
            stdin,
            stdout,
        }
    }

    fn run(&mut self, script: &[String]) {
        let line = script.join("\u{1f}").replace('\n', " ");
        assert_eq!(self.ask(&line), "ok", "the second process");
    }

    /// The hash of `target`'s dump, as the second process reads it.
    fn dump_hash(&mut self, target: &str) -> u64 {
        let answer = self.ask(&format!("@dump {target}"));
        answer
            .parse()
            .unwrap_or_else(|_| panic!("the second process: {answer}"))
    }

    fn ask(&mut self, line: &str) -> String {
        use std::io::{BufRead, Write};
        writeln!(self.stdin, "{line}").unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the second process ended"
            );
            if let Some(answer) = line.split("@@").nth(1) {
                return answer.trim().to_string();
            }
        }
    }
}

impl Drop for ChildWriter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child's side: scripts from stdin, answers on stdout (written directly, not through
/// the test harness's captured output).
fn serve_scripts(store: &str) {
    use std::io::{BufRead, Write};
    scion_vfs::register().unwrap();
    let uri = scion_vfs::uri("diff@main", store, false);
    let c = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    let mut out = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        if let Some(target) = line.strip_prefix("@dump ") {
            let v = Connection::open_with_flags(
                scion_vfs::uri(target, store, true),
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
            )
            .unwrap();
            writeln!(out, "@@{}", fnv1a(dump(&v).as_bytes())).unwrap();
            out.flush().unwrap();
            continue;
        }
        let mut answer = "ok".to_string();
        for s in line.split('\u{1f}') {
            if let Err(e) = c.execute_batch(s) {
                answer = format!("{s}: {e}");
                break;
            }
        }
        writeln!(out, "@@{answer}").unwrap();
        out.flush().unwrap();
    }
}

/// Two processes write the branch in turn through the VFS while this one checks every
/// state against plain SQLite: each sees the other's commits at its next transaction.
#[test]
fn differential_with_a_second_writer_process() {
    if let Ok(store) = std::env::var(DIFF_CHILD) {
        serve_scripts(&store);
        return;
    }
    let versions = differential(0x5c10_2000, 4096, 40, Writers::TwoProcesses);
    eprintln!("differential, two processes: {versions} committed versions agreed");
    assert!(versions > 20, "{versions}");
}

/// A transaction whose pages pass the memory bound sets them aside in a temporary file:
/// the same workload, with a bound of 8 KiB, agrees with plain SQLite all the same.
#[test]
fn differential_with_dirty_pages_spilled() {
    let versions = differential(
        0x5c10_3000,
        1024,
        40,
        Writers::OneProcess { spill_kib: Some(8) },
    );
    assert!(versions > 20, "{versions}");
}

#[test]
fn differential_random_workloads_across_page_sizes() {
    let mut transactions = 0;
    for (i, page_size) in [512u32, 1024, 4096, 8192, 65536].into_iter().enumerate() {
        transactions += differential(
            0x5c10_0000 + i as u64,
            page_size,
            40,
            Writers::OneProcess { spill_kib: None },
        );
    }
    // Printed for the record: how much the differential test exercised.
    eprintln!("differential: {transactions} committed versions agreed across 5 page sizes");
    assert!(transactions > 100, "{transactions}");
}
