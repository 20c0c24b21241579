//! The version graph: every writer of versions records the parents, generation and store
//! time of what it writes; moves that make no content invent no ancestry; and the walk
//! that finds common ancestors reads only the versions between the two and their base.

mod common;

use common::*;
use scion_core::format::{Locator, Parents};
use scion_core::ops::graph::CommonAncestry;
use scion_core::Scion;

fn head(scion: &Scion, b: &str) -> Locator {
    scion.engine().read_ref(&br(b)).unwrap().0.root
}

fn parents(scion: &Scion, root: &Locator) -> Parents {
    scion
        .engine()
        .root_record(root)
        .unwrap()
        .ancestry
        .expect("written with the version graph")
        .parents
}

/// Commit `sql` to `b` through its checkout and a checkpoint named `name`.
fn commit(e: &Env, b: &str, sql: &str, name: &str) -> Locator {
    let p = e.scion.checkout(&br(b), false).unwrap().path;
    exec(&p, sql);
    e.scion
        .checkpoint(&br(b), &name.parse().unwrap(), Default::default())
        .unwrap();
    head(&e.scion, b)
}

#[test]
fn every_writer_records_its_parents_and_moves_invent_none() {
    let e = env();
    create_shop(&e, 20);
    let init = head(&e.scion, "shop");
    let record = e.scion.engine().root_record(&init).unwrap();
    let a = record.ancestry.unwrap();
    assert_eq!((a.parents, a.generation), (Parents::None, 1), "an import");
    assert!(
        a.made_at_ms > 1_700_000_000_000,
        "a store time: {}",
        a.made_at_ms
    );

    let v2 = commit(&e, "shop", "UPDATE items SET price = 7 WHERE id = 1", "c1");
    assert_eq!(parents(&e.scion, &v2), Parents::One(init), "a checkpoint");
    assert_eq!(e.scion.engine().generation(&v2).unwrap(), 2);

    // Fork and rollback point refs at versions that exist; neither makes one.
    e.scion
        .engine()
        .fork(&br("shop"), &"f".parse().unwrap(), Default::default())
        .unwrap();
    assert_eq!(head(&e.scion, "shop@f"), v2);
    let v3 = commit(&e, "shop@f", "DELETE FROM items WHERE id = 2", "d1");
    assert_eq!(parents(&e.scion, &v3), Parents::One(v2));
    e.scion
        .rollback(&br("shop@f"), &"fork".parse().unwrap(), &Default::default())
        .unwrap();
    assert_eq!(
        head(&e.scion, "shop@f"),
        v2,
        "a rollback names the old version"
    );

    // Compaction rewrites the pages under a new root: its one parent is the old head.
    let v4 = commit(&e, "shop@f", "DELETE FROM items WHERE id = 3", "d2");
    e.scion.compact(&br("shop@f"), false).unwrap();
    let compacted = head(&e.scion, "shop@f");
    assert_eq!(parents(&e.scion, &compacted), Parents::One(v4));
    assert_eq!(e.scion.engine().generation(&compacted).unwrap(), 4);
}

#[test]
fn common_ancestry_follows_the_graph() {
    let e = env();
    create_shop(&e, 20);
    let v1 = head(&e.scion, "shop");
    for b in ["a", "b"] {
        e.scion
            .engine()
            .fork(&br("shop"), &b.parse().unwrap(), Default::default())
            .unwrap();
    }
    let a1 = commit(
        &e,
        "shop@a",
        "UPDATE items SET price = 1 WHERE id = 1",
        "a1",
    );
    let a2 = commit(
        &e,
        "shop@a",
        "UPDATE items SET price = 2 WHERE id = 1",
        "a2",
    );
    let b1 = commit(
        &e,
        "shop@b",
        "UPDATE items SET price = 3 WHERE id = 2",
        "b1",
    );
    let g = &e.scion;
    assert_eq!(
        g.engine().common_ancestry(&a2, &b1).unwrap().0,
        CommonAncestry::Base(v1)
    );
    assert_eq!(
        g.engine().common_ancestry(&a2, &a1).unwrap().0,
        CommonAncestry::Base(a1)
    );
    assert_eq!(
        g.engine().common_ancestry(&v1, &a2).unwrap().0,
        CommonAncestry::Base(v1)
    );
    assert_eq!(g.engine().is_ancestor(&a1, &a2).unwrap(), Some(true));
    assert_eq!(g.engine().is_ancestor(&a2, &a1).unwrap(), Some(false));
    assert_eq!(g.engine().is_ancestor(&b1, &a2).unwrap(), Some(false));

    // An import shares nothing with shop.
    let src = e.path("other.db");
    seed(&src, 3);
    g.engine()
        .create(&"other".parse().unwrap(), Some(&src))
        .unwrap();
    let other = head(g, "other");
    assert_eq!(
        g.engine().common_ancestry(&other, &a2).unwrap().0,
        CommonAncestry::Unrelated
    );
}

#[test]
fn the_walk_reads_only_what_lies_between_the_heads_and_their_base() {
    let e = env();
    create_shop(&e, 20);
    e.scion
        .engine()
        .fork(&br("shop"), &"side".parse().unwrap(), Default::default())
        .unwrap();
    // A long history before the fork point of `late`.
    for i in 0..30 {
        commit(
            &e,
            "shop",
            &format!("UPDATE items SET price = {i} WHERE id = 1"),
            &format!("m{i}"),
        );
    }
    e.scion
        .engine()
        .fork(&br("shop"), &"late".parse().unwrap(), Default::default())
        .unwrap();
    let main = commit(
        &e,
        "shop",
        "UPDATE items SET price = 100 WHERE id = 2",
        "m100",
    );
    let late = commit(
        &e,
        "shop@late",
        "UPDATE items SET price = 200 WHERE id = 3",
        "l1",
    );
    let (found, stats) = e.scion.engine().common_ancestry(&main, &late).unwrap();
    assert!(matches!(found, CommonAncestry::Base(_)));
    // The two heads, their one common parent, and nothing of the 30 versions below.
    assert!(
        stats.versions_visited <= 4,
        "visited {} versions",
        stats.versions_visited
    );
    // The old fork shares only the import: the walk goes the whole way down, once.
    let side = commit(
        &e,
        "shop@side",
        "UPDATE items SET price = 300 WHERE id = 4",
        "s1",
    );
    let (found, stats) = e.scion.engine().common_ancestry(&main, &side).unwrap();
    assert!(matches!(found, CommonAncestry::Base(_)));
    assert!(
        stats.versions_visited <= 34,
        "visited {} versions",
        stats.versions_visited
    );
}
