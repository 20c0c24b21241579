//! A clean checkout of an older version is refreshed by rewriting only the pages that
//! differ (same inode, same bytes as a fresh materialization); a large change still
//! replaces the file whole; and a refresh cut short leaves a file the next checkout
//! replaces without `--force`.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::*;
use scion_core::ops::lifecycle::MoveOptions;
use scion_core::{CheckoutAction, CheckoutState, DbName, Target};

fn no_backup() -> MoveOptions {
    MoveOptions {
        no_backup: true,
        ..MoveOptions::default()
    }
}

/// The checkout holds exactly what an export of `target` holds.
fn holds(e: &Env, checkout: &Path, target: &str) {
    let out = e.path(&format!("expected-{}.db", unique()));
    let t: Target = target.parse().unwrap();
    e.scion.export(&t, &out, false).unwrap();
    assert!(
        bytes_without_journal_mode(checkout) == bytes_without_journal_mode(&out),
        "the checkout differs from {target}"
    );
    std::fs::remove_file(&out).unwrap();
}

fn inode(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().ino()
}

/// `shop@b` forked from `shop`, checked out, changed in a few rows and checkpointed as
/// `moved`; returns the checkout's path.
fn moved_branch(e: &Env) -> std::path::PathBuf {
    let src = e.path("shop.db");
    seed(&src, 20_000);
    e.scion
        .engine()
        .create(&DbName::new("shop").unwrap(), Some(&src))
        .unwrap();
    e.scion
        .engine()
        .fork(&br("shop"), &"b".parse().unwrap(), Default::default())
        .unwrap();
    let path = e.scion.checkout(&br("shop@b"), false).unwrap().path;
    exec(
        &path,
        "UPDATE items SET price = -price WHERE id % 4001 = 0;
         INSERT INTO items(name, price) SELECT name || '-more', price FROM items WHERE id < 300;",
    );
    e.scion
        .checkpoint(&br("shop@b"), &"moved".parse().unwrap(), Default::default())
        .unwrap();
    path
}

#[test]
fn a_rollback_onto_a_nearby_version_rewrites_the_changed_pages_in_place() {
    let e = env();
    let path = moved_branch(&e);
    let b = br("shop@b");
    let before = inode(&path);
    let pages_before = std::fs::metadata(&path).unwrap().len();

    // Back to the fork point: fewer pages, a few changed.
    let report = e
        .scion
        .rollback(&b, &"fork".parse().unwrap(), &no_backup())
        .unwrap();
    assert!(report.checkout.is_some());
    assert_eq!(inode(&path), before, "the file was replaced, not patched");
    assert!(std::fs::metadata(&path).unwrap().len() < pages_before);
    holds(&e, &path, "shop@b");
    assert_eq!(
        e.scion.checkout(&b, false).unwrap().action,
        CheckoutAction::Reused
    );

    // And forward again: the file grows back.
    e.scion
        .rollback(&b, &"moved".parse().unwrap(), &no_backup())
        .unwrap();
    assert_eq!(inode(&path), before);
    holds(&e, &path, "shop@b");
    assert_eq!(dump(&path), e.dump_target(&e.scion, "shop@b@moved"));

    // A stale clean checkout met by a plain checkout is patched too.
    let main = e.scion.checkout(&br("shop"), false).unwrap().path;
    let main_inode = inode(&main);
    e.scion
        .promote(
            &b,
            &"main".parse().unwrap(),
            // main is protected: promoting onto it takes force (its checkout is clean).
            &MoveOptions {
                force: true,
                ..MoveOptions::default()
            },
        )
        .unwrap();
    assert_eq!(inode(&main), main_inode);
    holds(&e, &main, "shop");
    assert_eq!(
        e.scion.checkout(&br("shop"), false).unwrap().action,
        CheckoutAction::Reused
    );
}

#[test]
fn a_large_change_replaces_the_file_whole() {
    let e = env();
    let path = moved_branch(&e);
    let b = br("shop@b");
    exec(&path, "UPDATE items SET name = name || '-renamed';");
    e.scion
        .checkpoint(&b, &"everything".parse().unwrap(), Default::default())
        .unwrap();
    let before = inode(&path);
    e.scion
        .rollback(&b, &"fork".parse().unwrap(), &no_backup())
        .unwrap();
    assert_ne!(inode(&path), before, "most pages changed: written whole");
    holds(&e, &path, "shop@b");
}

