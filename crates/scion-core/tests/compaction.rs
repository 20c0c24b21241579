//! Compaction of fragmented heads: `compact --scattered` rewrites only the pages small
//! commits left in small segments, keeps the content, and leaves a head it cannot improve
//! alone; the janitor's sweep compacts exactly the fragmented, idle branches.

mod common;

use std::time::Duration;

use common::*;
use scion_core::ops::compact::{CompactScope, FragmentationPolicy};
use scion_core::DbName;

/// `shop` seeded with `rows` rows, then `commits` checkpoints of one scattered row each.
fn fragmented_shop(e: &Env, rows: usize, commits: usize) {
    let src = e.path("seed.db");
    seed(&src, rows);
    e.scion
        .engine()
        .create(&DbName::new("shop").unwrap(), Some(&src))
        .unwrap();
    let path = e.scion.checkout(&br("shop"), false).unwrap().path;
    for i in 0..commits {
        let id = 1 + (i * 7919) % rows;
        exec(
            &path,
            &format!("UPDATE items SET price = price + 1 WHERE id = {id}"),
        );
        e.scion
            .checkpoint(
                &br("shop"),
                &format!("c{i}").parse().unwrap(),
                Default::default(),
            )
            .unwrap();
    }
}

#[test]
fn scattered_compaction_rewrites_only_the_small_segments_pages_and_keeps_the_content() {
    let e = env();
    fragmented_shop(&e, 20_000, 30);
    let before = fragmentation(&e, "shop");
    assert!(
        before.small_segments >= 30,
        "30 one-row commits leave at least 30 small segments: {before:?}"
    );
    assert!(before.scattered_pages < before.pages / 4, "{before:?}");
    let content = e.dump_target(&e.scion, "shop");

    let r = e
        .scion
        .compact_scope(&br("shop"), false, CompactScope::Scattered)
        .unwrap();
    assert_eq!(r.pages_rewritten, before.scattered_pages);
    assert_eq!(r.before, before);
    let after = fragmentation(&e, "shop");
    assert_eq!(after.pages, before.pages);
    assert!(after.small_segments <= 1, "{after:?}");
    assert_eq!(e.dump_target(&e.scion, "shop"), content);
    // The checkpoints still read as they did.
    assert_eq!(
        e.dump_target(&e.scion, "shop@main@c29"),
        content,
        "the last checkpoint holds the same content"
    );

    // Against a full compaction of the same head: a fraction of the bytes.
    let full = e.scion.compact(&br("shop"), false).unwrap();
    assert_eq!(full.pages_rewritten, full.pages);
    assert!(
        r.store_bytes_written * 4 < full.store_bytes_written,
        "scattered {} B, full {} B",
        r.store_bytes_written,
        full.store_bytes_written
    );
    assert_eq!(e.dump_target(&e.scion, "shop"), content);
}

#[test]
fn a_head_with_at_most_one_small_segment_is_left_alone() {
    let e = env();
    fragmented_shop(&e, 20_000, 0);
    let (_, etag) = e.scion.engine().read_ref(&br("shop")).unwrap();
    let r = e
        .scion
        .compact_scope(&br("shop"), false, CompactScope::Scattered)
        .unwrap();
    assert_eq!(r.pages_rewritten, 0);
    assert_eq!(r.store_bytes_written, 0);
    assert_eq!(
        e.scion.engine().read_ref(&br("shop")).unwrap().1,
        etag,
        "the head did not move"
    );

    // A tiny database lives in one small segment: nothing to gain, nothing written.
    let tiny = e.path("tiny.db");
    seed(&tiny, 3);
    e.scion
        .engine()
        .create(&DbName::new("tiny").unwrap(), Some(&tiny))
        .unwrap();
    let f = fragmentation(&e, "tiny");
    assert_eq!((f.small_segments, f.scattered_pages), (1, f.pages));
    let r = e
        .scion
        .compact_scope(&br("tiny"), false, CompactScope::Scattered)
        .unwrap();
    assert_eq!(r.pages_rewritten, 0);
}

#[test]
fn the_sweep_compacts_fragmented_idle_branches_only_and_then_has_nothing_to_do() {
    let e = env();
    fragmented_shop(&e, 20_000, 30);
    // A second database, not fragmented.
    let calm = e.path("calm.db");
    seed(&calm, 20_000);
    e.scion
        .engine()
        .create(&DbName::new("calm").unwrap(), Some(&calm))
        .unwrap();
    let content = e.dump_target(&e.scion, "shop");

    // Heads younger than the idle window are not touched.
    let busy = FragmentationPolicy {
        scattered_share: 0.0001,
        idle: Duration::from_secs(3600),
    };
    let sweep = e
        .scion
        .compact_fragmented(busy, &mut Default::default())
        .unwrap();
    assert!(sweep.compacted.is_empty(), "{sweep:?}");

    let policy = FragmentationPolicy {
        scattered_share: 0.0001,
        idle: Duration::ZERO,
    };
    // A share above what the head has: nothing.
    let strict = FragmentationPolicy {
        scattered_share: 0.9,
        ..policy
    };
    assert!(e
        .scion
        .compact_fragmented(strict, &mut Default::default())
        .unwrap()
        .compacted
        .is_empty());

    let mut judged = std::collections::HashMap::new();
    let sweep = e.scion.compact_fragmented(policy, &mut judged).unwrap();
    assert_eq!(sweep.branches, 2);
    assert_eq!(
        judged.keys().collect::<Vec<_>>(),
        ["calm@main"],
        "the head found not fragmented is remembered"
    );
    let names: Vec<String> = sweep
        .compacted
        .iter()
        .map(|c| c.branch.to_string())
        .collect();
    assert_eq!(names, ["shop@main"]);
    assert_eq!(e.dump_target(&e.scion, "shop"), content);

    let again = e.scion.compact_fragmented(policy, &mut judged).unwrap();
    assert!(again.compacted.is_empty(), "stable: {again:?}");

    // A checkout with unsaved changes is left for a later sweep, named in `skipped`.
    let path = e.scion.checkout(&br("shop"), false).unwrap().path;
    for i in 0..3 {
        exec(
            &path,
            &format!("UPDATE items SET price = 0 WHERE id = {}", 1 + i * 5000),
        );
        e.scion
            .checkpoint(
                &br("shop"),
                &format!("d{i}").parse().unwrap(),
                Default::default(),
            )
            .unwrap();
    }
    exec(&path, "UPDATE items SET price = -1 WHERE id = 7");
    let sweep = e.scion.compact_fragmented(policy, &mut judged).unwrap();
    assert!(sweep.compacted.is_empty(), "{sweep:?}");
    assert_eq!(sweep.skipped.len(), 1, "{sweep:?}");
    assert!(sweep.skipped[0].starts_with("shop@main: "), "{sweep:?}");
}

/// How the head of `branch` lies in the store.
fn fragmentation(e: &Env, branch: &str) -> scion_core::ops::compact::Fragmentation {
    let (r, _) = e.scion.engine().read_ref(&br(branch)).unwrap();
    e.scion.engine().fragmentation(&r.root).unwrap()
}
