//! The CLI against a real S3-compatible server (moto, started by `./scripts/test`): the
//! README quickstart, processes sharing one bucket, and faults injected between scion and
//! the server.

mod common;
mod fault_proxy;

use std::process::Stdio;

use common::*;

fn endpoint() -> String {
    match std::env::var("SCION_S3_ENDPOINT") {
        Ok(e) => e,
        Err(_) => panic!(
            "S3 tests need a server: ./scripts/test starts moto and sets SCION_S3_ENDPOINT{}",
            if std::env::var("CI").is_ok() {
                " (CI must not skip them)"
            } else {
                ""
            }
        ),
    }
}

fn unique_store() -> String {
    let bucket = std::env::var("SCION_S3_TEST_BUCKET")
        .expect("SCION_S3_TEST_BUCKET (set by ./scripts/test)");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("s3://{bucket}/cli-{nanos:x}")
}

/// A session whose store is a fresh prefix in the test bucket, with its own cache.
fn s3_session(endpoint: &str) -> (Session, Vec<(&'static str, String)>) {
    let s = Session::new();
    let env = vec![
        ("SCION_STORE", unique_store()),
        ("SCION_CHECKOUTS", s.path("cache").display().to_string()),
        ("SCION_S3_ENDPOINT", endpoint.to_string()),
    ];
    (s, env)
}

fn spawn_env(s: &Session, env: &[(&str, String)], args: &[&str]) -> std::process::Child {
    let mut c = s.cmd(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn readme_quickstart_on_s3() {
    let (s, env) = s3_session(&endpoint());
    let stdout = run_readme_quickstart(s.dir.path(), &env);
    assert!(
        stdout.contains("apple|2.0\npear|5.0\n") && stdout.contains("apple|1.0\npear|2.5\n"),
        "{stdout}"
    );
    assert!(stdout.contains("store:     s3://"), "{stdout}");

    // The manifest is replaced by compare-and-swap on S3 as well.
    let changed = s.ok_with(&env, &["--json", "config", "--page-compression", "none"]);
    let changed: serde_json::Value = serde_json::from_str(&changed).unwrap();
    assert_eq!(changed["changed"]["page_compression"]["before"], "lz4");
    let status = s.ok_with(&env, &["--json", "status"]);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["page_compression"], "none");
}

#[test]
fn processes_sharing_one_bucket() {
    let (s, env) = s3_session(&endpoint());
    seed(&s.path("shop.db"), 2000);
    s.ok_with(&env, &["init"]);
    s.ok_with(&env, &["create", "shop", "--from", "shop.db"]);
    // Concurrent forks of one branch, each to its own name: all win.
    let children: Vec<_> = (0..4)
        .map(|i| spawn_env(&s, &env, &["fork", "shop", &format!("f{i}")]))
        .collect();
    for c in children {
        assert!(c.wait_with_output().unwrap().status.success());
    }
    // Concurrent lease acquisitions of one branch by different holders: exactly one wins.
    let children: Vec<_> = (0..4)
        .map(|i| {
            spawn_env(
                &s,
                &env,
                &[
                    "--holder",
                    &format!("agent-{i}"),
                    "lease",
                    "acquire",
                    "shop@f0",
                    "--ttl",
                    "5m",
                ],
            )
        })
        .collect();
    let codes: Vec<i32> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap().status.code().unwrap())
        .collect();
    assert_eq!(codes.iter().filter(|c| **c == 0).count(), 1, "{codes:?}");
    assert!(
        codes.iter().all(|c| *c == 0 || *c == 6 || *c == 5),
        "{codes:?}"
    );
    // Concurrent checkpoints of different branches, each from its own checkout.
    for i in 1..4 {
        let p = s.ok_with(&env, &["checkout", &format!("shop@f{i}")]);
        sqlite(
            std::path::Path::new(p.trim()),
            &format!("UPDATE items SET price = {i} WHERE id <= {i}"),
        );
    }
    let children: Vec<_> = (1..4)
        .map(|i| spawn_env(&s, &env, &["checkpoint", &format!("shop@f{i}"), "c"]))
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    for i in 1..4 {
        s.ok_with(
            &env,
            &["export", &format!("shop@f{i}@c"), "x.db", "--force"],
        );
        let q = format!("SELECT count(*) FROM items WHERE price = {i}");
        assert_eq!(sqlite(&s.path("x.db"), &q), format!("Integer({i})"));
    }
}

#[test]
fn faults_between_scion_and_the_store_fail_or_retry_cleanly() {
    fault_proxy::faults_fail_or_retry_cleanly(
        || s3_session(&endpoint()),
        "SCION_S3_ENDPOINT",
        "SCION_S3_TIMEOUT",
    );
}

/// A ref write whose answer is lost (the write landed, the client saw a 500, its retry got
/// 412) is a success, never a conflict that deletes the new version's data.
#[test]
fn ambiguous_cas_on_moto_through_a_fault_injecting_proxy() {
    let (s, env) = s3_session(&endpoint());
    fault_proxy::commits_survive_lost_ref_write_answers(&s, env, "SCION_S3_ENDPOINT");
}

/// `SCION_SEGMENT_CACHE_MAX` bounds the local copies of an S3 store's segments: a checkout
/// through a cache too small for two segments still reads every page right, and leaves
/// one copy behind; by default every segment read stays.
#[test]
fn a_bounded_segment_cache_on_s3_keeps_its_limit() {
    let (s, env) = s3_session(&endpoint());
    let db = s.path("seed.db");
    seed(&db, 5000);
    s.ok_with(&env, &["init"]);
    s.ok_with(&env, &["create", "shop", "--from", db.to_str().unwrap()]);
    // Three more commits: four segments in all.
    for i in 1..=3 {
        s.ok_with(&env, &["fork", "shop", &format!("b{i}")]);
        let path = s.ok_with(&env, &["checkout", &format!("shop@b{i}")]);
        sqlite(
            std::path::Path::new(path.trim()),
            &format!("UPDATE items SET price = price + {i} WHERE id % 7 = {i}"),
        );
        s.ok_with(&env, &["checkpoint", &format!("shop@b{i}"), "done"]);
        s.ok_with(
            &env,
            &[
                "promote",
                &format!("shop@b{i}"),
                "--onto",
                "main",
                "--force",
            ],
        );
    }
    let segments_dir = s.path("cache").join(".segments");
    let copies = || {
        std::fs::read_dir(&segments_dir)
            .unwrap()
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().ends_with(".part"))
            .count()
    };

    let sum = |p: &str| {
        sqlite(
            std::path::Path::new(p.trim()),
            "SELECT count(*), sum(price) FROM items",
        )
    };
    let expected = sum(&s.ok_with(&env, &["checkout", "shop@b3"]));
    // No clean local file of the head is left to clone from: the next checkout decodes.
    for i in 1..=3 {
        s.ok_with(&env, &["destroy", &format!("shop@b{i}"), "--force"]);
    }

    // The default keeps every segment a checkout read: more than one here.
    std::fs::remove_dir_all(&segments_dir).unwrap();
    s.ok_with(&env, &["fork", "shop", "reader"]);
    s.ok_with(&env, &["checkout", "shop@reader"]);
    let read = copies();
    assert!(read >= 2, "the head's pages are in {read} segments");
    s.ok_with(&env, &["destroy", "shop@reader", "--force"]);

    // A cache that holds one byte: every copy kept pushes out the one before.
    std::fs::remove_dir_all(&segments_dir).unwrap();
    let mut tiny = env.clone();
    tiny.push(("SCION_SEGMENT_CACHE_MAX", "1".into()));
    s.ok_with(&tiny, &["fork", "shop", "reader2"]);
    let path = s.ok_with(&tiny, &["checkout", "shop@reader2"]);
    assert_eq!(
        sum(&path),
        expected,
        "the pages read through the tiny cache"
    );
    assert_eq!(copies(), 1, "one copy of {read} left: the last one kept");

    // `status` says what the cache holds and may hold.
    let status: serde_json::Value =
        serde_json::from_str(&s.ok_with(&tiny, &["--json", "status"])).unwrap();
    let cache = &status["segment_cache"];
    assert_eq!(cache["limit_bytes"], 1, "{status}");
    let one_copy = std::fs::read_dir(&segments_dir)
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum::<u64>();
    assert_eq!(cache["bytes"], one_copy, "{status}");
    assert!(s.ok_with(&env, &["status"]).contains("cache:     "));
}

/// An S3 setting scion cannot read stops it before any request, naming the variable,
/// instead of quietly falling back to the default.
#[test]
fn unreadable_s3_settings_are_refused_naming_the_variable() {
    let (s, env) = s3_session(&endpoint());
    s.ok_with(&env, &["init"]);
    for (name, value) in [
        ("SCION_S3_TIMEOUT", "soon"),
        ("SCION_S3_PATH_STYLE", "maybe"),
        ("SCION_S3_MULTIPART_THRESHOLD", "16MB"),
        ("SCION_SEGMENT_CACHE_MAX", "lots"),
    ] {
        let mut bad = env.clone();
        bad.push((name, value.into()));
        let r = s.run_with(&bad, &["--json", "status"]);
        assert_eq!(r.code, 8, "{name}={value}: {}{}", r.stdout, r.stderr);
        let e: serde_json::Value = serde_json::from_str(&r.stderr).unwrap();
        let message = e["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(name) && message.contains(value),
            "{name}={value}: {message}"
        );
    }
    let mut fine = env.clone();
    fine.push(("SCION_S3_TIMEOUT", "45s".into()));
    fine.push(("SCION_S3_MULTIPART_THRESHOLD", "32MiB".into()));
    s.ok_with(&fine, &["status"]);
}
