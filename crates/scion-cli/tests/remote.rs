//! `scion remote`, `push`, `pull` and `clone` as people run them: real processes on real
//! store directories, SIGKILL at random moments of pushes and pulls, two hosts racing to
//! push one branch.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// The head root a store's ref names, read from the ref file itself.
fn head(store: &Path, db: &str, branch: &str) -> String {
    let text = std::fs::read_to_string(store.join("refs").join(db).join(branch)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["root"].as_str().unwrap().to_string()
}

fn segments(store: &Path) -> usize {
    std::fs::read_dir(store.join("segments"))
        .map(|d| d.count())
        .unwrap_or(0)
}

const LAPTOP: &str = "laptop/.scion";
const FLEET: &str = "fleet/.scion";

/// `args` for the store at `store`.
fn on<'a>(store: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--store", store];
    all.extend_from_slice(args);
    all
}

/// Two stores: `laptop/.scion` with shop, and `bucket`, the laptop's remote `origin`.
fn laptop_and_bucket(s: &Session, rows: usize) {
    seed(&s.path("shop.db"), rows);
    std::fs::create_dir(s.path("laptop")).unwrap();
    s.ok(&["--store", "laptop/.scion", "init"]);
    s.ok(&[
        "--store",
        "laptop/.scion",
        "create",
        "shop",
        "--from",
        "shop.db",
    ]);
    s.ok(&["--store", "bucket", "init"]);
    s.ok(&[
        "--store",
        "laptop/.scion",
        "remote",
        "add",
        "origin",
        "bucket",
    ]);
}

#[test]
fn push_pull_and_clone_from_the_command_line() {
    let s = Session::new();
    laptop_and_bucket(&s, 2000);

    let listed = s.json(&on(LAPTOP, &["remote", "list"]));
    assert_eq!(listed[0]["remote"], "origin");
    assert!(listed[0]["location"].as_str().unwrap().ends_with("/bucket"));
    let dup = s.run(&on(LAPTOP, &["remote", "add", "origin", "elsewhere"]));
    assert_ne!(dup.code, 0);
    assert!(dup.stderr.contains("already exists"), "{}", dup.stderr);

    let first = s.json(&on(LAPTOP, &["push", "origin", "shop"]));
    assert_eq!(first["outcome"], "created");
    assert!(first["transfer"]["objects_sent"].as_u64().unwrap() >= 1);
    s.ok(&on(
        LAPTOP,
        &["sql", "shop", "UPDATE items SET price = 1 WHERE id = 5"],
    ));
    let text = s.ok(&on(LAPTOP, &["push", "origin", "shop"]));
    assert!(
        text.contains("fast-forwarded shop@main from version 1 to 2"),
        "{text}"
    );
    assert!(text.contains("sent 1 segment"), "{text}");

    // A second store, cloned; a fork there, pushed; pulled back and merged.
    let cloned = s.json(&["clone", "bucket", "fleet"]);
    assert_eq!(cloned["branches"][0]["branch"], "shop@main");
    assert!(s.path("fleet/.scion/scion.json").exists());
    let branches = s.ok(&on(FLEET, &["branches", "shop"]));
    assert!(branches.contains("origin~main"), "{branches}");
    s.ok(&on(FLEET, &["fork", "shop", "try"]));
    s.ok(&on(
        FLEET,
        &[
            "sql",
            "shop@try",
            "UPDATE items SET name = 'fleet' WHERE id = 9",
        ],
    ));
    s.ok(&on(FLEET, &["push", "origin", "shop@try"]));
    s.ok(&on(
        LAPTOP,
        &[
            "sql",
            "shop",
            "INSERT INTO items(name, price) VALUES ('laptop', 2)",
        ],
    ));

    let refused = s.run(&on(
        LAPTOP,
        &["pull", "origin", "shop@try", "--into", "main"],
    ));
    assert_eq!(refused.code, 6, "{}{}", refused.stdout, refused.stderr);
    assert!(refused.stderr.contains("--force"), "{}", refused.stderr);
    let merged = s.json(&on(
        LAPTOP,
        &["pull", "origin", "shop@try", "--into", "main", "--force"],
    ));
    assert_eq!(merged["outcome"], "merged");
    assert_eq!(merged["tracking"], "shop@origin~try");
    // The base is the version the fleet forked: the laptop's second version.
    assert!(
        merged["merge"]["base"]["how"]
            .as_str()
            .unwrap()
            .contains("newest version both come from"),
        "{merged}"
    );
    let rows = s.ok(&on(
        LAPTOP,
        &[
            "sql",
            "shop",
            "SELECT name FROM items WHERE id = 9 OR name = 'laptop' ORDER BY id",
        ],
    ));
    assert!(rows.contains("fleet") && rows.contains("laptop"), "{rows}");
    let back = s.json(&on(LAPTOP, &["push", "origin", "shop"]));
    assert_eq!(back["outcome"], "fast_forward");

    // The fleet is now behind: its push of main is refused, nothing changes there.
    s.ok(&on(
        FLEET,
        &[
            "sql",
            "shop",
            "INSERT INTO items(name, price) VALUES ('fleet main', 3)",
        ],
    ));
    let before = head(&s.path("bucket"), "shop", "main");
    let behind = s.run(&on(FLEET, &["push", "origin", "shop"]));
    assert_eq!(behind.code, 5, "{}{}", behind.stdout, behind.stderr);
    assert!(
        behind.stderr.contains("pull and merge first"),
        "{}",
        behind.stderr
    );
    assert_eq!(head(&s.path("bucket"), "shop", "main"), before);

    // Tracking branches are read-only and show in the graph.
    let write = s.run(&on(
        LAPTOP,
        &["sql", "shop@origin~main", "DELETE FROM items"],
    ));
    assert_ne!(write.code, 0);
    assert!(write.stderr.contains("remote-tracking"), "{}", write.stderr);
    let graph = s.ok(&on(LAPTOP, &["log", "--graph", "shop"]));
    assert!(graph.contains("origin~try"), "{graph}");

    for store in ["laptop/.scion", "fleet/.scion", "bucket"] {
        s.ok(&["--store", store, "verify"]);
    }
    let help = s.ok(&["push", "--help"]);
    assert!(
        help.contains("--force-with-lease") && help.contains("Examples"),
        "{help}"
    );
    let removed = s.ok(&on(LAPTOP, &["remote", "remove", "origin"]));
    assert!(removed.contains("removed remote origin"), "{removed}");
    let gone = s.run(&on(LAPTOP, &["push", "origin", "shop"]));
    assert_eq!(gone.code, 3, "{}", gone.stderr);
}

