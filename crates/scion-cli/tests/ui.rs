//! `scion ui` in a real browser: Debian's Chromium driven by playwright-core (both installed
//! by ./scripts/test) loads the explorer from a real `scion ui`, and what it draws is held
//! to `scion log --graph --json`; no request leaves the page's origin; every route refuses
//! a missing or wrong token; the token is never written to the log. Screenshots go to
//! target/ui/.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where ./scripts/test installed playwright-core; the test cannot run without it or
/// Chromium, and says so instead of passing.
fn driver() -> (PathBuf, PathBuf) {
    let modules = repo().join("target/ui-test/node_modules");
    assert!(
        modules.join("playwright-core").exists(),
        "the browser tests need playwright-core in {}: ./scripts/test installs it (npm install --prefix target/ui-test playwright-core)",
        modules.display()
    );
    let chromium = PathBuf::from(
        std::env::var("SCION_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
    );
    assert!(
        chromium.exists(),
        "the browser tests need Chromium at {}: ./scripts/test installs Debian's (apt-get install chromium)",
        chromium.display()
    );
    (modules, chromium)
}

/// A running `scion ui` and the URL it printed.
struct Ui {
    child: Child,
    url: String,
    log: PathBuf,
    /// Steps on the page for the next run (see explore.mjs), as JSON.
    steps: String,
}

impl Ui {
    fn start(s: &Session, store: &str) -> Ui {
        Ui::start_with(s, store, &[])
    }

    fn start_with(s: &Session, store: &str, extra: &[&str]) -> Ui {
        let log = s.path(&format!("ui-{}.log", store.replace('/', "_")));
        let mut args = vec!["--store", store, "ui", "--no-browser"];
        args.extend_from_slice(extra);
        let mut child = s
            .cmd(&args)
            .env("SCION_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        Ui {
            child,
            url,
            log,
            steps: "[]".into(),
        }
    }

    fn base(&self) -> &str {
        self.url.split("/ui").next().unwrap()
    }

    fn token(&self) -> &str {
        self.url.split("token=").nth(1).unwrap()
    }

    /// The HTTP status of GET `path` with the `Authorization` header `auth`.
    fn status(&self, path: &str, auth: Option<&str>) -> u16 {
        self.status_of("GET", path, auth)
    }

    fn status_of(&self, method: &str, path: &str, auth: Option<&str>) -> u16 {
        let mut c = Command::new("curl");
        c.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", method]);
        if let Some(a) = auth {
            c.args(["-H", &format!("Authorization: Bearer {a}")]);
        }
        let out = c.arg(format!("{}{path}", self.base())).output().unwrap();
        String::from_utf8_lossy(&out.stdout).parse().unwrap()
    }

    /// Load the page (at `url`, else the one printed) in Chromium, search it for `search`,
    /// run `live` (argv, and the branch it makes) once the page drew the tree and wait for
    /// that branch to appear in it; what it drew.
    fn explore_live(
        &self,
        url: Option<&str>,
        shot: &Path,
        search: &str,
        live: Option<(Vec<String>, &str)>,
    ) -> serde_json::Value {
        let (modules, chromium) = driver();
        let mut node = Command::new("node");
        node.env("SCION_UI_STEPS", &self.steps);
        if let Some((argv, expect)) = &live {
            node.env("SCION_UI_LIVE", serde_json::to_string(argv).unwrap())
                .env("SCION_UI_EXPECT", expect);
        }
        let out = node
            .arg(repo().join("crates/scion-cli/tests/ui/explore.mjs"))
            .arg(url.unwrap_or(&self.url))
            .arg(shot)
            .arg(search)
            .env("NODE_PATH", &modules)
            .env("SCION_CHROMIUM", chromium)
            .current_dir(modules.parent().unwrap())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the browser run failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The nodes and edges `scion log --graph --json` describes: fork edges parent to child,
/// merge edges from the branch merged in to the branch it joined.
fn graph_of(s: &Session, store: &str, db: &str) -> (Vec<String>, Vec<(String, String, String)>) {
    let v = s.json(&["--store", store, "log", "--graph", db]);
    let (mut nodes, mut edges) = (Vec::new(), Vec::new());
    fn walk(
        n: &serde_json::Value,
        nodes: &mut Vec<String>,
        edges: &mut Vec<(String, String, String)>,
    ) {
        let name = n["branch"].as_str().unwrap().to_string();
        for m in n["merges"].as_array().into_iter().flatten() {
            if let Some(from) = m["from_branch"].as_str() {
                edges.push((from.to_string(), name.clone(), "merge".into()));
            }
        }
        for c in n["children"].as_array().unwrap() {
            edges.push((
                name.clone(),
                c["branch"].as_str().unwrap().to_string(),
                "fork".into(),
            ));
            walk(c, nodes, edges);
        }
        nodes.push(name);
    }
    for r in v["roots"].as_array().unwrap() {
        walk(r, &mut nodes, &mut edges);
    }
    nodes.sort();
    edges.sort();
    (nodes, edges)
}

fn shots() -> PathBuf {
    let dir = repo().join("target/ui");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_explorer_draws_the_tree_scion_log_graph_describes() {
    let s = Session::new();
    seed(&s.path("shop.db"), 200);
    let st = "store";
    let on = |args: &[&str]| {
        let mut all = vec!["--store", st];
        all.extend_from_slice(args);
        s.ok(&all)
    };
    on(&["init"]);
    on(&["create", "shop", "--from", "shop.db"]);
    for b in ["agent-1", "agent-2", "eval"] {
        on(&["fork", "shop", b]);
    }
    on(&["fork", "shop@agent-1", "agent-1-retry"]);
    // Both sides move before each merge, so each is a version with two parents.
    on(&[
        "sql",
        "shop@agent-2",
        "UPDATE items SET price = 1 WHERE id = 3",
    ]);
    on(&["sql", "shop", "UPDATE items SET price = 5 WHERE id = 9"]);
    on(&["merge", "shop@agent-2", "--into", "main", "--force"]);
    on(&[
        "sql",
        "shop@agent-1-retry",
        "UPDATE items SET price = 2 WHERE id = 4",
    ]);
    on(&[
        "sql",
        "shop@agent-1",
        "UPDATE items SET price = 6 WHERE id = 8",
    ]);
    on(&["merge", "shop@agent-1-retry", "--into", "agent-1"]);

    let ui = Ui::start(&s, st);
    // A fork made by another process (the CLI, writing the store directly) appears live.
    let fork = vec![
        bin().display().to_string(),
        "--store".into(),
        s.path(st).display().to_string(),
        "fork".into(),
        "shop@eval".into(),
        "eval-live".into(),
    ];
    let drawn = ui.explore_live(
        None,
        &shots().join("tree.png"),
        "retry",
        Some((fork, "eval-live")),
    );
    assert_eq!(drawn["liveNodes"], 6, "{drawn}");
    assert_eq!(drawn["reloaded"], false, "{drawn}");
    eprintln!("a fork made by the CLI appeared in {} ms", drawn["liveMs"]);
    assert_eq!(drawn["ready"], "1", "{drawn}");
    let mut nodes: Vec<String> = drawn["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    nodes.sort();
    let mut edges: Vec<(String, String, String)> = drawn["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap().to_string(),
                e["to"].as_str().unwrap().to_string(),
                e["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    edges.sort();
    let (want_nodes, want_edges) = graph_of(&s, st, "shop");
    assert_eq!(nodes, want_nodes);
    assert_eq!(edges, want_edges);
    assert!(
        edges.iter().filter(|e| e.2 == "merge").count() >= 2,
        "{edges:?}"
    );
    assert_eq!(drawn["searchHits"], 1, "{drawn}");
    assert_eq!(drawn["searchFaded"], 4, "{drawn}");
    assert_eq!(
        drawn["foreign"],
        serde_json::json!([]),
        "requests to another origin"
    );
    assert_eq!(drawn["pageErrors"], serde_json::json!([]));
    // The token left the address once the page had it.
    assert!(
        !drawn["address"].as_str().unwrap().contains("token"),
        "{drawn}"
    );
    eprintln!(
        "the explorer drew {} branches in {} ms",
        nodes.len(),
        drawn["renderMs"]
    );

    // Without the token, or with a wrong one, no route of the API answers.
    let doc: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/openapi.json")).unwrap();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        let concrete = concrete_route(path);
        for method in ops.as_object().unwrap().keys() {
            let m = method.to_uppercase();
            assert_eq!(ui.status_of(&m, &concrete, None), 401, "{m} {path}");
            assert_eq!(
                ui.status_of(&m, &concrete, Some("wrong")),
                401,
                "{m} {path}"
            );
        }
    }
    for path in [
        "/ui",
        "/v1/databases",
        "/v1/databases/shop/graph",
        "/v1/status",
    ] {
        assert_eq!(ui.status(path, None), 401, "{path}");
        assert_eq!(ui.status(path, Some("wrong")), 401, "{path}");
        assert_eq!(ui.status(path, Some(ui.token())), 200, "{path}");
    }
    assert_eq!(ui.status("/ui?token=wrong", None), 401);
    // The token in an address serves the page only, never the API.
    let api_by_query = format!("/v1/status?token={}", ui.token());
    assert_eq!(ui.status(&api_by_query, None), 401);
    let log = std::fs::read_to_string(&ui.log).unwrap();
    assert!(log.contains("serving"), "{log}");
    assert!(!log.contains(ui.token()), "the token was logged:\n{log}");
}

/// A thousand branches shaped as a search tree (each node forked from one of the 20 before
/// it, 25 deep at most) render completely; the time is printed, not asserted.
#[test]
fn a_thousand_branch_tree_renders_completely() {
    let s = Session::new();
    seed(&s.path("shop.db"), 50);
    s.ok(&["--store", "store", "init"]);
    s.ok(&["--store", "store", "create", "mcts", "--from", "shop.db"]);
    // Forked in process: a thousand `scion fork` processes would be most of the test.
    let scion = scion_core::Scion::attach(
        &scion_core::attach::StoreSpec::parse(s.path("store").to_str().unwrap()).unwrap(),
        Default::default(),
    )
    .unwrap()
    .scion;
    let mut names = vec![("main".to_string(), 0usize)];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..999 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let candidates: Vec<&(String, usize)> = names
            .iter()
            .rev()
            .take(20)
            .filter(|(_, d)| *d < 25)
            .collect();
        let (parent, depth) = match candidates.len() {
            0 => ("main".to_string(), 0),
            n => candidates[(x % n as u64) as usize].clone(),
        };
        let name = format!("n{i}");
        scion
            .engine()
            .fork(
                &format!("mcts@{parent}").parse().unwrap(),
                &name.parse().unwrap(),
                Default::default(),
            )
            .unwrap();
        names.push((name, depth + 1));
    }
    let ui = Ui::start_with(&s, "store", &["--writable"]);
    // With the periodic reading off, a fork made through the daemon's API reaches the page
    // by its event alone.
    let fork = vec![
        "curl".to_string(),
        "-sf".into(),
        "-X".into(),
        "POST".into(),
        "-H".into(),
        format!("Authorization: Bearer {}", ui.token()),
        "-H".into(),
        "Content-Type: application/json".into(),
        "-d".into(),
        r#"{"source": "mcts@n998", "name": "n999"}"#.into(),
        format!("{}/v1/branches", ui.base()),
    ];
    let drawn = ui.explore_live(
        Some(&format!("{}&poll=0", ui.url)),
        &shots().join("tree-1000.png"),
        "n998",
        Some((fork, "n999")),
    );
    assert_eq!(
        drawn["liveNodes"], 1001,
        "the API's fork arrived by its event"
    );
    assert_eq!(drawn["ready"], "1", "{}", drawn["error"]);
    assert_eq!(drawn["nodes"].as_array().unwrap().len(), 1001);
    assert_eq!(
        drawn["edges"].as_array().unwrap().len(),
        1000,
        "one fork edge per branch but the root"
    );
    assert_eq!(drawn["searchHits"], 1, "n998 alone");
    eprintln!(
        "1,000-branch tree (depth up to 25) drawn in {} ms",
        drawn["renderMs"]
    );

    // Counted as idle (`idle=0`), the subtrees more than four forks deep fold, and a click
    // unfolds one.
    let mut ui = ui;
    ui.steps = r#"[{"unfold": true}]"#.into();
    let folded = ui.explore_live(
        Some(&format!("{}&poll=0&idle=0", ui.url)),
        &shots().join("tree-1000-folded.png"),
        "",
        None,
    );
    let shown = folded["nodes"].as_array().unwrap().len();
    assert!(
        shown < 1001,
        "deep idle subtrees fold: {shown} of 1001 drawn"
    );
    let unfold = &folded["steps"][0];
    assert!(unfold["foldedBefore"].as_u64().unwrap() > 0);
    assert!(unfold["after"].as_u64() > unfold["before"].as_u64());
    eprintln!(
        "folded: {shown} of 1,001 branches drawn, {} folded subtrees; one click drew {} more",
        unfold["foldedBefore"],
        unfold["after"].as_u64().unwrap() - unfold["before"].as_u64().unwrap()
    );
}

/// A branch's page: its checkpoints and head history (an undo among them); actions only
/// when `scion ui --writable`, and then a fork and a merge's dry run made from the page.
#[test]
fn a_branch_page_shows_its_history_and_acts_only_when_writable() {
    let s = Session::new();
    seed(&s.path("shop.db"), 100);
    let on = |args: &[&str]| {
        let mut all = vec!["--store", "store"];
        all.extend_from_slice(args);
        s.ok(&all)
    };
    on(&["init"]);
    on(&["create", "shop", "--from", "shop.db"]);
    on(&["fork", "shop", "try"]);
    on(&["sql", "shop@try", "UPDATE items SET price = 1 WHERE id = 1"]);
    on(&["checkpoint", "shop@try", "first"]);
    on(&["sql", "shop@try", "UPDATE items SET price = 2 WHERE id = 1"]);
    on(&["undo", "shop@try"]);
    on(&[
        "sql",
        "shop@try",
        "INSERT INTO items(name, price) VALUES ('new', 3)",
    ]);
    // main changes the cell try changed, and adds a row under the id try's new row has: a
    // merge of try into main conflicts on both.
    on(&[
        "sql",
        "shop",
        "UPDATE items SET price = 9 WHERE id = 1; INSERT INTO items(name, price) VALUES ('main', 4)",
    ]);

    let mut ui = Ui::start(&s, "store");
    ui.steps = r#"[
        {"open": "try"},
        {"diff": "shop@try@fork"},
        {"sql": "SELECT id, price FROM items WHERE id IN (1, 101) ORDER BY id"},
        {"sql": "DELETE FROM items"}
    ]"#
    .into();
    let drawn = ui.explore_live(None, &shots().join("branch-read-only.png"), "", None);
    let page = &drawn["steps"][0];
    assert_eq!(page["panel"], "shop@try", "{drawn}");
    assert_eq!(page["checkpoints"], serde_json::json!(["first"]), "{drawn}");
    assert_eq!(
        page["history"],
        serde_json::json!(["commit", "undo", "commit", "commit"]),
        "{drawn}"
    );
    // The diff against the fork point: one row changed (its price cell marked), one added.
    let diff = &drawn["steps"][1];
    assert_eq!(
        diff["tables"],
        serde_json::json!(["items: +1 −0 ~1"]),
        "{drawn}"
    );
    assert_eq!(
        diff["changedCells"],
        serde_json::json!(["price"]),
        "{drawn}"
    );
    assert_eq!(
        (diff["added"].as_u64(), diff["removed"].as_u64()),
        (Some(1), Some(0))
    );
    // The SQL box reads the version, and only reads.
    let read = &drawn["steps"][2];
    assert_eq!(
        read["columns"],
        serde_json::json!(["id", "price"]),
        "{drawn}"
    );
    assert_eq!(
        read["rows"],
        serde_json::json!([["1", "1"], ["101", "3"]]),
        "{drawn}"
    );
    let write = &drawn["steps"][3];
    assert!(
        write["error"]
            .as_str()
            .unwrap_or_default()
            .contains("only reads"),
        "{drawn}"
    );
    assert!(on(&["sql", "shop@try", "SELECT count(*) FROM items"]).contains("101"));
    assert_eq!(
        page["actions"],
        serde_json::json!([]),
        "read-only: no actions"
    );
    // Read-only is the daemon's rule, not the page's: a write with the token is refused.
    let out = Command::new("curl")
        .args(["-s", "-X", "POST", "-H"])
        .arg(format!("Authorization: Bearer {}", ui.token()))
        .args(["-H", "Content-Type: application/json", "-d"])
        .arg(r#"{"source": "shop@try", "name": "sneaky"}"#)
        .arg(format!("{}/v1/branches", ui.base()))
        .output()
        .unwrap();
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        answer.contains("forbidden") && answer.contains("reads only"),
        "{answer}"
    );
    drop(ui);

    let mut ui = Ui::start_with(&s, "store", &["--writable"]);
    ui.steps = r#"[
        {"open": "try"},
        {"act": "fork", "answer": "try-2"},
        {"expect": "try-2"},
        {"open": "try"},
        {"act": "merge dry run", "answer": "main"},
        {"act": "rollback", "answer": "nowhere"}
    ]"#
    .into();
    let drawn = ui.explore_live(None, &shots().join("branch.png"), "", None);
    let steps = &drawn["steps"];
    assert_eq!(
        steps[0]["actions"],
        serde_json::json!(["fork", "checkpoint", "rollback", "merge dry run", "destroy"])
    );
    assert_eq!(steps[1]["said"], "forked shop@try as try-2", "{drawn}");
    assert_eq!(steps[2]["appeared"], "try-2");
    // The fork redrew the tree and so the open panel; the answer outlives the redraw.
    assert_eq!(steps[2]["said"], "forked shop@try as try-2", "{drawn}");
    let dry = steps[4]["said"].as_str().unwrap();
    assert!(dry.starts_with("dry run into main: conflicts"), "{dry}");
    assert!(
        dry.ends_with(
            "`scion merge shop@try --into main --renumber` keeps both (the source's get new ids)"
        ),
        "{dry}"
    );
    assert_eq!(
        steps[4]["conflicts"],
        serde_json::json!(["items:1:price", "items:101"]),
        "{drawn}"
    );
    // A refusal of the API is shown, with its hint, and nothing changes.
    assert_eq!(steps[5]["bad"], true, "{drawn}");
    assert!(
        steps[5]["said"].as_str().unwrap().contains("nowhere"),
        "{drawn}"
    );
    let branches = on(&["branches", "shop"]);
    assert!(branches.contains("try-2"), "{branches}");
}

/// With `scion serve` already running on the store, `scion ui` reuses it: its listener
/// takes the token and forwards to the daemon's socket, the event stream included, and
/// answers reads only unless --writable.
#[test]
fn the_explorer_reuses_a_running_daemon() {
    let s = Session::new();
    seed(&s.path("shop.db"), 50);
    s.ok(&["--store", "store", "init"]);
    s.ok(&["--store", "store", "create", "shop", "--from", "shop.db"]);
    s.ok(&["--store", "store", "fork", "shop", "one"]);
    let mut serve = s
        .cmd(&["--store", "store", "serve"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The daemon answers on its socket once it is up; waiting asserts nothing about time.
    let answers = || s.run(&["--store", "store", "session", "list"]).code == 0;
    let mut up = false;
    for _ in 0..500 {
        if answers() {
            up = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(up, "scion serve never answered");

    let mut ui = Ui::start(&s, "store");
    let log = std::fs::read_to_string(&ui.log).unwrap_or_default();
    ui.steps = r#"[{"open": "one"}]"#.into();
    let fork = vec![
        bin().display().to_string(),
        "--store".into(),
        s.path("store").display().to_string(),
        "fork".into(),
        "shop".into(),
        "two".into(),
    ];
    let drawn = ui.explore_live(None, &shots().join("reused.png"), "", Some((fork, "two")));
    assert_eq!(drawn["ready"], "1", "{drawn}");
    assert_eq!(drawn["liveNodes"], 3, "{drawn}");
    assert_eq!(
        drawn["steps"][0]["actions"],
        serde_json::json!([]),
        "{drawn}"
    );
    assert_eq!(ui.status("/v1/status", None), 401);
    assert_eq!(ui.status("/v1/status", Some(ui.token())), 200);
    assert_eq!(ui.status_of("POST", "/v1/gc", Some(ui.token())), 403);
    drop(ui);
    // The explorer stopped; the daemon it reused did not.
    assert!(answers(), "{log}");
    assert!(log.contains("reusing the daemon"), "{log}");
    let _ = serve.kill();
    let _ = serve.wait();
}