/// A crash after a refresh wrote its new record but before it removed the marker leaves
/// both. The next inspection drops the marker: otherwise, if the record were lost later,
/// the user's changes in the file would be taken for scion's half-written pages and
/// replaced without `--force`.
#[test]
fn a_marker_left_beside_a_valid_record_is_dropped_by_the_next_look() {
    let e = env();
    let path = moved_branch(&e);
    let b = br("shop@b");
    let marker = format!("{}.scion.refreshing", path.display());
    std::fs::write(&marker, b"").unwrap();
    let head = e
        .scion
        .engine()
        .resolve(&"shop@b".parse().unwrap())
        .unwrap()
        .root;
    assert_eq!(
        e.scion.checkout_state(&b, &head).unwrap(),
        CheckoutState::Clean
    );
    assert!(!Path::new(&marker).exists(), "the look dropped the marker");
    // The record lost, the file changed by the user: somebody's changes, kept.
    std::fs::remove_file(format!("{}.scion", path.display())).unwrap();
    exec(&path, "UPDATE items SET price = 77 WHERE id = 1;");
    assert_eq!(
        e.scion.checkout_state(&b, &head).unwrap(),
        CheckoutState::Unknown
    );
    assert!(
        e.scion.checkout(&b, false).is_err(),
        "replaced only with --force"
    );
}

#[test]
fn a_refresh_cut_short_is_replaced_whole_without_force() {
    let e = env();
    let path = moved_branch(&e);
    let b = br("shop@b");
    // What a crash in the middle of an in-place refresh leaves: the marker, no record,
    // some pages of the new version written and others not.
    std::fs::write(format!("{}.scion.refreshing", path.display()), b"").unwrap();
    std::fs::remove_file(format!("{}.scion", path.display())).unwrap();
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[0x5a; 4096], 8 * 4096).unwrap();
    }
    let head = e
        .scion
        .engine()
        .resolve(&"shop@b".parse().unwrap())
        .unwrap()
        .root;
    assert_eq!(
        e.scion.checkout_state(&b, &head).unwrap(),
        CheckoutState::Stale,
        "scion's own half-written file is not somebody's changes"
    );
    let report = e.scion.checkout(&b, false).unwrap();
    assert_ne!(report.action, CheckoutAction::Reused);
    holds(&e, &path, "shop@b");
    assert!(!Path::new(&format!("{}.scion.refreshing", path.display())).exists());
    assert_eq!(
        e.scion.checkout(&b, false).unwrap().action,
        CheckoutAction::Reused
    );
}

#[test]
fn a_forced_refresh_rewrites_in_place_the_few_pages_it_discards() {
    let e = env();
    let path = moved_branch(&e);
    let b = br("shop@b");
    let before = inode(&path);
    // Changes never checkpointed, a few pages' worth: rows changed and rows added.
    exec(
        &path,
        "UPDATE items SET name = 'changed' WHERE id = 7;
         INSERT INTO items(name, price) VALUES ('new', 1.0);",
    );
    let report = e
        .scion
        .rollback(
            &b,
            &"fork".parse().unwrap(),
            &MoveOptions {
                force: true,
                ..no_backup()
            },
        )
        .unwrap();
    assert!(report.discarded_changes);
    assert_eq!(
        inode(&path),
        before,
        "a few pages discarded: rewritten in place"
    );
    holds(&e, &path, "shop@b");
    assert_eq!(
        e.scion.checkout(&b, false).unwrap().action,
        CheckoutAction::Reused
    );

    // The working copy of the head, discarded with a forced checkout.
    exec(&path, "DELETE FROM items WHERE id = 9;");
    let report = e.scion.checkout(&b, true).unwrap();
    assert_eq!(report.action, CheckoutAction::Patched);
    assert_eq!(report.discarded, Some(CheckoutState::Dirty));
    assert_eq!(inode(&path), before);
    holds(&e, &path, "shop@b");
}
