//! The engine's own head moves beside the working tree's: a branch with a recorded
//! checkout is not moved by the engine alone. A binary of its own: the moves rewrite and
//! remove checkout files, and `checkouts.rs` counts this process's POSIX locks.

mod common;

use common::*;
use scion_core::ops::moves::StoreOnly;
use scion_core::EngineError;

/// The engine alone cannot bring a checkout file along when a head moves: it refuses to
/// move a branch that has a recorded checkout unless forced; the working tree's moves
/// judge and refresh the file instead.
#[test]
fn the_engine_alone_does_not_move_a_checked_out_head_without_force() {
    let e = env();
    create_shop(&e, 100);
    e.scion
        .engine()
        .fork(&br("shop"), &"try".parse().unwrap(), Default::default())
        .unwrap();
    let b = br("shop@try");
    e.scion
        .checkpoint(&b, &"v1".parse().unwrap(), Default::default())
        .unwrap();
    let path = e.scion.checkout(&b, false).unwrap().path;
    exec(&path, "UPDATE items SET name = 'changed' WHERE id = 3;");
    e.scion
        .checkpoint(&b, &"v2".parse().unwrap(), Default::default())
        .unwrap();
    let opts = scion_core::ops::lifecycle::MoveOptions {
        force: false,
        no_backup: true,
        backup_ttl: None,
    };
    let engine = e.scion.engine();
    let refused = engine
        .rollback(&b, &"v1".parse().unwrap(), &opts, &mut StoreOnly)
        .unwrap_err();
    assert!(
        matches!(refused, EngineError::CheckedOut { .. }),
        "{refused}"
    );
    let refused = engine.undo(&b, &opts, &mut StoreOnly).unwrap_err();
    assert!(
        matches!(refused, EngineError::CheckedOut { .. }),
        "{refused}"
    );
    // The working tree's rollback of the same (clean) checkout moves and refreshes it.
    let moved = e.scion.rollback(&b, &"v1".parse().unwrap(), &opts).unwrap();
    assert_eq!(moved.checkout.as_deref(), Some(path.to_str().unwrap()));
    assert!(!dump(&path).contains("changed"));
    // Released, the engine moves the head on its own.
    e.scion.release_checkout(&b, false).unwrap();
    engine.undo(&b, &opts, &mut StoreOnly).unwrap();
}
