//! The decoders of what scion-core stores itself (sidecars, refs, checkpoints, names and
//! targets) never panic on arbitrary bytes, and a sidecar refuses any bit flip. (The binary
//! formats' decoders are fuzzed in `scion-format`'s tests.)

use proptest::prelude::*;
use scion_core::checkout::{Fingerprint, Sidecar};
use scion_core::format::{Locator, SegmentId};
use scion_core::refs::{Checkpoint, Ref};
use scion_core::{BranchName, Target};

fn loc(seg: u64, off: u64, len: u32) -> Locator {
    Locator {
        segment: SegmentId(seg),
        offset: off,
        len,
    }
}

fn sample_sidecar() -> Sidecar {
    Sidecar {
        page_size: 4096,
        root: loc(3, 1000, 68),
        version: 4,
        fingerprint: Fingerprint {
            size: 8192,
            mtime_ns: 5,
            inode: 6,
            boot: 0,
            wal_size: 0,
            wal_mtime_ns: 0,
            ctime_ns: 7,
        },
        stamp_ns: 99,
        hashes: vec![1, 2],
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = Sidecar::decode(&bytes);
        let _ = Ref::decode(&bytes, "refs/x/y");
        let _ = Checkpoint::decode(&bytes, "checkpoints/x/y/z");
        let text = String::from_utf8_lossy(&bytes);
        let _ = text.parse::<Target>();
        let _ = BranchName::new(&text);
    }

    #[test]
    fn bit_flips_in_sidecars_are_always_caught(bit in any::<usize>()) {
        let mut bytes = sample_sidecar().encode();
        let bit = bit % (bytes.len() * 8);
        bytes[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(Sidecar::decode(&bytes).is_err());
    }
}

#[test]
fn a_sidecar_round_trips() {
    let s = sample_sidecar();
    assert_eq!(Sidecar::decode(&s.encode()).unwrap(), s);
}
