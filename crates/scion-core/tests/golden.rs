//! Golden files pin format version 1: today's encoders must produce these exact bytes, and
//! a store written by an earlier binary must read back. (The binary formats' own encodings,
//! frames, nodes, root records and segments, are pinned in `scion-format`'s tests.) A format change regenerates both
//! as a new directory with `SCION_GOLDEN_WRITE=1 cargo test --test golden`. An encoder
//! that writes other bytes of the same format (another lz4 implementation) regenerates
//! only the pinned encodings (`... --test golden binary_encodings`): the store, written
//! by the earlier encoder, must still read back.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use scion_core::checkout::{Fingerprint, Sidecar};
use scion_core::format::{Locator, SegmentId};
use scion_core::{ClonePolicy, DbName, Scion, ScionOptions};
use scion_store::LocalBackend;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v1")
}

fn writing() -> bool {
    std::env::var("SCION_GOLDEN_WRITE").as_deref() == Ok("1")
}

fn pin(name: &str, bytes: &[u8]) {
    let path = golden_dir().join(name);
    if writing() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        return;
    }
    let want = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("golden file {} missing: {e}", path.display()));
    assert!(
        want == bytes,
        "{name}: encoder output differs from the pinned format"
    );
}

fn loc(seg: u64, off: u64, len: u32) -> Locator {
    Locator {
        segment: SegmentId(seg),
        offset: off,
        len,
    }
}

#[test]
fn the_sidecar_encoding_is_pinned() {
    let sidecar = Sidecar {
        page_size: 4096,
        root: loc(0x4444, 2048, 68),
        version: 3,
        fingerprint: Fingerprint {
            size: 8192,
            mtime_ns: 1_700_000_000_000_000_000,
            inode: 42,
            boot: 0,
            wal_size: 0,
            wal_mtime_ns: 0,
            ctime_ns: 1_700_000_001_000_000_000,
        },
        stamp_ns: 1_700_000_002_000_000_000,
        hashes: vec![0x1111, 0x2222],
    };
    // Sidecar format 3 adds the file's ctime; format 2 added a header checksum. Records
    // written as formats 1 and 2 still read, with a ctime no file has (they prove nothing
    // until the file is hashed again).
    pin("sidecar-v3.bin", &sidecar.encode());
    assert_eq!(
        Sidecar::decode(&std::fs::read(golden_dir().join("sidecar-v3.bin")).unwrap()).unwrap(),
        sidecar
    );
    let mut older = sidecar.clone();
    older.fingerprint.ctime_ns = i64::MIN;
    for name in ["sidecar.bin", "sidecar-v2.bin"] {
        assert_eq!(
            Sidecar::decode(&std::fs::read(golden_dir().join(name)).unwrap()).unwrap(),
            older,
            "{name}"
        );
    }
}

