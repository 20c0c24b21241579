//! The version graph as users meet it through `scion merge`: each workflow below once lost
//! rows, reverted a branch or refused, because the base was guessed from branch names.
//! Every version now names its parents, and the base is the best common ancestor.

mod common;

use common::*;

/// A store with `shop` holding `t(id, v)` and row 1 on main.
fn shop() -> Session {
    let s = Session::new();
    s.ok(&["init"]);
    s.ok(&["create", "shop"]);
    sql(
        &s,
        "shop",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'one')",
    );
    s
}

fn sql(s: &Session, target: &str, statements: &str) {
    s.ok(&["sql", target, statements]);
}

/// `t`'s rows of `target`, as `id=v` in id order.
fn rows(s: &Session, target: &str) -> String {
    let out = s.json(&[
        "sql",
        target,
        "SELECT coalesce(group_concat(id || '=' || v, ' '), '') FROM (SELECT * FROM t ORDER BY id)",
    ]);
    out["results"][0]["rows"][0][0]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"))
        .to_string()
}

fn merge(s: &Session, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["merge"];
    all.extend_from_slice(args);
    s.json(&all)
}

#[test]
fn merging_an_older_checkpoint_of_main_into_a_fork_loses_no_rows() {
    let s = shop();
    s.ok(&["checkpoint", "shop", "release1"]);
    sql(&s, "shop", "INSERT INTO t VALUES (2, 'two'), (3, 'three')");
    s.ok(&["fork", "shop", "feat2"]);
    sql(&s, "shop@feat2", "INSERT INTO t VALUES (4, 'four')");
    let r = merge(&s, &["shop@main@release1", "--into", "feat2"]);
    assert_eq!(r["outcome"], "up_to_date", "{r}");
    assert_eq!(rows(&s, "shop@feat2"), "1=one 2=two 3=three 4=four");
}

#[test]
fn merging_an_older_checkpoint_into_an_unchanged_fork_does_not_move_it_back() {
    let s = shop();
    s.ok(&["checkpoint", "shop", "release1"]);
    sql(&s, "shop", "INSERT INTO t VALUES (2, 'two')");
    s.ok(&["fork", "shop", "x"]);
    let before = s.json(&["branches", "shop"]);
    let r = merge(&s, &["shop@main@release1", "--into", "x"]);
    assert_eq!(r["outcome"], "up_to_date", "{r}");
    assert_eq!(rows(&s, "shop@x"), "1=one 2=two");
    assert_eq!(s.json(&["branches", "shop"]), before, "nothing moved");
}

#[test]
fn merging_a_checkpoint_from_before_a_table_existed_keeps_the_table() {
    let s = shop();
    s.ok(&["checkpoint", "shop", "early"]);
    sql(
        &s,
        "shop",
        "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)",
    );
    s.ok(&["fork", "shop", "x"]);
    sql(&s, "shop@x", "INSERT INTO notes VALUES (1, 'kept')");
    let r = merge(&s, &["shop@main@early", "--into", "x"]);
    assert_eq!(r["outcome"], "up_to_date", "{r}");
    let out = s.json(&["sql", "shop@x", "SELECT body FROM notes"]);
    assert_eq!(out["results"][0]["rows"], serde_json::json!([["kept"]]));
}

/// Forks aa (row 1 changed) and bb (row 2 changed) of a main holding rows 1 and 2.
fn two_forks() -> Session {
    let s = shop();
    sql(&s, "shop", "INSERT INTO t VALUES (2, 'two')");
    s.ok(&["fork", "shop", "aa"]);
    s.ok(&["fork", "shop", "bb"]);
    sql(&s, "shop@aa", "UPDATE t SET v = 'aa' WHERE id = 1");
    sql(&s, "shop@bb", "UPDATE t SET v = 'bb' WHERE id = 2");
    s
}