/// SIGKILL `args` at a random moment within `span`; whether it finished.
fn run_killed(s: &Session, args: &[&str], rng: &mut Rng, span: Duration) -> bool {
    let mut child = s
        .cmd(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_micros(rng.next() % span.as_micros() as u64));
    let _ = child.kill();
    child.wait().unwrap().success()
}

#[test]
fn kill_9_during_push_and_pull_leaves_each_side_wholly_old_or_new() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill -9 push/pull seed {seed}");
    let mut rng = Rng(seed);
    let s = Session::new();
    laptop_and_bucket(&s, 3000);
    let bucket_dir = s.path("bucket");
    let laptop_dir = s.path("laptop/.scion");
    let started = Instant::now();
    s.ok(&on(LAPTOP, &["push", "origin", "shop"]));
    // Kills spread over twice a whole run, so some land after it ended.
    let span = (started.elapsed() * 2).max(Duration::from_millis(40));
    let (mut push_killed, mut pull_killed, mut rounds) = (0, 0, 0);

    for round in 0..60 {
        for c in 0..1 + rng.next() % 3 {
            s.ok(&on(LAPTOP, &["sql", "shop", &format!("UPDATE items SET price = price + 1 WHERE id % 7 = {}; INSERT INTO items(name, price) VALUES ('p{round}-{c}', {round})", (round + c) % 7)]));
        }
        let old = head(&bucket_dir, "shop", "main");
        let new = head(&laptop_dir, "shop", "main");
        let before = segments(&bucket_dir);
        if !run_killed(&s, &on(LAPTOP, &["push", "origin", "shop"]), &mut rng, span) {
            push_killed += 1;
        }
        let now = head(&bucket_dir, "shop", "main");
        assert!(
            now == old || now == new,
            "round {round}: the remote's head is neither"
        );
        let left = segments(&bucket_dir) - before;
        let again = s.json(&on(LAPTOP, &["push", "origin", "shop"]));
        if now == new {
            assert_eq!(again["outcome"], "up_to_date", "round {round}: {again}");
        } else {
            // What the killed run left is found, not sent again (a version whose root
            // arrived ends the walk down the graph there); only the rest is sent.
            let t = &again["transfer"];
            assert_eq!(
                t["objects_sent"].as_u64().unwrap() as usize,
                segments(&bucket_dir) - before - left,
                "round {round}: {again}"
            );
        }
        assert_eq!(head(&bucket_dir, "shop", "main"), new);
        rounds += 1;
        if round % 15 == 14 {
            s.ok(&["--store", "bucket", "verify"]);
        }
    }

    // A whole pull (a fetch and a fast-forward) sets the span its kills spread over.
    s.ok(&[
        "--store",
        "bucket",
        "sql",
        "shop",
        "UPDATE items SET price = 0 WHERE id = 1",
    ]);
    let started = Instant::now();
    s.ok(&on(LAPTOP, &["pull", "origin", "shop", "--force"]));
    let pull_span = (started.elapsed() * 2).max(Duration::from_millis(40));
    for round in 0..60 {
        for c in 0..1 + rng.next() % 3 {
            s.ok(&["--store", "bucket", "sql", "shop", &format!("UPDATE items SET price = price * 2 WHERE id % 5 = {}; INSERT INTO items(name, price) VALUES ('q{round}-{c}', {round})", (round + c) % 5)]);
        }
        let old = head(&laptop_dir, "shop", "main");
        let new = head(&bucket_dir, "shop", "main");
        let before = segments(&laptop_dir);
        if !run_killed(
            &s,
            &on(LAPTOP, &["pull", "origin", "shop", "--force"]),
            &mut rng,
            pull_span,
        ) {
            pull_killed += 1;
        }
        let now = head(&laptop_dir, "shop", "main");
        assert!(
            now == old || now == new,
            "round {round}: the local head is neither"
        );
        let tracking = head(&laptop_dir, "shop", "origin~main");
        assert!(
            tracking == old || tracking == new,
            "round {round}: tracking is neither"
        );
        let left = segments(&laptop_dir) - before;
        let again = s.json(&on(LAPTOP, &["pull", "origin", "shop", "--force"]));
        let t = &again["transfer"];
        if tracking == new {
            assert_eq!(t["objects_sent"], 0, "round {round}: {again}");
        } else {
            assert_eq!(
                t["objects_sent"].as_u64().unwrap() as usize,
                segments(&laptop_dir) - before - left,
                "round {round}: {again}"
            );
        }
        assert_eq!(head(&laptop_dir, "shop", "main"), new);
        rounds += 1;
        if round % 15 == 14 {
            s.ok(&on(LAPTOP, &["verify"]));
        }
    }
    // A follower killed at random while commits land; started again each round.
    let mut heads = std::collections::BTreeSet::from([head(&laptop_dir, "shop", "main")]);
    let mut follow_killed = 0;
    for round in 0..24 {
        let mut follower = s
            .cmd(&on(
                LAPTOP,
                &["push", "origin", "shop", "--follow", "--interval", "20ms"],
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        for c in 0..1 + rng.next() % 3 {
            s.ok(&on(
                LAPTOP,
                &[
                    "sql",
                    "shop",
                    &format!("INSERT INTO items(name, price) VALUES ('f{round}-{c}', {c})"),
                ],
            ));
            heads.insert(head(&laptop_dir, "shop", "main"));
            std::thread::sleep(Duration::from_micros(rng.next() % 30_000));
        }
        std::thread::sleep(Duration::from_micros(rng.next() % span.as_micros() as u64));
        let _ = follower.kill();
        follower.wait().unwrap();
        follow_killed += 1;
        let now = head(&bucket_dir, "shop", "main");
        assert!(
            heads.contains(&now),
            "round {round}: the remote's head is no version of the branch"
        );
        rounds += 1;
    }
    let caught_up = s.ok(&on(
        LAPTOP,
        &["push", "origin", "shop", "--follow", "--for", "300ms"],
    ));
    assert!(caught_up.contains("lag per version"), "{caught_up}");
    assert_eq!(
        head(&bucket_dir, "shop", "main"),
        head(&laptop_dir, "shop", "main")
    );
    eprintln!(
        "{rounds} rounds: {push_killed} pushes, {pull_killed} pulls and {follow_killed} followers killed before they finished"
    );
    assert!(
        push_killed > 5 && pull_killed > 5,
        "kills must land inside runs"
    );
    s.ok(&["--store", "bucket", "verify"]);
    s.ok(&on(LAPTOP, &["verify"]));
    let dump = |store: &str| {
        let out = s.path(&format!("{}.db", store.replace('/', "_")));
        s.ok(&["--store", store, "export", "shop", out.to_str().unwrap()]);
        sqlite(
            &out,
            "SELECT count(*), total(price), group_concat(name) FROM items",
        )
    };
    assert_eq!(dump("bucket"), dump("laptop/.scion"));
}

/// The laptop's store pushed to the bucket, and a second host's store cloned from it.
fn two_hosts(s: &Session, rows: usize) -> [&'static str; 2] {
    laptop_and_bucket(s, rows);
    let pushed = s.ok(&["--store", "laptop/.scion", "push", "origin", "shop"]);
    assert!(pushed.contains("sent "), "{pushed}");
    // A clone receives what it brings (it said `sent`).
    let cloned = s.ok(&["clone", "bucket", "other"]);
    assert!(
        cloned.contains("received ") && cloned.contains("already here"),
        "{cloned}"
    );
    ["laptop/.scion", "other/.scion"]
}

#[test]
fn two_hosts_pushing_one_branch_at_once_one_wins_and_the_other_is_told_to_pull() {
    let s = Session::new();
    let stores = two_hosts(&s, 500);
    for round in 0..8 {
        for (i, st) in stores.iter().enumerate() {
            s.ok(&[
                "--store",
                st,
                "sql",
                "shop",
                &format!(
                    "INSERT INTO items(id, name, price) VALUES ({}, 'h{i}-r{round}', {i})",
                    10_000 + round * 10 + i
                ),
            ]);
        }
        let children: Vec<_> = stores
            .iter()
            .map(|st| {
                s.cmd(&["--store", st, "--json", "push", "origin", "shop"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let won: Vec<_> = outs.iter().filter(|o| o.status.success()).collect();
        assert_eq!(won.len(), 1, "round {round}: exactly one push wins");
        let lost = outs.iter().find(|o| !o.status.success()).unwrap();
        let err = String::from_utf8_lossy(&lost.stderr);
        assert_eq!(lost.status.code(), Some(5), "round {round}: {err}");
        assert!(
            err.contains("not_fast_forward") && err.contains("pull"),
            "round {round}: {err}"
        );
        // The loser pulls, merges and pushes; next round starts level.
        let loser = stores[outs.iter().position(|o| !o.status.success()).unwrap()];
        s.ok(&["--store", loser, "pull", "origin", "shop", "--force"]);
        s.ok(&["--store", loser, "push", "origin", "shop"]);
        let winner = stores[outs.iter().position(|o| o.status.success()).unwrap()];
        s.ok(&["--store", winner, "pull", "origin", "shop", "--force"]);
    }
    s.ok(&["--store", "bucket", "verify"]);
    let n = s.ok(&[
        "--store",
        "bucket",
        "sql",
        "shop",
        "SELECT count(*) FROM items",
    ]);
    assert!(n.contains("516"), "{n}");
}

/// Two hosts that each append a row under the next id: the second one's pull conflicts on
/// it, and `pull --renumber` keeps both rows, the remote's under a new id.
#[test]
fn hosts_that_both_appended_pull_with_renumber() {
    let s = Session::new();
    let stores = two_hosts(&s, 5);
    for (st, name) in stores.into_iter().zip(["from-laptop", "from-other"]) {
        s.ok(&[
            "--store",
            st,
            "sql",
            "shop",
            &format!("INSERT INTO items(name, price) VALUES ('{name}', 1)"),
        ]);
    }
    s.ok(&["--store", "laptop/.scion", "push", "origin", "shop"]);
    let pull = [
        "--store",
        "other/.scion",
        "pull",
        "origin",
        "shop",
        "--force",
    ];
    let clash = s.run(&pull);
    assert_eq!(clash.code, 11, "{}{}", clash.stdout, clash.stderr);
    assert!(clash.stderr.contains("--renumber"), "{}", clash.stderr);
    let pulled = s.ok(&[&pull[..], &["--renumber"]].concat());
    assert!(pulled.contains("renumbered"), "{pulled}");
    assert!(
        pulled.contains(
            "note: the remote's main keeps these rows under its own ids: push shop@main there"
        ),
        "{pulled}"
    );
    s.ok(&["--store", "other/.scion", "push", "origin", "shop"]);
    s.ok(&[
        "--store",
        "laptop/.scion",
        "pull",
        "origin",
        "shop",
        "--force",
    ]);
    let rows = s.ok(&[
        "--store",
        "laptop/.scion",
        "sql",
        "shop",
        "SELECT id, name FROM items WHERE id > 5 ORDER BY id",
    ]);
    assert_eq!(rows, "6|from-other\n7|from-laptop\n", "{rows}");
}
