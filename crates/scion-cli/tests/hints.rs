//! Every hint that names a command works in the state that printed it: each refusal below
//! is made to happen, the commands in its hint (`scion ...`, `sqlite3 ...`) are taken out,
//! their placeholders filled (`<name>`, `<new>`, `<entry>`, `<db>`), and each is run as a
//! user would paste it, through `sh -c`, on a fresh copy of the state. A command must
//! succeed, or give the answer its case expects (`scion verify` on a damaged store reports
//! the damage and exits 7); where the hint says to retry, the refused command is run again
//! and must now succeed. Bare verbs ("repeat `scion rollback` with --force") are not runs
//! of their own; `scion serve`, which runs until stopped, is started in the background
//! unless the state already has a daemon.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A state to refuse in: a store, and a daemon serving it when the case needs one.
struct State {
    s: Session,
    daemon: Option<Child>,
}

impl Drop for State {
    fn drop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

impl From<Session> for State {
    fn from(s: Session) -> State {
        State { s, daemon: None }
    }
}

/// `base()` with `scion serve` running and a session open on `shop@try`.
fn with_session() -> State {
    let s = base();
    let daemon = s
        .cmd(&["serve"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while s.run(&["session", "list"]).code != 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the daemon never answered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    s.ok(&["session", "open", "shop@try"]);
    State {
        s,
        daemon: Some(daemon),
    }
}

/// A store with `shop` (main protected, one checkpoint `v1`) and a fork `try` whose
/// history holds one commit.
fn base() -> Session {
    let s = Session::new();
    seed(&s.path("shop.db"), 20);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["checkpoint", "shop", "v1"]);
    s.ok(&["fork", "shop", "try"]);
    let p = s.ok(&["checkout", "shop@try"]);
    sqlite(
        Path::new(p.trim()),
        "UPDATE items SET price = 9 WHERE id = 1",
    );
    s.ok(&["checkpoint", "shop@try", "nine"]);
    s
}

fn dirty(s: &Session) {
    let p = s.ok(&["checkout", "shop@try"]);
    sqlite(Path::new(p.trim()), "DELETE FROM items WHERE id = 2");
}

/// The commands a hint names, placeholders filled, bare verbs left out.
fn commands_in(hint: &str) -> Vec<String> {
    hint.split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| c.starts_with("scion ") || c.starts_with("sqlite3 "))
        .filter(|c| {
            let words: Vec<&str> = c.split_whitespace().collect();
            words.len() > 2
                || ["status", "init", "gc", "verify", "serve"].contains(&words[1])
                || words[0] == "sqlite3"
        })
        .map(|c| {
            c.replace("<name>", "kept")
                .replace("<new>", "fresh")
                .replace("<entry>", "1")
                .replace("<db>", "keptdb")
        })
        .collect()
}

/// What a hint's command must give.
#[derive(Clone, Copy)]
enum Expect {
    /// Exit 0.
    Success,
    /// A report of the damage the refusal was about: this exit code, and stdout that
    /// contains this text.
    Reports(i32, &'static str),
}

struct Case {
    what: &'static str,
    state: fn() -> State,
    command: &'static [&'static str],
    code: &'static str,
    expect: Expect,
    /// The hint says to retry: after its commands, the refused command succeeds.
    retry: bool,
    /// The hint's commands are the steps of one way out ("keep ... and release ..."): run
    /// in order on one copy of the state, not each on its own.
    steps: bool,
}

impl Default for Case {
    fn default() -> Case {
        Case {
            what: "",
            state: || base().into(),
            command: &[],
            code: "",
            expect: Expect::Success,
            retry: false,
            steps: false,
        }
    }
}

/// `base()` with every segment object gone from the store.
fn damaged() -> State {
    let s = base();
    for e in std::fs::read_dir(s.path(".scion/segments")).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    s.into()
}

/// `base()` where a destroy of `shop@try` claimed the branch and was cut off there.
fn interrupted_destroy() -> State {
    let s = base();
    let path = s.path(".scion/refs/shop/try");
    let mut r: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    r["destroying_since"] = r["touched_at"].clone();
    std::fs::write(&path, serde_json::to_vec(&r).unwrap()).unwrap();
    s.into()
}

/// A store and `crashed.db`, a database whose writer died mid-transaction: its hot
/// journal is beside it.
fn hot_journal() -> State {
    let s = Session::new();
    seed(&s.path("crashed.db"), 3000);
    s.ok(&["init"]);
    let c = rusqlite::Connection::open(s.path("crashed.db")).unwrap();
    // A cache so small that changed pages reach the file before the commit.
    c.execute_batch(
        "PRAGMA journal_mode=DELETE; PRAGMA cache_size=2; PRAGMA locking_mode=EXCLUSIVE;
         BEGIN EXCLUSIVE; UPDATE items SET name = name || 'changed';",
    )
    .unwrap();
    let (db, journal) = (s.path("crashed.db"), s.path("crashed.db-journal"));
    let (db_bytes, journal_bytes) = (
        std::fs::read(&db).unwrap(),
        std::fs::read(&journal).unwrap(),
    );
    c.execute_batch("ROLLBACK").unwrap();
    drop(c);
    std::fs::write(&db, db_bytes).unwrap();
    std::fs::write(&journal, journal_bytes).unwrap();
    s.into()
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            what: "rollback of a dirty checkout",
            state: || {
                let s = base();
                dirty(&s);
                s.into()
            },
            command: &["rollback", "shop@try", "--to", "fork"],
            code: "dirty_checkout",
            ..Case::default()
        },
        Case {
            what: "destroy of a dirty checkout",
            state: || {
                let s = base();
                dirty(&s);
                s.into()
            },
            command: &["destroy", "shop@try"],
            code: "dirty_checkout",
            ..Case::default()
        },
        Case {
            what: "a missing branch",
            state: || base().into(),
            command: &["checkout", "shop@ghost"],
            code: "branch_not_found",
            ..Case::default()
        },
        Case {
            what: "a missing checkpoint",
            state: || base().into(),
            command: &["rollback", "shop@try", "--to", "nosuch"],
            code: "checkpoint_not_found",
            ..Case::default()
        },
        Case {
            what: "a missing database",
            state: || base().into(),
            command: &["branches", "nosuch"],
            code: "database_not_found",
            ..Case::default()
        },
        Case {
            what: "a writable checkout of a checkpoint",
            state: || base().into(),
            command: &["checkout", "shop@main@v1"],
            code: "checkpoint_target",
            ..Case::default()
        },
        Case {
            what: "another holder's lease",
            state: || {
                let s = base();
                s.ok(&[
                    "--holder", "agent-7", "lease", "acquire", "shop@try", "--ttl", "1h",
                ]);
                s.into()
            },
            command: &["rollback", "shop@try", "--to", "fork"],
            code: "lease_held",
            ..Case::default()
        },
        Case {
            what: "nothing left to undo",
            state: || {
                let s = base();
                s.ok(&["undo", "shop@try"]);
                s.into()
            },
            command: &["undo", "shop@try"],
            code: "nothing_to_undo",
            ..Case::default()
        },
        Case {
            what: "a history entry that is not there",
            state: || base().into(),
            command: &["restore", "shop@try", "--to", "99"],
            code: "history_entry_not_found",
            ..Case::default()
        },
        Case {
            what: "a store that does not exist",
            state: || {
                let s = Session::new();
                std::fs::create_dir_all(s.path("empty")).unwrap();
                s.into()
            },
            command: &["status"],
            code: "not_initialized",
            ..Case::default()
        },
        Case {
            what: "a checkout scion has no record of",
            state: || {
                let s = base();
                let p = s.ok(&["path", "shop@try"]);
                std::fs::remove_file(format!("{}.scion", p.trim())).unwrap();
                s.into()
            },
            command: &["checkpoint", "shop@try", "x"],
            code: "unknown_checkout",
            ..Case::default()
        },
        Case {
            what: "release of a checkout holding changes",
            state: || {
                let s = base();
                dirty(&s);
                s.into()
            },
            command: &["checkout", "shop@try", "--release"],
            code: "dirty_checkout",
            ..Case::default()
        },
        Case {
            what: "a VFS write onto a branch whose checkout holds changes",
            state: || {
                let s = base();
                dirty(&s);
                s.into()
            },
            command: &["sql", "shop@try", "DELETE FROM items"],
            code: "checked_out",
            retry: true,
            steps: true,
            ..Case::default()
        },
        Case {
            what: "a branch a daemon session captures",
            state: with_session,
            command: &["checkpoint", "shop@try", "x"],
            code: "lease_held",
            ..Case::default()
        },
        Case {
            what: "a branch an interrupted destroy claimed",
            state: interrupted_destroy,
            command: &["checkout", "shop@try"],
            code: "being_destroyed",
            ..Case::default()
        },
        Case {
            what: "a version whose data is gone from the store",
            state: damaged,
            command: &["export", "shop@try", "out.db"],
            code: "corrupt",
            expect: Expect::Reports(7, "problem: refs/shop/try (head)"),
            ..Case::default()
        },
        Case {
            what: "a store that fails verification",
            state: damaged,
            command: &["verify"],
            code: "verify_failed",
            expect: Expect::Reports(7, "\"problems\": ["),
            ..Case::default()
        },
        Case {
            what: "a VFS write to a branch whose checkout is clean",
            command: &["sql", "shop@try", "DELETE FROM items WHERE id = 2"],
            code: "checked_out",
            retry: true,
            steps: true,
            ..Case::default()
        },
        Case {
            what: "a source with a hot journal",
            state: hot_journal,
            command: &["create", "crashed", "--from", "crashed.db"],
            code: "hot_journal",
            retry: true,
            ..Case::default()
        },
        Case {
            what: "a daemon that is not running",
            state: || base().into(),
            command: &["session", "list"],
            code: "daemon_unreachable",
            retry: true,
            ..Case::default()
        },
    ]
}

