//! The binary formats' decoders never panic on arbitrary bytes, and checksummed frames and
//! segment footers never yield wrong content after a bit flip.

use proptest::prelude::*;
use scion_format::{
    check_frame_alone, check_segment, decode_frame, decode_frame_into, decode_frame_with_base,
    decode_segment_index, encode_frame, encode_page_frame, Ancestry, FrameKind, Locator, Node,
    PageCompression, Parents, RootRecord, SegmentBuilder, SegmentId, Slot,
};

fn loc(seg: u64, off: u64, len: u32) -> Locator {
    Locator {
        segment: SegmentId(seg),
        offset: off,
        len,
    }
}

fn sample_node() -> Node {
    let mut n = Node::empty(0, 5);
    n.slots[0] = Some(Slot::from(loc(7, 32, 100)));
    n.slots[1] = Some(Slot::from(loc(7, 132, 90)));
    n.slots[5] = Some(Slot {
        loc: loc(9, 32, 40),
        base: Some(loc(7, 222, 300)),
    });
    n
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600), key in any::<u64>()) {
        let _ = Node::decode(&bytes);
        let _ = RootRecord::decode(&bytes);
        let _ = decode_frame(&bytes, FrameKind::Page, key);
        let _ = decode_frame(&bytes, FrameKind::Node, key);
        let _ = decode_frame_with_base(&bytes, FrameKind::Page, key, Some(&bytes));
        let _ = decode_segment_index(&bytes);
        let _ = check_segment(&bytes, SegmentId(key));
        let _ = check_frame_alone(&bytes, FrameKind::Page, key);
        let _ = String::from_utf8_lossy(&bytes).parse::<Locator>();
    }

    /// A segment on its way to another store never passes its check with content other
    /// than what was sent: a bit flip in its frames, footer or trailer is refused, or (a
    /// flip lz4 decodes to the same bytes) changes no frame's content.
    #[test]
    fn bit_flips_in_a_sent_segment_are_caught(bit in any::<usize>(), page_seed in any::<u8>()) {
        let mut b = SegmentBuilder::new(SegmentId(42), 0);
        let page: Vec<u8> = (0..4096u32).map(|i| (i as u8).wrapping_mul(page_seed | 1)).collect();
        b.add(FrameKind::Page, 1, &page);
        b.add(FrameKind::Node, 0, &sample_node().encode());
        let sent = b.finish();
        prop_assert_eq!(check_segment(&sent, SegmentId(42)), Ok(2));
        prop_assert!(check_segment(&sent, SegmentId(43)).is_err());
        // From the first frame's header (offset 32) to the end.
        let span = (sent.len() - 32) * 8;
        let bit = 32 * 8 + bit % span;
        let mut bytes = sent.clone();
        bytes[bit / 8] ^= 1 << (bit % 8);
        if check_segment(&bytes, SegmentId(42)).is_ok() {
            let contents = |data: &[u8]| -> Vec<Vec<u8>> {
                let (_, _, index) = decode_segment_index(data).unwrap();
                index
                    .iter()
                    .map(|e| {
                        let frame = &data[e.offset as usize..(e.offset + e.len as u64) as usize];
                        decode_frame(frame, e.kind, e.key).unwrap().0
                    })
                    .collect()
            };
            prop_assert_eq!(contents(&bytes), contents(&sent), "bit {} changed content unseen", bit);
        }
    }

    #[test]
    fn bit_flips_in_frames_never_yield_wrong_content(bit in 0usize..(8 * 24 + 8 * 200), page_seed in any::<u8>()) {
        let page: Vec<u8> = (0..4096u32).map(|i| ((i / 64) as u8).wrapping_add(page_seed)).collect();
        let (mut frame, _) = encode_frame(FrameKind::Page, 3, &page);
        let bit = bit % (frame.len() * 8);
        frame[bit / 8] ^= 1 << (bit % 8);
        match decode_frame(&frame, FrameKind::Page, 3) {
            Err(_) => {}
            Ok((raw, _)) => prop_assert_eq!(raw, page),
        }
    }

    #[test]
    fn bit_flips_in_uncompressed_frames_never_yield_wrong_content(bit in any::<usize>(), page_seed in any::<u8>()) {
        let page: Vec<u8> = (0..4096u32).map(|i| ((i / 64) as u8).wrapping_add(page_seed)).collect();
        let (mut frame, hash, is_delta) = encode_page_frame(3, &page, None, PageCompression::Uncompressed);
        prop_assert!(!is_delta);
        prop_assert_eq!(frame.len(), 24 + page.len());
        let mut out = vec![0u8; 4096];
        prop_assert_eq!(decode_frame_into(&frame, FrameKind::Page, 3, &mut out).unwrap(), hash);
        prop_assert_eq!(&out, &page);
        let bit = bit % (frame.len() * 8);
        frame[bit / 8] ^= 1 << (bit % 8);
        // Every bit of a raw frame is read: a flip anywhere is refused (the reserved
        // header bytes aside, which no reader looks at).
        match decode_frame_into(&frame, FrameKind::Page, 3, &mut out) {
            Err(_) => {}
            Ok(_) => prop_assert_eq!(&out, &page),
        }
    }

    #[test]
    fn bit_flips_in_delta_frames_never_yield_wrong_content(bit in any::<usize>(), at in 0usize..4096) {
        let base: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut page = base.clone();
        page[at] ^= 0x5a;
        let (mut frame, _, is_delta) = encode_page_frame(9, &page, Some(&base), PageCompression::Lz4);
        prop_assert!(is_delta);
        prop_assert_eq!(decode_frame_with_base(&frame, FrameKind::Page, 9, Some(&base)).unwrap().0, page.clone());
        let bit = bit % (frame.len() * 8);
        frame[bit / 8] ^= 1 << (bit % 8);
        // Either refused, or (a flip in bits lz4 never reads) exactly the original page:
        // the content checksum makes wrong content impossible.
        match decode_frame_with_base(&frame, FrameKind::Page, 9, Some(&base)) {
            Err(_) => {}
            Ok((raw, _)) => prop_assert_eq!(raw, page),
        }
    }

    #[test]
    fn bit_flips_in_segment_footers_are_caught(bit in any::<usize>()) {
        let mut b = SegmentBuilder::new(SegmentId(42), 0);
        b.add(FrameKind::Page, 1, &[7u8; 512]);
        b.add(FrameKind::Node, 0, &sample_node().encode());
        let mut bytes = b.finish();
        let frames_end = bytes.len() - 24 - (4 + 2 * 21);
        // Flip a bit in the footer or trailer (frames are checked when read).
        let span = (bytes.len() - frames_end) * 8;
        let bit = frames_end * 8 + bit % span;
        bytes[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(decode_segment_index(&bytes).is_err());
    }

    #[test]
    fn bit_flips_in_nodes_and_roots_never_panic(bit in any::<usize>()) {
        let mut node = sample_node().encode();
        let b = bit % (node.len() * 8);
        node[b / 8] ^= 1 << (b % 8);
        let _ = Node::decode(&node);
        let root = RootRecord { fanout_bits: 5, depth: 2, page_size: 4096, page_count: 40, change_counter: 1, db_checksum: 77, node: Some(loc(1, 2, 3)), ancestry: Some(Ancestry { parents: Parents::Two(loc(4, 5, 6), loc(7, 8, 9)), generation: 3, made_at_ms: 99 }) };
        let mut raw = root.encode();
        let b = bit % (raw.len() * 8);
        raw[b / 8] ^= 1 << (b % 8);
        let _ = RootRecord::decode(&raw);
    }
}

