//! Materializing a version the page map hands over in many groups of leaf nodes (the
//! decode threads start on the first group while later ones are still being read): the
//! file comes out byte for byte, delta pages included, and a damaged frame in a late
//! group fails the whole materialization without leaving a file behind; in stores of
//! either page compression.

mod common;

use common::*;
use scion_core::{CoreError, DbName, EngineError, PageCompression, StoreSettings, Target};

/// 512-byte pages make a database of many leaf groups cheap: 30,000 pages is 15 MiB.
fn many_pages(e: &Env) -> std::path::PathBuf {
    let src = e.path("many.db");
    exec(
        &src,
        "PRAGMA page_size = 512; PRAGMA journal_mode = WAL;
         CREATE TABLE blobs(id INTEGER PRIMARY KEY, n INTEGER, data BLOB);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30000)
         INSERT INTO blobs(n, data) SELECT 0, randomblob(400) FROM n;",
    );
    assert!(std::fs::metadata(&src).unwrap().len() > 3 * 8192 * 512);
    src
}

/// A store of each page compression.
fn stores() -> [Env; 2] {
    [PageCompression::Lz4, PageCompression::Uncompressed].map(|page_compression| {
        env_with(StoreSettings {
            page_compression,
            ..Default::default()
        })
    })
}

#[test]
fn a_version_of_many_leaf_groups_with_delta_pages_comes_out_byte_for_byte() {
    for e in stores() {
        comes_out_byte_for_byte(e);
    }
}

fn comes_out_byte_for_byte(e: Env) {
    let src = many_pages(&e);
    e.scion
        .engine()
        .create(&DbName::new("many").unwrap(), Some(&src))
        .unwrap();
    let main = br("many");
    let path = e.scion.checkout(&main, false).unwrap().path;
    // Rows changed by a few bytes across the whole file, checkpointed: their pages are
    // stored as deltas against the pages they replace.
    exec(&path, "UPDATE blobs SET n = n + 1 WHERE id % 997 = 0;");
    e.scion
        .checkpoint(&main, &"spread".parse().unwrap(), Default::default())
        .unwrap();
    let t: Target = "many".parse().unwrap();
    let (root, slots) = e
        .scion
        .engine()
        .page_slots(&e.scion.engine().resolve(&t).unwrap().root)
        .unwrap();
    let deltas = slots.iter().filter(|(_, s)| s.base.is_some()).count();
    assert!(deltas > 0, "no delta pages to materialize");
    assert!(
        root.page_count as usize > 3 * 8192,
        "{} pages",
        root.page_count
    );
    let expected = dump(&path);
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
    }
    let checkout_bytes = bytes_without_journal_mode(&path);

    let out = e.path("export.db");
    e.scion.export(&t, &out, false).unwrap();
    assert_eq!(dump(&out), expected);
    let exported = bytes_without_journal_mode(&out);
    assert_eq!(exported.len(), checkout_bytes.len());
    assert!(
        exported == checkout_bytes,
        "export differs from the checkout"
    );

    // A fresh checkout of the same version, with nothing local, is the same file too.
    std::fs::remove_file(&path).unwrap();
    let again = e.scion.checkout(&main, true).unwrap().path;
    assert!(bytes_without_journal_mode(&again) == checkout_bytes);
}

#[test]
fn a_damaged_frame_in_a_late_group_fails_the_export_and_leaves_no_file() {
    for e in stores() {
        a_damaged_frame_fails_the_export(e);
    }
}

