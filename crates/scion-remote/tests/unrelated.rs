//! A push of a branch the remote lacks, into a database of the same name made separately:
//! refused before anything is sent, unless forced.

mod common;

use common::{items, silent, store_at, Store};
use scion_core::BranchRef;
use scion_remote::{push, PushOptions, PushOutcome, RemoteError};

fn b(s: &str) -> BranchRef {
    s.parse().unwrap()
}

fn segments(s: &Store) -> usize {
    s.scion.engine().backend().list("segments/").unwrap().len()
}

#[test]
fn pushing_a_new_branch_of_a_separately_made_shop_is_refused_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let laptop = store_at(tmp.path().join("laptop").to_str().unwrap());
    let server = store_at(tmp.path().join("server").to_str().unwrap());
    laptop.create(tmp.path(), "shop", &items(2000));
    server.create(tmp.path(), "shop", &items(10));
    laptop.fork("shop", "feature");
    let origin = laptop.remote("origin", &server);
    let before = segments(&server);
    let refused = push(
        &laptop.scion,
        &origin,
        &b("shop@feature"),
        &PushOptions::default(),
        &*silent(),
    );
    assert!(
        matches!(refused, Err(RemoteError::UnrelatedHistory { .. })),
        "{refused:?}"
    );
    assert_eq!(segments(&server), before, "nothing was sent");
    assert!(server.scion.engine().read_ref(&b("shop@feature")).is_err());
    // Forced, it goes.
    let forced = push(
        &laptop.scion,
        &origin,
        &b("shop@feature"),
        &PushOptions {
            force: true,
            ..Default::default()
        },
        &*silent(),
    )
    .unwrap();
    assert_eq!(forced.outcome, PushOutcome::Created);
    assert_eq!(server.count("shop@feature", "items"), 2000);
}

#[test]
fn a_new_branch_of_the_same_database_and_a_new_database_push_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    let laptop = store_at(tmp.path().join("laptop").to_str().unwrap());
    let server = store_at(tmp.path().join("server").to_str().unwrap());
    laptop.create(tmp.path(), "shop", &items(100));
    let origin = laptop.remote("origin", &server);
    // A database the remote lacks.
    let first = push(
        &laptop.scion,
        &origin,
        &b("shop"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    assert_eq!(first.outcome, PushOutcome::Created);
    // A branch the remote lacks, of the database it now shares.
    laptop.fork("shop", "feature");
    laptop.write("shop@feature", "INSERT INTO items VALUES (9001, 'x', 'y')");
    let second = push(
        &laptop.scion,
        &origin,
        &b("shop@feature"),
        &PushOptions::default(),
        &*silent(),
    )
    .unwrap();
    assert_eq!(second.outcome, PushOutcome::Created);
}
