//! The local store leaves nothing behind for deleted keys (no lock files, no empty
//! directories), even while other threads create and delete keys in the same directories;
//! its private files are the temp and lock directories and the change board.

use std::path::Path;
use std::sync::Arc;

use scion_store::{Backend, LocalBackend, PutMode, StoreError};

fn files_and_dirs(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            out.push(p.strip_prefix(root).unwrap().display().to_string());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn deleting_keys_leaves_no_lock_files_or_empty_directories() {
    let dir = tempfile::tempdir().unwrap();
    let b = LocalBackend::open(dir.path()).unwrap();
    let e = b.put("refs/shop/try-1", b"v1", PutMode::Create).unwrap();
    b.put("refs/shop/try-1", b"v2", PutMode::Update(e)).unwrap();
    b.put("checkpoints/shop/try-1/a", b"c", PutMode::Create)
        .unwrap();
    b.put("segments/00000000000000aa", b"s", PutMode::Create)
        .unwrap();
    b.put("refs/shop/main", b"m", PutMode::Create).unwrap();
    let (_, etag) = b.get("refs/shop/try-1").unwrap();
    b.delete_if("refs/shop/try-1", &etag).unwrap();
    b.delete("checkpoints/shop/try-1/a").unwrap();
    b.delete("segments/00000000000000aa").unwrap();
    b.delete("segments/00000000000000bb").unwrap(); // never existed
    assert_eq!(
        files_and_dirs(dir.path()),
        vec![
            ".scion-changes",
            ".scion-locks",
            ".scion-tmp",
            "refs",
            "refs/shop",
            "refs/shop/main"
        ],
        "only the live key remains"
    );
    assert_eq!(b.get("refs/shop/main").unwrap().0, b"m");
}

#[test]
fn writers_survive_deletes_removing_their_directories() {
    let dir = tempfile::tempdir().unwrap();
    let b = Arc::new(LocalBackend::open(dir.path()).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let b = b.clone();
            std::thread::spawn(move || {
                for i in 0..300 {
                    // Every thread works in the same directories, so each delete may empty
                    // (and remove) a directory another thread is about to write into.
                    let key = format!("refs/db/t{t}-{i}");
                    let e = b.put(&key, b"a", PutMode::Create).unwrap();
                    let e = b.put(&key, b"b", PutMode::Update(e)).unwrap();
                    assert!(matches!(
                        b.put(&key, b"c", PutMode::Create),
                        Err(StoreError::AlreadyExists { .. })
                    ));
                    assert_eq!(b.get(&key).unwrap().0, b"b");
                    b.delete_if(&key, &e).unwrap();
                    assert!(matches!(b.get(&key), Err(StoreError::NotFound { .. })));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        files_and_dirs(dir.path()),
        vec![".scion-changes", ".scion-locks", ".scion-tmp"]
    );
}
