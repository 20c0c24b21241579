//! Golden files pin the binary formats' version 1: today's encoders must produce these
//! exact bytes, and the pinned bytes decode to what was encoded. A format change writes a
//! new directory with `SCION_GOLDEN_WRITE=1 cargo test -p scion-format --test golden`.
//! (The sidecar, refs and a whole store written by an earlier binary are pinned in
//! `scion-core`'s tests.)

use std::path::{Path, PathBuf};

use scion_format::{
    encode_frame, encode_page_frame, Ancestry, FrameKind, Locator, Node, PageCompression, Parents,
    RootRecord, SegmentBuilder, SegmentId, Slot,
};

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

fn page(seed: u8) -> Vec<u8> {
    (0..4096u32)
        .map(|i| ((i / 16) as u8).wrapping_mul(seed))
        .collect()
}

#[test]
fn binary_encodings_are_pinned() {
    let mut node = Node::empty(0, 5);
    node.slots[0] = Some(Slot::from(loc(0x1111, 32, 300)));
    node.slots[1] = Some(Slot::from(loc(0x1111, 332, 280)));
    node.slots[31] = Some(Slot {
        loc: loc(0x2222, 32, 50),
        base: Some(loc(0x1111, 612, 400)),
    });
    pin("node.bin", &node.encode());
    assert_eq!(
        Node::decode(&std::fs::read(golden_dir().join("node.bin")).unwrap()).unwrap(),
        node
    );

    let root = RootRecord {
        fanout_bits: 5,
        depth: 2,
        page_size: 4096,
        page_count: 33,
        change_counter: 7,
        db_checksum: 0x0123_4567_89ab_cdef,
        node: Some(loc(0x3333, 1024, 120)),
        ancestry: None,
    };
    pin("root.bin", &root.encode());
    assert_eq!(
        RootRecord::decode(&std::fs::read(golden_dir().join("root.bin")).unwrap()).unwrap(),
        root
    );
    // Root format 2: the version graph (a merge's two parents, a generation, a time).
    let merge_root = RootRecord {
        ancestry: Some(Ancestry {
            parents: Parents::Two(loc(0x4444, 2048, 96), loc(0x5555, 64, 113)),
            generation: 42,
            made_at_ms: 1_765_000_000_123,
        }),
        ..root
    };
    pin("root-v2.bin", &merge_root.encode());
    assert_eq!(
        RootRecord::decode(&std::fs::read(golden_dir().join("root-v2.bin")).unwrap()).unwrap(),
        merge_root
    );

    pin(
        "frame-page.bin",
        &encode_frame(FrameKind::Page, 5, &page(3)).0,
    );
    let mut changed = page(3);
    changed[100] = 0xff;
    let (delta, _, is_delta) = encode_page_frame(5, &changed, Some(&page(3)), PageCompression::Lz4);
    assert!(is_delta);
    pin("frame-delta.bin", &delta);
    // A store made with `--page-compression none` keeps full pages raw (codec 0).
    let (raw, _, is_delta) = encode_page_frame(5, &page(3), None, PageCompression::Uncompressed);
    assert!(!is_delta);
    pin("frame-page-raw.bin", &raw);

    let mut seg = SegmentBuilder::new(SegmentId(0xabcdef), 1_700_000_000_000);
    seg.add(FrameKind::Page, 1, &page(1));
    seg.add(FrameKind::Node, 0, &node.encode());
    seg.add(FrameKind::Root, 0, &root.encode());
    pin("segment.bin", &seg.finish());
}