#[test]
fn encodings_round_trip() {
    let n = sample_node();
    assert_eq!(Node::decode(&n.encode()).unwrap(), n);
    let root = RootRecord {
        fanout_bits: 5,
        depth: 2,
        page_size: 4096,
        page_count: 40,
        change_counter: 1,
        db_checksum: 77,
        node: Some(loc(1, 2, 3)),
        ancestry: None,
    };
    assert_eq!(RootRecord::decode(&root.encode()).unwrap(), root);
    for parents in [
        Parents::None,
        Parents::One(loc(4, 5, 6)),
        Parents::Two(loc(4, 5, 6), loc(7, 8, 9)),
    ] {
        let generation = if parents.is_empty() { 1 } else { 12 };
        let with = RootRecord {
            ancestry: Some(Ancestry {
                parents,
                generation,
                made_at_ms: 1_700_000_000_000,
            }),
            ..root
        };
        assert_eq!(RootRecord::decode(&with.encode()).unwrap(), with);
    }
    let l = loc(0xdead_beef, 12345, 678);
    assert_eq!(l.to_string().parse::<Locator>().unwrap(), l);
}

fn root_with(depth: u8, fanout_bits: u8, node: Option<Locator>) -> Vec<u8> {
    RootRecord {
        fanout_bits,
        depth,
        page_size: 4096,
        page_count: 3,
        change_counter: 0,
        db_checksum: 0,
        node,
        ancestry: None,
    }
    .encode()
}