fn a_damaged_frame_fails_the_export(e: Env) {
    let src = many_pages(&e);
    e.scion
        .engine()
        .create(&DbName::new("many").unwrap(), Some(&src))
        .unwrap();
    // Damage page frames well into every segment (pages are written in page order, the
    // page map's nodes after them): groups before it decode fine, then one fails.
    for entry in std::fs::read_dir(e.store_dir().join("segments"))
        .unwrap()
        .flatten()
    {
        let mut bytes = std::fs::read(entry.path()).unwrap();
        let (from, to) = (bytes.len() * 6 / 10, bytes.len() * 7 / 10);
        for i in (from..to).step_by(211) {
            bytes[i] ^= 0x5a;
        }
        std::fs::write(entry.path(), &bytes).unwrap();
    }
    let out = e.path("out.db");
    let t: Target = "many".parse().unwrap();
    match e.scion.export(&t, &out, false) {
        Err(CoreError::Engine(EngineError::Corrupt { .. })) => {}
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(!out.exists());
    let leftovers: Vec<_> = std::fs::read_dir(e.dir.path())
        .unwrap()
        .flatten()
        .map(|d| d.file_name())
        .filter(|n| n.to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

/// Page compression changed on an open store: each change reads the manifest it replaces
/// (a handle that never saw another's change still reports it as `before`), a handle opened
/// earlier keeps the setting it read until it reloads the settings, and the store id and
/// grace are untouched.
#[test]
fn a_page_compression_change_builds_on_the_manifest_it_replaces() {
    let e = env();
    let (a, b) = (e.reopen(), e.reopen());
    let change = a
        .engine()
        .set_page_compression(PageCompression::Uncompressed)
        .unwrap();
    assert_eq!(change.before, PageCompression::Lz4);
    assert_eq!(a.engine().page_compression(), PageCompression::Uncompressed);
    // `b` read lz4 when it opened; its change starts from what the store says now.
    assert_eq!(b.engine().page_compression(), PageCompression::Lz4);
    let change = b
        .engine()
        .set_page_compression(PageCompression::Lz4)
        .unwrap();
    assert_eq!(change.before, PageCompression::Uncompressed);
    let fresh = e.reopen();
    assert_eq!(fresh.engine().page_compression(), PageCompression::Lz4);
    assert_eq!(fresh.engine().store_id(), e.scion.engine().store_id());
    assert_eq!(fresh.engine().min_grace(), e.scion.engine().min_grace());
    // The handle opened before any change still writes as it read.
    assert_eq!(e.scion.engine().page_compression(), PageCompression::Lz4);
    assert_eq!(e.scion.engine().reload_settings().unwrap(), None);
}

/// A process that keeps the store open (the daemon) follows another's `config` change
/// once it reloads the settings: its next commit stores full pages the new way.
#[test]
fn a_handle_that_reloads_its_settings_commits_the_new_way() {
    let e = env();
    let src = e.path("seed.db");
    seed(&src, 2000);
    let db = DbName::new("shop").unwrap();
    let created = e.scion.engine().create(&db, Some(&src)).unwrap();
    let page_bytes = created.page_count as u64 * created.page_size as u64;
    e.reopen()
        .engine()
        .set_page_compression(PageCompression::Uncompressed)
        .unwrap();
    let lz4 = e.scion.compact(&br("shop"), false).unwrap();
    assert!(
        lz4.store_bytes_written < page_bytes,
        "before reloading: {} B for {page_bytes} B of pages",
        lz4.store_bytes_written
    );
    let change = e.scion.engine().reload_settings().unwrap().unwrap();
    assert_eq!(
        (change.before, change.after),
        (PageCompression::Lz4, PageCompression::Uncompressed)
    );
    assert_eq!(
        e.scion.engine().page_compression(),
        PageCompression::Uncompressed
    );
    let raw = e.scion.compact(&br("shop"), false).unwrap();
    assert!(
        raw.store_bytes_written >= page_bytes,
        "after reloading: {} B for {page_bytes} B of pages",
        raw.store_bytes_written
    );
    assert_eq!(
        e.scion.engine().reload_settings().unwrap(),
        None,
        "nothing new"
    );
}

/// A writer whose table of the head's page hashes is out of step (as a daemon session's
/// could be) cannot leave a version whose whole-database checksum no read matches: the
/// commit takes each changed page's old hash from the stored frame, and the version
/// exports and verifies.
#[test]
fn a_commit_given_wrong_old_page_hashes_still_exports() {
    use scion_core::ops::pages::{PageChanges, PageCommit};
    let e = env();
    let src = e.path("items.db");
    exec(
        &src,
        "CREATE TABLE items(id INTEGER PRIMARY KEY, v TEXT);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
         INSERT INTO items(v) SELECT printf('%.100c', 'a') FROM n;",
    );
    e.scion
        .engine()
        .create(&DbName::new("shop").unwrap(), Some(&src))
        .unwrap();
    let out = e.path("changed.db");
    e.scion
        .export(&"shop".parse().unwrap(), &out, false)
        .unwrap();
    exec(&out, "UPDATE items SET v = 'changed' WHERE id % 50 = 0;");
    let bytes = std::fs::read(&out).unwrap();
    let page_size = u16::from_be_bytes([bytes[16], bytes[17]]) as u32;
    let mut pages = std::collections::BTreeMap::new();
    for (i, page) in bytes.chunks(page_size as usize).enumerate() {
        let mut page = page.to_vec();
        if i == 0 {
            scion_core::format::normalize_page1(&mut page);
        }
        pages.insert(i as u32 + 1, page);
    }
    let changes = PageChanges {
        page_size,
        page_count: pages.len() as u32,
        pages,
        spilled: Default::default(),
    };
    let b = br("shop");
    let (r, etag) = e.scion.engine().read_ref(&b).unwrap();
    // Every old hash this table gives is wrong.
    let wrong = |pgno: u32| Some(0x5eed_0000_0000_0000 ^ pgno as u64);
    e.scion
        .engine()
        .commit_pages(PageCommit::onto(&b, &r, etag, &changes).with_known_hashes(&wrong))
        .unwrap();
    let again = e.path("again.db");
    e.scion
        .export(&"shop".parse().unwrap(), &again, false)
        .unwrap();
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&out).unwrap());
    assert!(e.scion.verify().unwrap().ok());
}
