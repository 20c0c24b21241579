//! Data that once changed with no grant: each test named for the sequence that got through.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::*;

#[test]
fn a_read_only_checkout_edited_and_its_mtime_put_back_is_not_taken_for_the_version() {
    let s = Session::new();
    s.ok(&["init"]);
    s.ok(&["create", "shop"]);
    s.ok(&[
        "sql",
        "shop",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'good')",
    ]);
    let ro = s.ok(&["checkout", "shop@main", "--read-only"]);
    let ro = Path::new(ro.trim());
    // A reader edits the read-only file in place (same size) and puts back its mtime
    // and mode: size, mtime and inode are as recorded; only the ctime moved.
    let mtime = std::fs::metadata(ro).unwrap().modified().unwrap();
    std::fs::set_permissions(ro, std::fs::Permissions::from_mode(0o644)).unwrap();
    let c = rusqlite::Connection::open(ro).unwrap();
    c.execute("UPDATE t SET v = 'evil' WHERE id = 1", [])
        .unwrap();
    drop(c);
    let f = std::fs::File::options().write(true).open(ro).unwrap();
    f.set_modified(mtime).unwrap();
    drop(f);
    std::fs::set_permissions(ro, std::fs::Permissions::from_mode(0o444)).unwrap();
    assert_eq!(std::fs::metadata(ro).unwrap().modified().unwrap(), mtime);

    s.ok(&["export", "shop@main", "out.db"]);
    assert_eq!(
        sqlite(&s.path("out.db"), "SELECT v FROM t"),
        "Text(\"good\")"
    );
    let co = s.ok(&["checkout", "shop@main"]);
    assert_eq!(
        sqlite(Path::new(co.trim()), "SELECT v FROM t"),
        "Text(\"good\")"
    );
    // The person's next checkpoint carries the store's row, not the reader's.
    let c = rusqlite::Connection::open(co.trim()).unwrap();
    c.execute("INSERT INTO t VALUES (2, 'more')", []).unwrap();
    drop(c);
    s.ok(&["checkpoint", "shop@main", "c1"]);
    s.ok(&["export", "shop@main@c1", "c1.db"]);
    assert_eq!(
        sqlite(&s.path("c1.db"), "SELECT group_concat(v) FROM t"),
        "Text(\"good,more\")"
    );
}
