//! A reader that stops early (`grep -q`, `head`) ends scion's output, never the command:
//! its exit status says whether the command did its work, whatever the scheduler did.

mod common;

use std::process::{Command, Stdio};

use common::*;

/// The sequence a harness ran before its listing: a history with forks, merges and an undo,
/// then a branch destroyed, restored and a gc; and branches named after it, so that the
/// listing goes on after the line `grep -q` stops at.
fn restored_after_gc() -> Session {
    let s = Session::new();
    for args in [
        &["init"][..],
        &["create", "shop"],
        &[
            "sql",
            "shop",
            "create table t(id integer primary key, v text); insert into t values (1,'old')",
        ],
        &["fork", "shop", "a"],
        &["sql", "shop@a", "update t set v='a' where id=1"],
        &["merge", "shop@a", "--into", "main", "--force"],
        &["fork", "shop", "b"],
        &["sql", "shop@b", "insert into t values (2,'b')"],
        &["merge", "shop@b", "--into", "main", "--force"],
        &["undo", "shop@main", "--force"],
        &["fork", "shop", "side"],
        &["destroy", "shop@side", "--force"],
        &["restore", "shop@side"],
        &["gc"],
    ] {
        s.ok(args);
    }
    for later in ["t1", "t2", "t3", "t4", "t5"] {
        s.ok(&["fork", "shop", later]);
    }
    s
}

#[test]
fn a_restored_branch_listed_after_gc_is_found_by_grep_q_500_times_in_500() {
    let s = restored_after_gc();
    let script = r#"
        set -o pipefail
        missed=0
        for i in $(seq 500); do
            scion branches shop | grep -qw side || missed=$((missed + 1))
        done
        echo "$missed"
    "#;
    let path = format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap()
    );
    let out = outcome(
        Command::new("bash")
            .args(["-c", script])
            .current_dir(s.dir.path())
            .env("HOME", s.dir.path())
            .env_remove("SCION_STORE")
            .env("PATH", path),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "0", "listings that missed side, of 500");
    assert!(out.stderr.is_empty(), "{}", out.stderr);
}

/// Run `args` with standard output a pipe nobody reads any more: its first write fails.
fn with_reader_gone(s: &Session, args: &[&str]) -> Run {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = s
        .cmd(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::new(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

#[test]
fn commands_whose_reader_is_gone_do_their_work_and_exit_0() {
    let s = restored_after_gc();
    for args in [
        &["branches", "shop"][..],
        &["--json", "branches", "shop"],
        &["log", "shop@side"],
        &["diff", "shop@main", "shop@a"],
        &["completions", "bash"],
        &["fork", "shop", "while-nobody-reads"],
        &["sql", "shop@b", "insert into t values (3, 'unread')"],
    ] {
        let r = with_reader_gone(&s, args);
        assert_eq!(r.code, 0, "scion {args:?}: {}", r.stderr);
        // Notes on stderr stay; no panic, no error.
        assert!(
            !r.stderr.contains("panicked") && !r.stderr.contains("error"),
            "scion {args:?}: {}",
            r.stderr
        );
    }
    // The changes made while nobody read landed.
    assert!(s.ok(&["branches", "shop"]).contains("while-nobody-reads"));
    assert_eq!(
        s.ok(&["sql", "shop@b", "select v from t where id = 3"])
            .trim(),
        "unread"
    );
}

#[test]
fn output_that_cannot_be_written_fails_the_command_after_its_work() {
    let s = restored_after_gc();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = s
        .cmd(&["fork", "shop", "to-a-full-disk"])
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("writing the output"), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    // The fork itself was made: only its report was lost.
    assert!(s.ok(&["branches", "shop"]).contains("to-a-full-disk"));
}