/// The refusal `case` gives in `state`, and the hint it carries.
fn refusal(case: &Case, state: &State) -> String {
    let mut args = vec!["--json"];
    args.extend_from_slice(case.command);
    let r = state.s.run(&args);
    assert_ne!(r.code, 0, "{}: {:?} succeeded", case.what, case.command);
    let v: serde_json::Value = serde_json::from_str(r.stderr.trim())
        .unwrap_or_else(|e| panic!("{}: {e}: {}", case.what, r.stderr));
    assert_eq!(v["error"]["code"], case.code, "{}: {}", case.what, r.stderr);
    v["error"]["hint"].as_str().unwrap_or_default().to_string()
}

/// Run one command of a hint the way a user pastes it into a shell, `scion` on `PATH`.
fn run_hint_command(state: &mut State, command: &str) -> Run {
    let path = format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The daemon replaces the shell (`exec`), so that killing the child stops the daemon
    // rather than leaving it running on its own.
    let script = if command == "scion serve" {
        format!("exec {command}")
    } else {
        command.to_string()
    };
    let mut c = std::process::Command::new("sh");
    c.args(["-c", &script])
        .current_dir(state.s.dir.path())
        .env("HOME", state.s.dir.path())
        .env("PATH", path)
        .env_remove("SCION_STORE")
        .env_remove("SCION_CLONE")
        .env("SCION_LOG", "warn");
    if command == "scion serve" {
        if state.daemon.is_none() {
            let child = c
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            state.daemon = Some(child);
        }
        return Run {
            code: 0,
            stdout: String::new(),
            stderr: String::new(),
        };
    }
    outcome(&mut c)
}

