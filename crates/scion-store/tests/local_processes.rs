//! Compare-and-swap on the local backend holds across processes, not just threads, and a
//! holder killed with SIGKILL leaves no lock behind.

use std::process::{Command, Stdio};

use scion_store::{Backend, LocalBackend, PutMode};

const WORKER: &str = env!("CARGO_BIN_EXE_scion-store-race-worker");

#[test]
fn cross_process_compare_and_swap_race_has_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalBackend::open(dir.path().join("store")).unwrap();
    for round in 0..5 {
        let key = format!("refs/db/race{round}");
        let etag = store.put(&key, b"start", PutMode::Create).unwrap();
        let go = dir.path().join(format!("go{round}"));
        let children: Vec<_> = (0..6)
            .map(|id| {
                Command::new(WORKER)
                    .args([
                        dir.path().join("store").to_str().unwrap(),
                        &key,
                        &etag.0,
                        go.to_str().unwrap(),
                        &id.to_string(),
                    ])
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        std::fs::write(&go, b"").unwrap();
        let outputs: Vec<String> = children
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().unwrap();
                assert!(out.status.success());
                String::from_utf8(out.stdout).unwrap().trim().to_string()
            })
            .collect();
        let won = outputs.iter().filter(|o| *o == "won").count();
        let lost = outputs.iter().filter(|o| *o == "conflict").count();
        assert_eq!((won, lost), (1, 5), "round {round}: {outputs:?}");
        let (body, _) = store.get(&key).unwrap();
        assert!(String::from_utf8(body).unwrap().starts_with("worker "));
    }
}

#[test]
fn lock_of_a_killed_process_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = LocalBackend::open(&root).unwrap();
    let etag = store.put("refs/db/main", b"v1", PutMode::Create).unwrap();
    // Hold the key's lock in a child that is itself the lock holder, then SIGKILL it.
    let lock = root.join(".scion-locks/refs/db/main");
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    let script = format!(
        "exec 9>'{}' && flock 9 && echo held && exec sleep 60",
        lock.display()
    );
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "held");
    let busy = Command::new("flock")
        .args(["-n", lock.to_str().unwrap(), "true"])
        .status()
        .unwrap();
    assert!(!busy.success(), "the child really holds the lock");
    child.kill().unwrap();
    child.wait().unwrap();
    // With the holder dead, the compare-and-swap goes through at once.
    store
        .put("refs/db/main", b"v2", PutMode::Update(etag))
        .unwrap();
    assert_eq!(store.get("refs/db/main").unwrap().0, b"v2");
}
