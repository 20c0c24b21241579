"""Error paths of the methods the main API tests exercise on their happy path."""

from __future__ import annotations

from pathlib import Path

import pytest

import scion


def test_a_missing_branch_is_branch_not_found_everywhere(store: scion.Store, shop: scion.Branch) -> None:
    ghost = store.branch("shop@ghost")
    for call in (
        ghost.info,
        ghost.checkout,
        ghost.checkpoints,
        ghost.protect,
        lambda: ghost.checkpoint("x"),
        lambda: ghost.rollback("fork"),
        ghost.checkout_read_only,
        lambda: ghost.touch("1h"),
    ):
        with pytest.raises(scion.BranchNotFound) as e:
            call()
        assert e.value.exit_code == 3 and e.value.hint
    assert not ghost.exists()


def test_a_checkout_replaced_by_another_file_is_refused_until_forced(shop: scion.Branch) -> None:
    path = shop.checkout()
    path.write_bytes(b"not the branch's file")
    with pytest.raises(scion.UnknownCheckout) as e:
        shop.checkout()
    assert isinstance(e.value, scion.Refused) and "--force" in (e.value.hint or "")
    assert path.read_bytes() == b"not the branch's file", "nothing was overwritten"
    assert shop.checkout(force=True) == path
    with shop.connect() as conn:
        assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == 3


def test_a_missing_database(store: scion.Store) -> None:
    with pytest.raises(scion.DatabaseNotFound):
        store.branch("nodb@main").info()
    with pytest.raises(scion.InvalidName):
        store.branch("Bad Name@main").info()
    with pytest.raises(scion.DatabaseNotFound):
        store.export("nodb", Path(store.location).parent / "x.db")
