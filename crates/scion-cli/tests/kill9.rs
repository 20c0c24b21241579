//! SIGKILL a real `scion checkpoint` at random moments. Afterwards the branch head is the
//! old or the new version, every version exports and verifies, nothing reported committed
//! is lost, and checkpointing again captures exactly the checkout.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::*;

fn dump(path: &Path) -> String {
    sqlite(
        path,
        "SELECT count(*), total(price), group_concat(name) FROM items",
    )
}

#[test]
fn kill_9_during_checkpoint_leaves_a_consistent_store() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill -9 test seed {seed}");
    let mut rng = Rng(seed);
    let s = Session::new();
    seed_rows(&s);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    let path = std::path::PathBuf::from(s.ok(&["checkout", "shop"]).trim());
    // Measure one whole checkpoint, then kill at random points across twice that span.
    sqlite(&path, "UPDATE items SET price = 0 WHERE id = 1");
    let started = std::time::Instant::now();
    s.ok(&["checkpoint", "shop", "timing"]);
    let mut span_us = (started.elapsed().as_micros() as u64 * 4).max(100_000);
    let mut committed: Vec<(String, String)> = vec![("timing".into(), dump(&path))];
    let mut head = dump(&path);
    let mut killed = 0;
    for round in 0..24 {
        sqlite(&path, &format!("UPDATE items SET price = price + {round} WHERE id % {} = 0; INSERT INTO items(name, price) SELECT name || '-r{round}', price FROM items WHERE id % 97 = {};", 2 + round % 5, round % 97));
        let working = dump(&path);
        let name = format!("c{round}");
        let started = std::time::Instant::now();
        let mut child = s
            .cmd(&["checkpoint", "shop", &name])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if round > 0 {
            std::thread::sleep(Duration::from_micros(rng.next() % span_us));
            let _ = child.kill();
        }
        let out = child.wait_with_output().unwrap();
        if round == 0 {
            // A full checkpoint of this size of change sets the span the kills spread over.
            span_us = (started.elapsed().as_micros() as u64 * 4).max(100_000);
            eprintln!(
                "a full checkpoint took {} us",
                started.elapsed().as_micros()
            );
        }
        if out.status.success() {
            committed.push((name.clone(), working.clone()));
        } else {
            killed += 1;
        }
        // The head is the old or the new state.
        s.ok(&["export", "shop", "head.db", "--force"]);
        let now = dump(&s.path("head.db"));
        assert!(
            now == head || now == working,
            "round {round}: head is neither old nor new"
        );
        // Everything reported committed is still there and verifies.
        for (cp, expected) in &committed {
            s.ok(&["export", &format!("shop@main@{cp}"), "cp.db", "--force"]);
            assert_eq!(&dump(&s.path("cp.db")), expected, "round {round}: {cp}");
        }
        // Finishing the job always works: the checkpoint (or a retry) captures the checkout.
        let retry = s.run(&["checkpoint", "shop", &format!("{name}-retry")]);
        assert_eq!(
            retry.code, 0,
            "round {round}: retry failed: {}",
            retry.stderr
        );
        s.ok(&[
            "export",
            &format!("shop@main@{name}-retry"),
            "retry.db",
            "--force",
        ]);
        assert_eq!(dump(&s.path("retry.db")), working, "round {round}");
        head = working;
        let status = s.ok(&["--json", "status"]);
        assert!(
            status.contains("\"checkout\": \"clean\""),
            "round {round}: {status}"
        );
    }
    eprintln!("{killed} of 23 checkpoints were killed before they finished");
}

fn seed_rows(s: &Session) {
    seed(&s.path("shop.db"), 20_000);
}

/// SIGKILL a real `scion rollback` at random moments while it refreshes a clean checkout,
/// in place (versions a few pages apart) or whole (most pages changed): whatever it
/// leaves (the head moved or not, the file patched, half patched, swapped or untouched),
/// a `scion checkout` without `--force` brings the file to exactly the branch head, and
/// the file is clean afterwards.
#[test]
fn kill_9_during_an_in_place_refresh_leaves_a_file_checkout_repairs() {
    let rng_seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill -9 refresh test seed {rng_seed}");
    let mut rng = Rng(rng_seed);
    let s = Session::new();
    seed(&s.path("shop.db"), 60_000);
    s.ok(&["init"]);
    s.ok(&["create", "shop", "--from", "shop.db"]);
    s.ok(&["fork", "shop", "b"]);
    let path = std::path::PathBuf::from(s.ok(&["checkout", "shop@b"]).trim());
    sqlite(
        &path,
        "UPDATE items SET name = name || 'x' WHERE id % 9973 = 0",
    );
    s.ok(&["checkpoint", "shop@b", "moved"]);
    sqlite(&path, "UPDATE items SET price = -price");
    s.ok(&["checkpoint", "shop@b", "everything"]);
    s.ok(&["rollback", "--no-backup", "shop@b", "--to", "moved"]);
    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&path);
    let started = std::time::Instant::now();
    s.ok(&["rollback", "--no-backup", "shop@b", "--to", "fork"]);
    let span_us = (started.elapsed().as_micros() as u64 * 2).max(20_000);
    eprintln!(
        "an in-place refresh took {} us",
        started.elapsed().as_micros()
    );
    assert_eq!(inode(&path), before, "a few pages apart: patched in place");
    let (mut killed, mut cut_mid_refresh) = (0, 0);
    for round in 0..30 {
        let to = ["moved", "fork", "everything", "fork"][round % 4];
        let mut child = s
            .cmd(&["rollback", "--no-backup", "shop@b", "--to", to])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.next() % span_us));
        let _ = child.kill();
        if !child.wait_with_output().unwrap().status.success() {
            killed += 1;
        }
        if std::path::Path::new(&format!("{}.scion.refreshing", path.display())).exists() {
            cut_mid_refresh += 1;
        }
        let repaired = s.run(&["checkout", "shop@b"]);
        assert_eq!(repaired.code, 0, "round {round}: {}", repaired.stderr);
        s.ok(&["export", "shop@b", "head.db", "--force"]);
        assert_eq!(
            dump(&path),
            dump(&s.path("head.db")),
            "round {round}: the checkout is not the head"
        );
        let status = s.ok(&["--json", "status"]);
        assert!(
            !status.contains("\"checkout\": \"dirty\"") && !status.contains("unknown"),
            "round {round}: {status}"
        );
    }
    eprintln!(
        "{killed} of 30 rollbacks were killed before they finished, {cut_mid_refresh} with the file mid-refresh (marker down)"
    );
    s.ok(&["verify"]);
}
