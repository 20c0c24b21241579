//! The local store's change board: a reader's stamp of a ref stays equal exactly while
//! nothing writes it, across backends (processes) on one directory.

use scion_store::{Backend, LocalBackend, PutMode};

#[test]
fn a_stamp_changes_when_another_backend_writes_the_key_and_not_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let reader = LocalBackend::open(dir.path()).unwrap();
    let writer = LocalBackend::open(dir.path()).unwrap();
    let key = "refs/shop/main";
    let etag = writer.put(key, b"v1", PutMode::Create).unwrap();
    let before = reader
        .change_stamp(key)
        .expect("a local store keeps a board");
    assert_eq!(reader.change_stamp(key), Some(before), "nothing wrote it");
    // A segment write is never announced: segments do not change once written.
    writer
        .put("segments/00/abc", b"frames", PutMode::Create)
        .unwrap();
    assert_eq!(reader.change_stamp(key), Some(before));
    writer.put(key, b"v2", PutMode::Update(etag)).unwrap();
    let after = reader.change_stamp(key).unwrap();
    assert_ne!(after, before, "a write of the ref moves its stamp");
    // A failed compare-and-swap still counts as a write that began: the stamp moves.
    assert!(writer
        .put(
            key,
            b"v3",
            PutMode::Update(scion_store::ETag("stale".to_string()))
        )
        .is_err());
    assert_ne!(reader.change_stamp(key), Some(after));
    let deleted = reader.change_stamp(key);
    writer.delete(key).unwrap();
    assert_ne!(reader.change_stamp(key), deleted);
}

#[test]
fn the_board_is_no_object_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let b = LocalBackend::open(dir.path()).unwrap();
    b.put("refs/a/main", b"x", PutMode::Create).unwrap();
    let keys: Vec<String> = b.list("").unwrap().into_iter().map(|m| m.key).collect();
    assert_eq!(keys, vec!["refs/a/main".to_string()]);
    assert!(dir.path().join(".scion-changes").exists());
}