/// The refused command, run again after its hint was followed: it succeeds (a daemon
/// just started is given time to answer).
fn retried(case: &Case, state: &State) -> Run {
    let started = Instant::now();
    loop {
        let r = state.s.run(case.command);
        if r.code == 0 || started.elapsed() > Duration::from_secs(30) {
            return r;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn every_hint_that_names_a_command_works_in_the_state_that_printed_it() {
    let mut ran = 0;
    for case in cases() {
        let hint = refusal(&case, &(case.state)());
        let count = commands_in(&hint).len();
        assert!(count > 0, "{}: no command in the hint {hint:?}", case.what);
        let mut shared = None;
        for i in 0..count {
            // Each on a fresh copy of the state, refused again there (the hint may name
            // what is particular to it, such as a session's id), unless they are steps.
            let mut fresh = None;
            let state = if case.steps {
                shared.get_or_insert_with(|| (case.state)())
            } else {
                fresh.insert((case.state)())
            };
            let hint = refusal(&case, state);
            let command = commands_in(&hint).swap_remove(i);
            let out = run_hint_command(state, &command);
            let fails = |why: &str| {
                format!(
                    "{}: the hint {hint:?} names `{command}`, which {why}: exit {}\n{}{}",
                    case.what, out.code, out.stdout, out.stderr
                )
            };
            match case.expect {
                Expect::Success => assert_eq!(out.code, 0, "{}", fails("fails")),
                Expect::Reports(code, text) => assert!(
                    out.code == code && out.stdout.contains(text),
                    "{}",
                    fails(&format!("does not report {text:?} with exit {code}"))
                ),
            }
            if case.retry && (!case.steps || i + 1 == count) {
                let again = retried(&case, state);
                assert_eq!(
                    again.code, 0,
                    "{}: after `{command}` from the hint {hint:?}, {:?} still fails: {}",
                    case.what, case.command, again.stderr
                );
            }
            ran += 1;
        }
    }
    eprintln!(
        "hints: {ran} commands run from the hints of {} refusals",
        cases().len()
    );
}
