"""A suite that changes its database in every test: each gets its own fork of the seed,
so the tests can run in any order and on any number of xdist workers."""

from __future__ import annotations

import pytest
from app import delete_user, revenue, upgrade

from scion.pytest_plugin import ScionDb


def test_seed_revenue(scion_db: ScionDb) -> None:
    assert revenue(scion_db.connection) == 5800


def test_upgrade_adds_an_invoice(scion_db: ScionDb) -> None:
    upgrade(scion_db.connection, "bob@example.com")
    assert revenue(scion_db.connection) == 8700


def test_upgrade_twice_is_refused(scion_db: ScionDb) -> None:
    upgrade(scion_db.connection, "cy@example.com")
    with pytest.raises(ValueError):
        upgrade(scion_db.connection, "cy@example.com")


def test_delete_user_removes_their_invoices(scion_db: ScionDb) -> None:
    delete_user(scion_db.connection, "ada@example.com")
    assert revenue(scion_db.connection) == 0
    # What the test did, as scion sees it: a diff against the seed.
    scion_db.checkpoint("after-delete")
    diff = scion_db.store.diff(scion_db.seed.target, scion_db.branch)
    users = diff.table("users")
    assert users is not None and users.removed == 1


@pytest.mark.parametrize("n", range(20))
def test_many_writers_never_see_each_other(scion_db: ScionDb, n: int) -> None:
    db = scion_db.connection
    db.execute("INSERT INTO users(email) VALUES (?)", (f"user{n}@example.com",))
    db.commit()
    assert db.execute("SELECT count(*) FROM users").fetchone()[0] == 4
