"""Typed exceptions against the engine's own table of codes; threads; asyncio."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict

import pytest

import scion
import scion.aio
from conftest import REPO, make_sqlite, rows

EXIT = {
    "Failure": 1,
    "NotFound": 3,
    "AlreadyExists": 4,
    "Conflict": 5,
    "Refused": 6,
    "Corrupt": 7,
    "InvalidInput": 8,
    "Transient": 9,
    "Unsupported": 10,
}


def rust_codes() -> Dict[str, int]:
    """Every code the engine and the daemon answer, with its exit code, read from their
    sources: a code added there without a class here fails this test."""
    found = {}
    for described in ("crates/scion-described/src/lib.rs", "crates/scion-core/src/described.rs"):
        text = (REPO / described).read_text()
        for exit_name, code in re.findall(r'd\(Exit::(\w+), "([a-z_]+)"', text):
            found[code] = EXIT[exit_name]
    for path in (REPO / "crates/scion-daemon/src").rglob("*.rs"):
        text = path.read_text()
        for exit_name, code in re.findall(r'Exit::(\w+),\s*"([a-z_]+)"', text):
            found.setdefault(code, EXIT[exit_name])
        for code in re.findall(r'not_found\(\s*"([a-z_]+)"', text):
            found.setdefault(code, 3)
    return found


def test_every_engine_code_has_its_class_in_its_family() -> None:
    codes = rust_codes()
    assert len(codes) > 40
    for code, exit_code in codes.items():
        assert code in scion.ERROR_CODES, f"no exception class for {code}"
        cls = scion._errors.BY_CODE[code]
        assert cls.exit_code_of_family == exit_code, f"{code}: {cls.__name__} is not in the family of exit {exit_code}"
        err = scion._errors.from_body({"code": code, "message": "m", "exit_code": exit_code})
        assert type(err) is cls and isinstance(err, scion.Error) and err.code == code


def test_unknown_code_falls_back_to_its_family() -> None:
    err = scion._errors.from_body({"code": "brand_new", "message": "m", "exit_code": 5, "retryable": True})
    assert type(err) is scion.Conflict and err.code == "brand_new" and err.retryable
    assert type(scion._errors.from_body({"code": "x", "message": "m"})) is scion.Error
    assert scion.DirtyCheckout.__module__ == "scion" and issubclass(scion.DirtyCheckout, scion.Refused)


@pytest.mark.engine
def test_threads_share_a_store(store: scion.Store, tmp_path: Path) -> None:
    main = store.create("shop", source=make_sqlite(tmp_path / "s.db"))

    def work(i: int) -> int:
        fork = main.fork(f"t{i}", meta={"thread": str(i)})
        with fork.connect() as conn:
            conn.execute("INSERT INTO items(name, price) VALUES (?, ?)", (f"t{i}", i))
        fork.checkpoint("done")
        n = len(rows(fork.checkout()))
        fork.destroy(force=True)
        return n

    with ThreadPoolExecutor(8) as pool:
        counts = list(pool.map(work, range(32)))
    assert counts == [4] * 32
    assert [b.branch for b in store.branches("shop")] == ["shop@main"]


@pytest.mark.engine
def test_the_gil_is_released_during_engine_work(store: scion.Store, tmp_path: Path) -> None:
    # A database of some size, so importing it takes a while: while the engine works in
    # one thread, this thread must keep running Python.
    big = tmp_path / "big.db"
    conn = sqlite3.connect(str(big))
    conn.execute("CREATE TABLE b(x BLOB)")
    conn.executemany("INSERT INTO b VALUES (randomblob(4000))", [()] * 12000)
    conn.commit()
    conn.close()
    window = []
    done = threading.Event()

    def import_it() -> None:
        t0 = time.perf_counter()
        store.create("big", source=big)
        window.extend([t0, time.perf_counter()])
        done.set()

    t = threading.Thread(target=import_it)
    spins = []
    t.start()
    while not done.is_set():
        spins.append(time.perf_counter())
    t.join()
    t0, t1 = window
    # Held by the engine, the GIL would let this thread run only before and after the
    # native call (its Python prologue and epilogue take microseconds): never in the
    # middle half of the call.
    middle = [s for s in spins if t0 + (t1 - t0) / 4 <= s <= t1 - (t1 - t0) / 4]
    assert len(middle) > 100, f"{len(middle)} spins of {len(spins)} in the middle of the call"


@pytest.mark.engine
def test_asyncio_surface(tmp_path: Path) -> None:
    async def main() -> None:
        store = await scion.aio.open_store(tmp_path / "as", create=True)
        shop = await store.create("shop", make_sqlite(tmp_path / "a.db"))
        forks = await asyncio.gather(*(shop.fork(f"f{i}", ttl="1h") for i in range(6)))
        assert sorted(f.ref for f in forks) == [f"shop@f{i}" for i in range(6)]
        conn = await forks[0].connect()
        conn.execute("DELETE FROM items")
        conn.commit()
        conn.close()
        cp = await forks[0].checkpoint("empty")
        assert cp.committed
        diff = await store.diff(shop, forks[0])
        items = diff.table("items")
        assert items is not None and items.removed == 3
        async with shop.attempt() as attempt:
            assert (await attempt.info()).ttl_secs == 3600
            ref = attempt.ref
        assert not await store.branch(ref).exists()
        with pytest.raises(scion.BranchExists):
            await shop.fork("f1")
        assert len(await store.branches("shop")) == 7

    asyncio.run(main())