#[test]
fn root_depth_beyond_what_the_fanout_needs_is_refused() {
    for fanout_bits in 1..=10u8 {
        let need = 32u8.div_ceil(fanout_bits);
        let ok = root_with(need, fanout_bits, Some(loc(1, 0, 10)));
        assert!(
            RootRecord::decode(&ok).is_ok(),
            "fan-out 2^{fanout_bits}, depth {need}"
        );
        for depth in [need + 1, 200, 255] {
            let bad = root_with(depth, fanout_bits, Some(loc(1, 0, 10)));
            assert!(
                RootRecord::decode(&bad).is_err(),
                "fan-out 2^{fanout_bits}, depth {depth}"
            );
        }
    }
}

#[test]
fn locators_whose_end_overflows_are_refused() {
    let bad = Locator {
        segment: SegmentId(1),
        offset: u64::MAX - 3,
        len: 10,
    };
    assert!(RootRecord::decode(&root_with(1, 8, Some(bad))).is_err());
    let text = format!("{:016x}:{}:{}", 1, u64::MAX - 3, 10);
    assert!(text.parse::<Locator>().is_err());
    assert!(format!("{:016x}:{}:{}", 1, u64::MAX - 10, 10)
        .parse::<Locator>()
        .is_ok());
    assert_eq!(bad.end(), u64::MAX, "end() saturates instead of panicking");
}

#[test]
fn ancestry_that_cannot_be_is_refused() {
    let mut root = RootRecord {
        fanout_bits: 5,
        depth: 1,
        page_size: 4096,
        page_count: 3,
        change_counter: 0,
        db_checksum: 0,
        node: Some(loc(1, 0, 10)),
        ancestry: Some(Ancestry {
            parents: Parents::None,
            generation: 1,
            made_at_ms: 5,
        }),
    };
    assert!(RootRecord::decode(&root.encode()).is_ok());
    let bad = [
        (
            Parents::None,
            2,
            "a version without parents is generation 1",
        ),
        (
            Parents::One(loc(2, 0, 9)),
            0,
            "generation 0 is no generation",
        ),
        (
            Parents::Two(loc(2, 0, 9), loc(2, 0, 9)),
            3,
            "a merge of a version with itself",
        ),
    ];
    for (parents, generation, why) in bad {
        root.ancestry = Some(Ancestry {
            parents,
            generation,
            made_at_ms: 5,
        });
        assert!(RootRecord::decode(&root.encode()).is_err(), "{why}");
    }
    // Three parents, written by hand (the encoder has no way to say it).
    root.ancestry = Some(Ancestry {
        parents: Parents::Two(loc(2, 0, 9), loc(3, 0, 9)),
        generation: 3,
        made_at_ms: 5,
    });
    let mut raw = root.encode();
    let count_at = raw.len() - 2 * 20 - 1;
    raw[count_at] = 3;
    raw.extend_from_within(raw.len() - 20..);
    assert!(RootRecord::decode(&raw).is_err(), "three parents");
}
