//! Every hint that names a command works in the state that printed it: each refusal below
//! is made to happen, the `scion ...` commands in its hint are taken out, their
//! placeholders filled (`<name>`, `<new>`, `<entry>`, `<db>`), and each is run, on a fresh
//! copy of the state, to success. Bare verbs ("repeat `scion rollback` with --force") and
//! commands that run until stopped (`scion serve`) are not runs of their own.

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

/// The `scion ...` commands a hint names, placeholders filled, bare verbs left out.
fn commands_in(hint: &str) -> Vec<Vec<String>> {
    hint.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|c| c.strip_prefix("scion "))
        .map(|c| {
            c.split_whitespace()
                .map(|w| match w {
                    "<name>" => "kept".to_string(),
                    "<new>" => "fresh".to_string(),
                    "<entry>" => "1".to_string(),
                    "<db>" => "keptdb".to_string(),
                    w => w.to_string(),
                })
                .collect::<Vec<_>>()
        })
        .filter(|c| c.len() > 1 || ["status", "init", "gc", "verify"].contains(&c[0].as_str()))
        .filter(|c| c[0] != "serve")
        .collect()
}

struct Case {
    what: &'static str,
    state: fn() -> State,
    command: &'static [&'static str],
    code: &'static str,
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
        },
        Case {
            what: "a missing branch",
            state: || base().into(),
            command: &["checkout", "shop@ghost"],
            code: "branch_not_found",
        },
        Case {
            what: "a missing checkpoint",
            state: || base().into(),
            command: &["rollback", "shop@try", "--to", "nosuch"],
            code: "checkpoint_not_found",
        },
        Case {
            what: "a missing database",
            state: || base().into(),
            command: &["branches", "nosuch"],
            code: "database_not_found",
        },
        Case {
            what: "a writable checkout of a checkpoint",
            state: || base().into(),
            command: &["checkout", "shop@main@v1"],
            code: "checkpoint_target",
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
        },
        Case {
            what: "a history entry that is not there",
            state: || base().into(),
            command: &["restore", "shop@try", "--to", "99"],
            code: "history_entry_not_found",
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
        },
        Case {
            what: "a VFS write onto a branch whose checkout holds changes",
            state: || {
                let s = base();
                dirty(&s);
                s.into()
            },
            command: &["sql", "shop@try", "DELETE FROM items"],
            code: "dirty_checkout",
        },
        Case {
            what: "a branch a daemon session captures",
            state: with_session,
            command: &["checkpoint", "shop@try", "x"],
            code: "lease_held",
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

#[test]
fn every_hint_that_names_a_command_works_in_the_state_that_printed_it() {
    let mut ran = 0;
    for case in cases() {
        let hint = refusal(&case, &(case.state)());
        let count = commands_in(&hint).len();
        assert!(count > 0, "{}: no command in the hint {hint:?}", case.what);
        for i in 0..count {
            // Each on a fresh copy of the state, refused again there (the hint may name
            // what is particular to it, such as a session's id).
            let state = (case.state)();
            let hint = refusal(&case, &state);
            let c = commands_in(&hint).swap_remove(i);
            let args: Vec<&str> = c.iter().map(String::as_str).collect();
            let out = state.s.run(&args);
            assert_eq!(
                out.code,
                0,
                "{}: the hint {hint:?} names `scion {}`, which fails: {}{}",
                case.what,
                c.join(" "),
                out.stdout,
                out.stderr
            );
            ran += 1;
        }
    }
    eprintln!(
        "hints: {ran} commands run from the hints of {} refusals",
        cases().len()
    );
}
