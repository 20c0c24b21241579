//! `scion log --graph`: the branch tree by lineage, as people and machines read it.

mod common;

use common::*;

/// main ─ a ─ a1 ─ a2 ─ a3 (a chain) and main ─ b, plus b forked at a checkpoint of a.
fn tree() -> Session {
    let s = Session::new();
    seed(&s.path("shop.db"), 10);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop@main", "a"]);
    s.ok(&["checkpoint", "shop@a", "c1"]);
    s.ok(&["fork", "shop@a", "a1"]);
    s.ok(&["fork", "shop@a1", "a2"]);
    s.ok(&["fork", "shop@a2", "a3"]);
    s.ok(&["fork", "shop@a", "b", "--at", "c1", "--ttl", "2h"]);
    s
}

#[test]
fn the_graph_draws_each_branch_under_the_one_it_was_forked_from() {
    let s = tree();
    let out = s.ok(&["log", "shop", "--graph"]);
    assert!(!out.contains('\u{1b}'), "styles written to a pipe:\n{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "shop: 6 branches", "{out}");
    let expected = [
        ("● main", "protected"),
        ("└─ ● a ", "1 checkpoint"),
        ("   ├─ ● a1 ", "forked at v1"),
        ("   │  └─ ● a2 ", "forked at v1"),
        ("   │     └─ ● a3 ", "forked at v1"),
        ("   └─ ● b ", "forked at @c1"),
    ];
    assert_eq!(lines.len(), expected.len() + 1, "{out}");
    for (line, (start, fact)) in lines[1..].iter().zip(expected) {
        assert!(
            line.starts_with(start) && line.contains(fact),
            "{line:?} in\n{out}"
        );
    }
    assert!(lines[6].contains("ttl 1h 59m"), "{out}");
    // Colour where asked for (a terminal, or forced), never against NO_COLOR.
    let forced = [("CLICOLOR_FORCE", "1".to_string())];
    assert!(s
        .ok_with(&forced, &["log", "shop", "--graph"])
        .contains("\u{1b}["));
    let refused = [
        ("CLICOLOR_FORCE", "1".to_string()),
        ("NO_COLOR", "1".to_string()),
    ];
    assert_eq!(s.ok_with(&refused, &["log", "shop", "--graph"]), out);
}

#[test]
fn idle_subtrees_past_the_depth_fold_into_one_line_and_all_unfolds_them() {
    let s = tree();
    let out = s.ok(&["log", "shop", "--graph", "--depth", "2", "--idle", "0s"]);
    assert!(
        out.contains("   │  └─ … 2 idle branches folded, up to 2 forks deeper")
            && out.contains("scion log shop@a1 --graph"),
        "{out}"
    );
    assert!(!out.contains("a2") && !out.contains("a3"), "{out}");
    // Touched within --idle: nothing folds.
    let out = s.ok(&["log", "shop", "--graph", "--depth", "2", "--idle", "1h"]);
    assert!(out.contains("● a3") && !out.contains("folded"), "{out}");
    let out = s.ok(&[
        "log", "shop", "--graph", "--depth", "0", "--idle", "0s", "--all",
    ]);
    assert_eq!(out.matches('●').count(), 6, "{out}");
    // -n limits the branches drawn and says how many were left out.
    let out = s.ok(&["log", "shop", "--graph", "-n", "2"]);
    assert_eq!(out.matches('●').count(), 2, "{out}");
    assert!(out.contains("… 4 more branches not shown"), "{out}");
}

#[test]
fn a_subtree_and_the_json_tree() {
    let s = tree();
    let out = s.ok(&["log", "shop@a1", "--graph"]);
    assert!(
        out.starts_with("shop: 6 branches, 3 in this subtree\n● a1 "),
        "{out}"
    );
    assert!(out.contains("forked from a v1"), "{out}");
    let j = s.json(&["log", "shop", "--graph"]);
    assert_eq!(j["db"], "shop");
    assert_eq!(j["branches"], 6);
    let main = &j["roots"][0];
    assert_eq!(main["branch"], "main");
    let a = &main["children"][0];
    assert_eq!(a["branch"], "a");
    let names: Vec<&str> = a["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["branch"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a1", "b"]);
    assert_eq!(a["children"][1]["forked_from"]["checkpoint"], "c1");
    assert_eq!(
        a["children"][0]["children"][0]["children"][0]["branch"],
        "a3"
    );
    let r = s.run(&["log", "shop@nope", "--graph"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("nope"), "{}", r.stderr);
    let r = s.run(&["log", "shop", "--all"]);
    assert_eq!(r.code, 2, "--all without --graph: {}", r.stderr);
}

/// An MCTS-shaped tree of 1,000 forks, up to 25 deep: `--all` draws every one, the
/// default view stays bounded and accounts for every branch it does not draw.
#[test]
fn a_thousand_branch_search_tree_is_drawn_whole_or_folded_with_every_branch_accounted_for() {
    let s = Session::new();
    seed(&s.path("shop.db"), 10);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    let mut depth = vec![("main".to_string(), 0usize)];
    let mut x: u64 = 0x2545_f491;
    for i in 0..1000 {
        // Expand one of the recent nodes, as a tree search deepens its best lines.
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let back = (x >> 33) as usize % depth.len().min(40);
        let (parent, d) = depth[depth.len() - 1 - back].clone();
        let (parent, d) = if d >= 25 {
            ("main".to_string(), 0)
        } else {
            (parent, d)
        };
        let name = format!("n{i}");
        s.ok(&["fork", &format!("shop@{parent}"), &name]);
        depth.push((name, d + 1));
    }
    let deepest = depth.iter().map(|(_, d)| *d).max().unwrap();
    let started = std::time::Instant::now();
    let all = s.ok(&["log", "shop", "--graph", "--all"]);
    eprintln!(
        "scion log --graph --all: 1,001 branches, {deepest} forks deep, in {:?}",
        started.elapsed()
    );
    assert_eq!(all.matches('●').count(), 1001, "{all}");
    let widest = all.lines().map(|l| l.chars().count()).max().unwrap();
    eprintln!("widest line: {widest} characters");
    let folded = s.ok(&["log", "shop", "--graph", "--idle", "0s"]);
    let drawn = folded.matches('●').count();
    let mut accounted = drawn;
    for line in folded.lines() {
        if let Some(rest) = line.split("… ").nth(1) {
            accounted += rest.split(' ').next().unwrap().parse::<usize>().unwrap();
        }
    }
    assert!(drawn <= 200, "{drawn} drawn");
    assert_eq!(accounted, 1001, "{folded}");
    assert!(folded.contains("idle branches folded"), "{folded}");
}

/// A merge is a version with two parents: the graph shows where another line joined.
#[test]
fn the_graph_shows_where_merges_joined_a_line() {
    let s = Session::new();
    s.ok(&["init"]);
    s.ok(&["create", "shop"]);
    s.ok(&[
        "sql",
        "shop",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)",
    ]);
    s.ok(&["fork", "shop", "aa"]);
    s.ok(&["fork", "shop", "bb"]);
    s.ok(&["sql", "shop@aa", "INSERT INTO t VALUES (1, 'aa')"]);
    s.ok(&["sql", "shop@bb", "INSERT INTO t VALUES (2, 'bb')"]);
    s.ok(&["merge", "shop@aa", "--into", "bb"]);
    let out = s.ok(&["log", "shop", "--graph"]);
    let lines: Vec<&str> = out.lines().collect();
    let bb = lines.iter().position(|l| l.contains("● bb")).unwrap();
    assert!(
        lines[bb + 1].contains("⇠ merged aa v3 as v4"),
        "the merge is drawn under bb's line:\n{out}"
    );
    assert!(
        !out.lines().any(|l| l.contains("● aa") && l.contains("⇠")),
        "{out}"
    );
    let json = s.json(&["log", "shop", "--graph"]);
    let bb = &json["roots"][0]["children"][1];
    assert_eq!(bb["branch"], "bb", "{json}");
    let m = &bb["merges"][0];
    assert_eq!(
        (&m["from_branch"], &m["from_version"], &m["version"]),
        (&"aa".into(), &3.into(), &4.into()),
        "{json}"
    );
    assert!(m["root"].is_string() && m["from_root"].is_string(), "{m}");
    assert!(
        json["roots"][0]["children"][0].get("merges").is_none(),
        "aa has none: {json}"
    );
}

#[test]
fn without_a_target_the_graph_draws_every_database() {
    let s = tree();
    seed(&s.path("crm.db"), 3);
    s.ok(&["create", "crm", "--from", "crm.db"]);
    s.ok(&["fork", "crm", "leads"]);
    let drawn = s.ok(&["log", "--graph"]);
    assert!(drawn.contains("shop: 6 branches"), "{drawn}");
    assert!(drawn.contains("crm: 2 branches"), "{drawn}");
    assert!(drawn.contains("leads"), "{drawn}");
    let v: serde_json::Value = serde_json::from_str(&s.ok(&["--json", "log", "--graph"])).unwrap();
    let dbs: Vec<&str> = v["databases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["db"].as_str().unwrap())
        .collect();
    assert_eq!(dbs, ["crm", "shop"]);
    // A plain log still needs a branch.
    assert_ne!(s.run(&["log"]).code, 0);
}
