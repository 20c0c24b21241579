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

const STALLED_WRITER: &str = env!("CARGO_BIN_EXE_scion-store-stalled-writer");

/// A child process that a failed assertion must not leave running.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A writer process stopped between its two announcements, killed with SIGKILL: the slot
/// stays unequal while it lives (readers read the object), and the first stamp after its
/// death heals the slot, with a value no earlier stamp had.
#[test]
fn a_slot_left_unequal_by_a_killed_writer_heals_at_the_next_stamp() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let reader = LocalBackend::open(dir.path()).unwrap();
    let key = "refs/shop/main";
    reader.put(key, b"v1", PutMode::Create).unwrap();
    let before = reader
        .change_stamp(key)
        .expect("a local store keeps a board");

    let mut writer = KilledOnDrop(
        std::process::Command::new(STALLED_WRITER)
            .arg(dir.path())
            .arg(key)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufReader::new(writer.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "announced");
    assert_eq!(
        reader.change_stamp(key),
        None,
        "a live writer is between its announcements: no stamp"
    );
    assert_eq!(
        reader.change_stamp(key),
        None,
        "and it is never healed over"
    );

    writer.0.kill().unwrap();
    writer.0.wait().unwrap();
    let healed = reader
        .change_stamp(key)
        .expect("the dead writer's slot heals");
    assert_ne!(
        healed, before,
        "no stamp taken before matches the healed slot"
    );
    assert_eq!(reader.change_stamp(key), Some(healed), "healed for good");
    let other = LocalBackend::open(dir.path()).unwrap();
    assert_eq!(other.change_stamp(key), Some(healed), "for every process");
    other.put(key, b"v2", PutMode::Overwrite).unwrap();
    let after = reader.change_stamp(key).unwrap();
    assert_ne!(after, healed, "writes still move the stamp");
}

/// Writers of this process hold their slot against every reader: the backend's own
/// (counted) and another backend's on the same directory (its own file description).
#[test]
fn a_live_writer_in_this_process_is_never_healed_over() {
    let dir = tempfile::tempdir().unwrap();
    let writer = LocalBackend::open(dir.path()).unwrap();
    let other = LocalBackend::open(dir.path()).unwrap();
    let key = "refs/shop/main";
    writer.put(key, b"v1", PutMode::Create).unwrap();
    assert!(other.change_stamp(key).is_some());
    writer.announce_without_end(key);
    assert_eq!(writer.change_stamp(key), None);
    assert_eq!(other.change_stamp(key), None);
    // Another write of the slot in the same process begins and ends: the stalled one
    // still holds the slot.
    writer.put(key, b"v2", PutMode::Overwrite).unwrap();
    assert_eq!(other.change_stamp(key), None);
    assert_eq!(writer.change_stamp(key), None);
}
