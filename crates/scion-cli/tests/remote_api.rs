//! Remotes, push and pull through a real `scion serve`: the answers are the reports
//! `scion push --json` and `scion pull --json` print, and refusals carry the CLI's codes.

mod served;

use serde_json::json;
use served::{code, served, Served};

#[test]
fn push_and_pull_through_the_daemon() {
    let (dir, s) = served(200, &[]);
    // The other store, made and written with the CLI.
    let other = dir.path().join("bucket");
    s.scion(&["--store", other.to_str().unwrap(), "init"]);

    let added = s
        .post(
            "/v1/remotes",
            json!({"name": "origin", "location": other.to_str().unwrap()}),
        )
        .unwrap();
    assert_eq!(added.status, 201, "{}", added.body);
    let listed = s.get("/v1/remotes");
    assert_eq!(listed[0]["remote"], "origin", "{listed}");

    let pushed = s
        .post("/v1/branches/shop@main/push", json!({"remote": "origin"}))
        .unwrap();
    assert_eq!(pushed.body["outcome"], "created", "{}", pushed.body);
    assert!(pushed.body["transfer"]["objects_sent"].as_u64().unwrap() >= 1);
    let again = s
        .post("/v1/branches/shop@main/push", json!({"remote": "origin"}))
        .unwrap();
    assert_eq!(again.body["outcome"], "up_to_date", "{}", again.body);

    // A commit at the other store, pulled into a new branch and into main.
    let other_store = |args: &[&str]| {
        let mut all = vec!["--store", other.to_str().unwrap()];
        all.extend_from_slice(args);
        s.scion(&all)
    };
    other_store(&["sql", "shop", "UPDATE items SET qty = 0 WHERE id = 3"]);
    let fetched = s
        .post(
            "/v1/branches/shop@mirror/pull",
            json!({"remote": "origin", "from": "main"}),
        )
        .unwrap();
    assert_eq!(fetched.body["outcome"], "created", "{}", fetched.body);
    assert_eq!(fetched.body["tracking"], "shop@origin~main");
    let refused = s.post("/v1/branches/shop@main/pull", json!({"remote": "origin"}));
    assert_eq!(code(refused), (409, "protected".to_string()));
    let merged = s
        .post(
            "/v1/branches/shop@main/pull",
            json!({"remote": "origin", "force": true}),
        )
        .unwrap();
    assert_eq!(merged.body["outcome"], "fast_forward", "{}", merged.body);
    let exported = s.export("shop");
    assert_eq!(
        served::rows(&exported, "SELECT qty FROM items WHERE id = 3"),
        0
    );

    // Diverged: the push is refused with the CLI's code, the remote untouched.
    other_store(&["sql", "shop", "UPDATE items SET qty = 1 WHERE id = 4"]);
    s.scion(&["sql", "shop", "UPDATE items SET qty = 2 WHERE id = 5"]);
    let diverged = s.post("/v1/branches/shop@main/push", json!({"remote": "origin"}));
    assert_eq!(code(diverged), (409, "not_fast_forward".to_string()));
    let missing = s.post("/v1/branches/shop@main/push", json!({"remote": "nowhere"}));
    assert_eq!(code(missing), (404, "remote_not_found".to_string()));

    // Both stores add a row under the next id: the pull's merge stops on the clash, and
    // with `renumber` keeps both, the remote's under a new id.
    other_store(&[
        "sql",
        "shop",
        "INSERT INTO items(name, qty) VALUES ('remote', 1)",
    ]);
    s.scion(&[
        "sql",
        "shop",
        "INSERT INTO items(name, qty) VALUES ('local', 1)",
    ]);
    let pull = |renumber: bool| {
        s.post(
            "/v1/branches/shop@main/pull",
            json!({"remote": "origin", "force": true, "renumber": renumber}),
        )
        .unwrap()
    };
    let clash = pull(false);
    assert_eq!(clash.body["outcome"], "conflicts", "{}", clash.body);
    let kept = pull(true);
    assert_eq!(kept.body["outcome"], "merged", "{}", kept.body);
    assert_eq!(
        kept.body["merge"]["renumbered"],
        json!([{"table": "items", "column": "id", "from": 201, "to": 202}]),
        "{}",
        kept.body
    );
    let exported = s.export("shop");
    assert_eq!(
        served::rows(&exported, "SELECT count(*) FROM items WHERE id > 200"),
        2
    );

    let removed = s
        .client()
        .request("DELETE", "/v1/remotes/origin", None, &[])
        .unwrap();
    assert_eq!(removed.body["removed"], "origin", "{}", removed.body);
    drop::<Served>(s);
}

/// `scion serve --follow origin:shop@main` pushes main as it moves; the pushes and their
/// lag are in the metrics.
#[test]
fn the_daemon_follows_a_branch_to_its_remote() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Served::prepare(dir.path(), 100);
    let other = dir.path().join("bucket");
    s.scion(&["--store", other.to_str().unwrap(), "init"]);
    s.scion(&["remote", "add", "origin", other.to_str().unwrap()]);
    s.start(&["--follow", "origin:shop@main", "--follow-every", "20ms"]);
    for i in 0..5 {
        s.scion(&[
            "sql",
            "shop",
            &format!("UPDATE items SET qty = {i} WHERE id = 1"),
        ]);
    }
    let head = |store: &std::path::Path| -> String {
        let text = std::fs::read_to_string(store.join("refs/shop/main")).unwrap_or_default();
        serde_json::from_str::<serde_json::Value>(&text).map_or(String::new(), |v| {
            v["root"].as_str().unwrap_or_default().to_string()
        })
    };
    // Waits for the follower, however loaded the machine; asserts nothing about time.
    let mut caught_up = false;
    for _ in 0..1500 {
        if head(&other) == head(&s.store) {
            caught_up = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        caught_up,
        "the remote never reached main's head: {}",
        s.log()
    );
    let metrics = s.client().raw("GET", "/metrics", None, &[]).unwrap();
    let text = metrics.body.as_str().unwrap_or_default().to_string();
    let pushes: f64 = text
        .lines()
        .find(|l| l.starts_with("scion_follow_pushes_total "))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(pushes >= 1.0, "{text}");
    assert!(text.contains("scion_follow_lag_seconds_bucket"), "{text}");
    let refused = s
        .cmd(&["serve", "--follow", "nowhere:shop"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no remote named nowhere"));
}
