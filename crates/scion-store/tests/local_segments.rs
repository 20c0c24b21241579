//! The local store's kept segment descriptors: fast ranged reads that still see the file
//! the key names now.

use scion_store::Backend;

/// Ranged reads of segments go through kept descriptors; a segment removed (or replaced)
/// behind the backend's back afterwards reads as gone (or as its new bytes), never as the
/// bytes the kept descriptor still holds.
#[test]
fn a_kept_segment_descriptor_never_hides_a_removed_or_replaced_file() {
    let dir = tempfile::tempdir().unwrap();
    let b = scion_store::LocalBackend::open(dir.path()).unwrap();
    let key = "segments/00/seg-1";
    b.put(key, b"0123456789", scion_store::PutMode::Create)
        .unwrap();
    assert_eq!(b.get_range(key, 2..5).unwrap(), b"234");
    let path = dir.path().join(key);
    std::fs::remove_file(&path).unwrap();
    let err = b.get_range(key, 2..5).unwrap_err();
    assert!(
        matches!(err, scion_store::StoreError::NotFound { .. }),
        "{err}"
    );
    // Written anew under the same key (another file): its bytes, not the old ones.
    b.put(key, b"abcdefghij", scion_store::PutMode::Create)
        .unwrap();
    assert_eq!(b.get_range(key, 2..5).unwrap(), b"cde");
    let replacement = dir.path().join("other");
    std::fs::write(&replacement, b"ABCDEFGHIJ").unwrap();
    std::fs::rename(&replacement, &path).unwrap();
    assert_eq!(b.get_range(key, 2..5).unwrap(), b"CDE");
    // Deleted through the backend: gone at once.
    b.delete(key).unwrap();
    assert!(b.get_range(key, 2..5).is_err());
}