#[test]
fn merging_back_after_an_undone_merge_keeps_the_destination_rows() {
    let s = two_forks();
    merge(&s, &["shop@aa", "--into", "bb"]);
    s.ok(&["undo", "shop@bb"]);
    let r = merge(&s, &["shop@bb", "--into", "aa"]);
    assert_eq!(r["outcome"], "merged", "not a fast-forward: {r}");
    assert_eq!(rows(&s, "shop@aa"), "1=aa 2=bb");
}

#[test]
fn merging_back_after_a_rollback_keeps_the_destination_rows() {
    let s = two_forks();
    s.ok(&["checkpoint", "shop@bb", "pre"]);
    merge(&s, &["shop@aa", "--into", "bb"]);
    s.ok(&["rollback", "shop@bb", "--to", "pre"]);
    let r = merge(&s, &["shop@bb", "--into", "aa"]);
    assert_eq!(r["outcome"], "merged", "{r}");
    assert_eq!(rows(&s, "shop@aa"), "1=aa 2=bb");
}

#[test]
fn merging_a_checkpoint_taken_before_a_merge_keeps_the_destination_rows() {
    let s = two_forks();
    s.ok(&["checkpoint", "shop@bb", "pre"]);
    merge(&s, &["shop@aa", "--into", "bb"]);
    let r = merge(&s, &["shop@bb@pre", "--into", "aa"]);
    assert_eq!(r["outcome"], "merged", "{r}");
    assert_eq!(rows(&s, "shop@aa"), "1=aa 2=bb");
}

#[test]
fn strategy_ours_after_an_undone_merge_keeps_our_row() {
    let s = two_forks();
    merge(&s, &["shop@aa", "--into", "bb"]);
    s.ok(&["undo", "shop@bb"]);
    merge(&s, &["shop@bb", "--into", "aa", "--strategy", "ours"]);
    assert_eq!(rows(&s, "shop@aa"), "1=aa 2=bb");
}

#[test]
fn an_undone_merge_can_be_merged_again() {
    let s = two_forks();
    merge(&s, &["shop@aa", "--into", "bb"]);
    s.ok(&["undo", "shop@bb"]);
    assert_eq!(rows(&s, "shop@bb"), "1=one 2=bb");
    let r = merge(&s, &["shop@aa", "--into", "bb"]);
    assert_eq!(r["outcome"], "merged", "{r}");
    assert_eq!(rows(&s, "shop@bb"), "1=aa 2=bb");
    let diff = s.json(&["diff", "shop@aa", "shop@bb"]);
    assert_eq!(
        diff["tables"][0]["changed"], 1,
        "only row 2 differs: {diff}"
    );
}

#[test]
fn a_grandchild_merges_into_main() {
    let s = shop();
    s.ok(&["fork", "shop", "child"]);
    s.ok(&["fork", "shop@child", "grandchild"]);
    sql(&s, "shop@grandchild", "INSERT INTO t VALUES (10, 'gc')");
    sql(&s, "shop", "INSERT INTO t VALUES (11, 'main')");
    let r = merge(&s, &["shop@grandchild", "--into", "main", "--force"]);
    assert_eq!(r["outcome"], "merged", "{r}");
    assert_eq!(rows(&s, "shop"), "1=one 10=gc 11=main");
}

#[test]
fn a_fork_of_a_fork_merges_into_its_aunt() {
    let s = shop();
    s.ok(&["fork", "shop", "parent"]);
    s.ok(&["fork", "shop@parent", "kid"]);
    s.ok(&["fork", "shop", "aunt"]);
    sql(&s, "shop@kid", "INSERT INTO t VALUES (10, 'kid')");
    sql(&s, "shop@aunt", "INSERT INTO t VALUES (11, 'aunt')");
    let r = merge(&s, &["shop@kid", "--into", "aunt"]);
    assert_eq!(r["outcome"], "merged", "{r}");
    assert_eq!(rows(&s, "shop@aunt"), "1=one 10=kid 11=aunt");
}

