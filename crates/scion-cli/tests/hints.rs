//! Every hint that names a command works in the state that printed it: each refusal below
//! is made to happen, the `scion ...` commands in its hint are taken out, their
//! placeholders filled (`<name>`, `<new>`, `<entry>`, `<db>`), and each is run, on a fresh
//! copy of the state, to success. Bare verbs ("repeat `scion rollback` with --force") and
//! commands that run until stopped (`scion serve`) are not runs of their own.

mod common;

use std::path::Path;

use common::*;

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
    state: fn() -> Session,
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
                s
            },
            command: &["rollback", "shop@try", "--to", "fork"],
            code: "dirty_checkout",
        },
        Case {
            what: "destroy of a dirty checkout",
            state: || {
                let s = base();
                dirty(&s);
                s
            },
            command: &["destroy", "shop@try"],
            code: "dirty_checkout",
        },
        Case {
            what: "a missing branch",
            state: base,
            command: &["checkout", "shop@ghost"],
            code: "branch_not_found",
        },
        Case {
            what: "a missing checkpoint",
            state: base,
            command: &["rollback", "shop@try", "--to", "nosuch"],
            code: "checkpoint_not_found",
        },
        Case {
            what: "a missing database",
            state: base,
            command: &["branches", "nosuch"],
            code: "database_not_found",
        },
        Case {
            what: "a writable checkout of a checkpoint",
            state: base,
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
                s
            },
            command: &["rollback", "shop@try", "--to", "fork"],
            code: "lease_held",
        },
        Case {
            what: "nothing left to undo",
            state: || {
                let s = base();
                s.ok(&["undo", "shop@try"]);
                s
            },
            command: &["undo", "shop@try"],
            code: "nothing_to_undo",
        },
        Case {
            what: "a history entry that is not there",
            state: base,
            command: &["restore", "shop@try", "--to", "99"],
            code: "history_entry_not_found",
        },
        Case {
            what: "a store that does not exist",
            state: || {
                let s = Session::new();
                std::fs::create_dir_all(s.path("empty")).unwrap();
                s
            },
            command: &["status"],
            code: "not_initialized",
        },
    ]
}

#[test]
fn every_hint_that_names_a_command_works_in_the_state_that_printed_it() {
    let mut ran = 0;
    for case in cases() {
        let s = (case.state)();
        let mut args = vec!["--json"];
        args.extend_from_slice(case.command);
        let r = s.run(&args);
        assert_ne!(r.code, 0, "{}: {:?} succeeded", case.what, case.command);
        let v: serde_json::Value = serde_json::from_str(r.stderr.trim())
            .unwrap_or_else(|e| panic!("{}: {e}: {}", case.what, r.stderr));
        assert_eq!(v["error"]["code"], case.code, "{}: {}", case.what, r.stderr);
        let hint = v["error"]["hint"].as_str().unwrap_or_default().to_string();
        let commands = commands_in(&hint);
        assert!(
            !commands.is_empty(),
            "{}: no command in the hint {hint:?}",
            case.what
        );
        for c in commands {
            // Each on a fresh copy of the state that printed the hint.
            let s = (case.state)();
            let args: Vec<&str> = c.iter().map(String::as_str).collect();
            let out = s.run(&args);
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