/// A whole store written by this format version: refs, checkpoints, segments with full
/// and delta pages, a fork and a grown tree.
#[test]
fn a_version_1_store_reads_back() {
    let store = golden_dir().join("store");
    let expected_dir = golden_dir().join("expected");
    if writing() {
        let _ = std::fs::remove_dir_all(&store);
        let _ = std::fs::remove_dir_all(&expected_dir);
        let work = tempfile::tempdir().unwrap();
        let s = Scion::init(
            Arc::new(LocalBackend::open(&store).unwrap()),
            "golden",
            ScionOptions::new(work.path().join("co"), ClonePolicy::Auto),
            Default::default(),
        )
        .unwrap();
        let src = work.path().join("src.db");
        seed(&src, 120);
        s.engine()
            .create(&DbName::new("shop").unwrap(), Some(&src))
            .unwrap();
        let p = s.checkout(&br("shop"), false).unwrap().path;
        exec(&p, "UPDATE items SET price = 1 WHERE id = 3;");
        s.checkpoint(&br("shop"), &"v1".parse().unwrap(), Default::default())
            .unwrap();
        s.engine()
            .fork(&br("shop"), &"big".parse().unwrap(), Default::default())
            .unwrap();
        let p = s.checkout(&br("shop@big"), false).unwrap().path;
        exec(&p, "INSERT INTO items(name, price) SELECT name || '-copy', price FROM items; CREATE TABLE notes(t TEXT); INSERT INTO notes VALUES (zeroblob(300000));");
        s.checkpoint(
            &br("shop@big"),
            &"grown".parse().unwrap(),
            Default::default(),
        )
        .unwrap();
        std::fs::create_dir_all(&expected_dir).unwrap();
        for t in [
            "shop",
            "shop@main@v1",
            "shop@main@init",
            "shop@big",
            "shop@big@fork",
        ] {
            let out = work.path().join(format!("{t}.db"));
            s.export(&t.parse().unwrap(), &out, false).unwrap();
            std::fs::write(expected_dir.join(format!("{t}.dump")), dump(&out)).unwrap();
        }
        // Local-backend housekeeping directories are not part of the format.
        let _ = std::fs::remove_dir_all(store.join(".scion-tmp"));
        let _ = std::fs::remove_dir_all(store.join(".scion-locks"));
        return;
    }
    assert!(
        store.join("scion.json").exists(),
        "golden store missing at {}",
        store.display()
    );
    // Read from a copy: opening creates housekeeping directories.
    let work = tempfile::tempdir().unwrap();
    let copy = work.path().join("store");
    copy_dir(&store, &copy);
    let s = Scion::open(
        Arc::new(LocalBackend::open(&copy).unwrap()),
        "golden",
        ScionOptions::new(work.path().join("co"), ClonePolicy::Auto),
    )
    .unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(&expected_dir).unwrap() {
        let path = entry.unwrap().path();
        let target = path.file_stem().unwrap().to_str().unwrap().to_string();
        let out = work.path().join(format!("{target}.db"));
        s.export(&target.parse().unwrap(), &out, false).unwrap();
        assert_eq!(
            dump(&out),
            std::fs::read_to_string(&path).unwrap(),
            "{target}"
        );
        checked += 1;
    }
    assert_eq!(checked, 5);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

/// Ref schema 3 (with its head history) and history objects: today's encoders write these
/// exact bytes, and they decode to the same values.
#[test]
fn ref_schema_3_and_history_objects_are_pinned() {
    use scion_core::clock::StoreTime;
    use scion_core::history::{DestroyedBranch, HeadEntry, HeadOp, HistoryObject};
    use scion_core::refs::{Parent, Ref};

    let at = |ms: u64| {
        StoreTime::from_store_clock(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
    };
    let entry = |seq: u64, op: HeadOp, old: Option<Locator>, new: Option<Locator>| HeadEntry {
        seq,
        op,
        old,
        old_version: seq + 1,
        new,
        new_version: seq + 2,
        at: at(1_700_000_000_000 + seq),
        holder: "host:1a2b3c4d:4026531836/812".into(),
        by: None,
        detail: (op == HeadOp::Rollback).then(|| "shop@try@v1".to_string()),
        undoes: (op == HeadOp::Undo).then_some(seq - 1),
        merged: None,
    };
    let (a, b) = (loc(0x1111, 32, 68), loc(0x2222, 32, 68));
    let r = Ref {
        schema: scion_core::refs::REF_SCHEMA,
        root: b,
        version: 5,
        page_size: 4096,
        page_count: 2,
        fork_root: a,
        fork_version: 2,
        init_root: a,
        parent: Some(Parent {
            branch: "main".into(),
            version: 2,
            checkpoint: None,
        }),
        protected: false,
        created_at: at(1_700_000_000_000),
        touched_at: at(1_700_000_000_004),
        epoch: 0,
        lease: None,
        ttl_secs: None,
        destroying_since: None,
        safety: None,
        meta: Default::default(),
        history: vec![
            entry(2, HeadOp::Rollback, Some(a), Some(b)),
            entry(3, HeadOp::Undo, Some(b), Some(a)),
        ],
        history_before: Some("history/shop/try/1700000000001-0000000001-0a1b2c3d".into()),
        checkouts: Vec::new(),
        nonce: Default::default(),
    };
    pin("ref-v3.json", &r.encode());
    let back = Ref::decode(
        &std::fs::read(golden_dir().join("ref-v3.json")).unwrap(),
        "refs/shop/try",
    )
    .unwrap();
    assert_eq!(back, r);

    let object = HistoryObject {
        schema: scion_core::history::HISTORY_SCHEMA,
        branch: "shop@try".into(),
        previous: None,
        entries: vec![
            entry(1, HeadOp::Commit, Some(a), Some(b)),
            entry(4, HeadOp::Destroy, Some(a), None),
        ],
        destroyed: Some(DestroyedBranch {
            fork_root: a,
            fork_version: 2,
            init_root: a,
            parent: None,
            protected: true,
            ttl_secs: Some(3600),
            meta: [("by".to_string(), "agent-7".to_string())].into(),
        }),
    };
    pin("history-object.json", &object.encode());
    let back = HistoryObject::decode(
        &std::fs::read(golden_dir().join("history-object.json")).unwrap(),
        "history/shop/try/x",
    )
    .unwrap();
    assert_eq!(back, object);
}

/// Ref schema 4 (a branch with a writable checkout): today's encoder writes these exact
/// bytes; the same ref without a checkout is still written as schema 3.
#[test]
fn ref_schema_4_with_checkouts_is_pinned() {
    use scion_core::clock::StoreTime;
    use scion_core::refs::{CheckoutClaim, Ref};

    let at = |ms: u64| {
        StoreTime::from_store_clock(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
    };
    let a = loc(0x1111, 32, 68);
    let mut r = Ref {
        schema: scion_core::refs::REF_SCHEMA,
        root: a,
        version: 1,
        page_size: 4096,
        page_count: 2,
        fork_root: a,
        fork_version: 1,
        init_root: a,
        parent: None,
        protected: true,
        created_at: at(1_700_000_000_000),
        touched_at: at(1_700_000_000_000),
        epoch: 0,
        lease: None,
        ttl_secs: None,
        destroying_since: None,
        safety: None,
        meta: Default::default(),
        history: Vec::new(),
        history_before: None,
        checkouts: vec![CheckoutClaim {
            host: "build-7".into(),
            path: "/home/me/.scion/checkouts/shop/main.db".into(),
            since: at(1_700_000_000_002),
        }],
        nonce: Default::default(),
    };
    pin("ref-v4.json", &r.encode());
    let back = Ref::decode(
        &std::fs::read(golden_dir().join("ref-v4.json")).unwrap(),
        "refs/shop/main",
    )
    .unwrap();
    assert_eq!(back, r);
    r.checkouts.clear();
    let without: serde_json::Value = serde_json::from_slice(&r.encode()).unwrap();
    assert_eq!(without["schema"], 3, "{without}");
}

/// Ref schema 5 and history schema 2 (a merge entry in the history): today's encoder
/// writes these exact bytes; without the merge entry the same ref is written as schema 3
/// and the same history object as schema 1.
#[test]
fn ref_schema_5_and_history_schema_2_with_merges_are_pinned() {
    use scion_core::clock::StoreTime;
    use scion_core::history::{HeadEntry, HeadOp, HistoryObject, MergedFrom};
    use scion_core::refs::Ref;

    let at = |ms: u64| {
        StoreTime::from_store_clock(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
    };
    let (a, b, c) = (
        loc(0x1111, 32, 68),
        loc(0x2222, 32, 68),
        loc(0x3333, 32, 68),
    );
    let merge = HeadEntry {
        seq: 1,
        op: HeadOp::Merge,
        old: Some(a),
        old_version: 1,
        new: Some(c),
        new_version: 2,
        at: at(1_700_000_000_001),
        holder: "host:1a2b3c4d:4026531836/812".into(),
        by: None,
        detail: Some("shop@feature".into()),
        undoes: None,
        merged: Some(MergedFrom {
            branch: "feature".into(),
            root: b,
            version: 3,
            base: a,
            renumbered: Vec::new(),
        }),
    };
    let mut r = Ref {
        schema: scion_core::refs::REF_SCHEMA,
        root: c,
        version: 2,
        page_size: 4096,
        page_count: 2,
        fork_root: a,
        fork_version: 1,
        init_root: a,
        parent: None,
        protected: false,
        created_at: at(1_700_000_000_000),
        touched_at: at(1_700_000_000_001),
        epoch: 0,
        lease: None,
        ttl_secs: None,
        destroying_since: None,
        safety: None,
        meta: Default::default(),
        history: vec![merge.clone()],
        history_before: None,
        checkouts: Vec::new(),
        nonce: Default::default(),
    };
    pin("ref-v5.json", &r.encode());
    let back = Ref::decode(
        &std::fs::read(golden_dir().join("ref-v5.json")).unwrap(),
        "refs/shop/main",
    )
    .unwrap();
    assert_eq!(back, r);
    let mut object = HistoryObject {
        schema: scion_core::history::HISTORY_SCHEMA,
        branch: "shop@main".into(),
        previous: None,
        entries: vec![merge],
        destroyed: None,
    };
    pin("history-object-v2.json", &object.encode());
    let back = HistoryObject::decode(
        &std::fs::read(golden_dir().join("history-object-v2.json")).unwrap(),
        "history/shop/main/x",
    )
    .unwrap();
    assert_eq!(back, object);

    r.history[0].op = HeadOp::Commit;
    r.history[0].merged = None;
    let without: serde_json::Value = serde_json::from_slice(&r.encode()).unwrap();
    assert_eq!(without["schema"], 3, "{without}");
    object.entries = r.history.clone();
    let without: serde_json::Value = serde_json::from_slice(&object.encode()).unwrap();
    assert_eq!(without["schema"], 1, "{without}");
}