#[test]
fn a_fork_of_a_fork_of_main_merges_into_main_after_main_moved() {
    let s = shop();
    s.ok(&["fork", "shop", "b"]);
    sql(&s, "shop@b", "INSERT INTO t VALUES (20, 'b')");
    s.ok(&["fork", "shop@b", "c"]);
    sql(&s, "shop@c", "INSERT INTO t VALUES (30, 'c')");
    sql(&s, "shop", "UPDATE t SET v = 'main' WHERE id = 1");
    let r = merge(&s, &["shop@c", "--into", "main", "--force"]);
    assert_eq!(r["outcome"], "merged", "{r}");
    assert_eq!(rows(&s, "shop"), "1=main 20=b 30=c");
}

#[test]
fn a_base_of_another_database_is_refused() {
    let s = two_forks();
    s.ok(&["create", "other"]);
    let r = s.run(&["merge", "shop@aa", "--into", "bb", "--base", "other@main"]);
    assert_eq!(r.code, 8, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("another database"), "{}", r.stderr);
    assert_eq!(rows(&s, "shop@bb"), "1=one 2=bb");
}

#[test]
fn a_criss_cross_is_refused_naming_both_bases_and_merges_with_a_base_given() {
    let s = two_forks();
    // Each side merges the other as it was: two best common ancestors.
    s.ok(&["checkpoint", "shop@aa", "a1"]);
    s.ok(&["checkpoint", "shop@bb", "b1"]);
    merge(&s, &["shop@bb@b1", "--into", "aa"]);
    merge(&s, &["shop@aa@a1", "--into", "bb"]);
    sql(&s, "shop@aa", "INSERT INTO t VALUES (5, 'five')");
    let r = s.run(&["merge", "shop@aa", "--into", "bb"]);
    assert_eq!(r.code, 8, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("2 best common versions"), "{}", r.stderr);
    assert!(r.stderr.contains("--base"), "{}", r.stderr);
    let r = merge(&s, &["shop@aa", "--into", "bb", "--base", "shop@aa@a1"]);
    assert_eq!(r["outcome"], "merged", "{r}");
    assert_eq!(rows(&s, "shop@bb"), "1=aa 2=bb 5=five");
}

#[test]
fn two_imports_share_no_version() {
    let s = Session::new();
    s.ok(&["init"]);
    s.ok(&["create", "shop"]);
    s.ok(&["fork", "shop", "a"]);
    s.ok(&["fork", "shop", "b"]);
    // `a` starts over from an import: nothing of it comes from b.
    sqlite(
        &s.path("other.db"),
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)",
    );
    s.ok(&["create", "again", "--from", "other.db"]);
    let r = s.run(&["merge", "again@main", "--into", "shop@b"]);
    assert_eq!(r.code, 8, "{}", r.stderr);
}

/// A store written before versions named their parents: every command still works; a
/// merge whose base the graph cannot see is refused with lineage's candidates, and runs
/// with `--base`.
#[test]
fn a_store_written_before_the_version_graph_reads_and_refuses_an_unknown_base() {
    let s = Session::new();
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/pre-graph/store");
    copy_dir(&golden, &s.path(".scion"));
    s.ok(&["verify"]);
    assert!(s.ok(&["branches", "shop"]).contains("bb"));
    assert_eq!(rows(&s, "shop@aa"), "1=aa 2=two 3=three");
    assert_eq!(rows(&s, "shop@bb"), "1=aa 2=bb 3=three");
    assert_eq!(rows(&s, "shop@aa@before-merge"), "1=aa 2=two 3=three");
    s.ok(&["log", "shop@bb"]);
    s.ok(&["log", "--graph", "shop"]);
    s.ok(&["diff", "shop@aa", "shop@bb"]);
    s.ok(&["checkout", "shop@aa"]);
    s.ok(&["export", "shop@bb", "bb.db"]);
    assert_eq!(
        sqlite(&s.path("bb.db"), "SELECT v FROM t WHERE id = 2"),
        "Text(\"bb\")"
    );

    let r = s.run(&["merge", "shop@aa", "--into", "main", "--force"]);
    assert_eq!(r.code, 8, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("before scion recorded"), "{}", r.stderr);
    assert!(r.stderr.contains("shop@aa@fork"), "{}", r.stderr);
    assert_eq!(rows(&s, "shop"), "1=one 2=two 3=three", "nothing moved");
    let r = merge(
        &s,
        &[
            "shop@aa",
            "--into",
            "main",
            "--force",
            "--base",
            "shop@aa@fork",
        ],
    );
    assert_eq!(r["outcome"], "fast_forward", "{r}");
    assert_eq!(rows(&s, "shop"), "1=aa 2=two 3=three");

    // New versions on top of old ones join the graph: a fork of the merged main and a
    // commit on bb find main's head as their base.
    sql(&s, "shop@bb", "UPDATE t SET v = 'bb3' WHERE id = 3");
    s.ok(&["fork", "shop", "cc"]);
    sql(&s, "shop@cc", "INSERT INTO t VALUES (4, 'cc')");
    let r = s.run(&["merge", "shop@cc", "--into", "bb"]);
    assert_eq!(
        r.code, 8,
        "bb's history is older than the graph: {}",
        r.stderr
    );
    let r = merge(&s, &["shop@cc", "--into", "main", "--force"]);
    assert_eq!(r["outcome"], "fast_forward", "{r}");
    s.ok(&["verify"]);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn after_an_undo_the_hint_names_the_command_that_redoes_it() {
    let s = two_forks();
    merge(&s, &["shop@aa", "--into", "bb"]);
    let out = s.ok(&["undo", "shop@bb"]);
    let redo = out
        .lines()
        .find_map(|l| l.strip_prefix("redo it: scion "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(!out.contains("take it back: scion undo"), "{out}");
    let args: Vec<&str> = redo.split_whitespace().collect();
    s.ok(&args);
    assert_eq!(rows(&s, "shop@bb"), "1=aa 2=bb", "the merge is back");
    let json = s.json(&["undo", "shop@bb"]);
    assert!(json["undid_entry"].is_u64(), "{json}");
}

#[test]
fn a_restored_branch_says_its_ttl_counts_again_from_the_restore() {
    let s = shop();
    s.ok(&["fork", "shop", "x", "--ttl", "1s"]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(s.ok(&["gc"]).contains("reaped expired branch shop@x"));
    let out = s.ok(&["restore", "shop@x"]);
    assert!(out.contains("its TTL (1s) counts again from now"), "{out}");
    assert!(out.contains("--ttl none"), "{out}");
}

#[test]
fn into_a_checkpoint_says_what_into_takes() {
    let s = two_forks();
    s.ok(&["checkpoint", "shop@bb", "cp"]);
    let r = s.run(&["merge", "shop@aa", "--into", "bb@cp"]);
    assert_eq!(r.code, 8, "{}", r.stderr);
    assert!(
        r.stderr.contains("a checkpoint cannot receive changes"),
        "{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("names use a-z"),
        "not about characters: {}",
        r.stderr
    );
    let r = s.run(&["checkout", "shop@a@b@c"]);
    assert!(!r.stderr.contains("names use a-z"), "{}", r.stderr);
    let r = s.run(&["checkout", "Shop"]);
    assert!(
        r.stderr.contains("names use a-z"),
        "about characters: {}",
        r.stderr
    );
}

#[test]
fn log_with_no_entries_asked_for_does_not_claim_there_are_none() {
    let s = two_forks();
    let out = s.ok(&["log", "shop@aa", "-n", "0"]);
    assert!(!out.contains("no head moves recorded"), "{out}");
    assert!(out.contains("older entries"), "{out}");
}
