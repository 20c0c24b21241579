"""The scion VFS from Python's own sqlite3 module, on both of this machine's kinds of
interpreter: one that allows extension loading (Debian's /usr/bin/python3) and one that
does not (the virtual environment's, built by pyenv), which takes the ctypes route."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any, Dict

import pytest

import scion
import scion.vfs
from conftest import make_sqlite

SCRIPT = """
import site, json
site.addsitedir({site!r})
import scion, scion.vfs
how = scion.vfs.load()
conn = scion.vfs.connect("shop@main", store={store!r})
before = conn.execute("SELECT count(*) FROM items").fetchone()[0]
conn.execute("INSERT INTO items(name, price) VALUES ('vfs', 1)")
conn.commit()
version = conn.execute("PRAGMA scion_version").fetchone()[0]
print(json.dumps({{"how": how, "before": before, "version": int(version)}}))
"""


def run_with(python: str, store: Path) -> Dict[str, Any]:
    import json

    site = sysconfig.get_paths()["purelib"]
    out = subprocess.run(
        [python, "-c", SCRIPT.format(site=site, store=str(store))], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    result: Dict[str, Any] = json.loads(out.stdout)
    return result


def test_this_interpreter(store: scion.Store, tmp_path: Path) -> None:
    main = store.create("shop", source=make_sqlite(tmp_path / "s.db"))
    how = scion.vfs.load()
    expected = "load_extension" if hasattr(sqlite3.Connection, "enable_load_extension") else "ctypes"
    assert how == expected
    conn = scion.vfs.connect("shop@main", store=store.location)
    assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == 3
    conn.execute("DELETE FROM items WHERE id = 1")
    conn.commit()
    assert main.info().version == 2
    # Nothing was materialized: the branch has no checkout file.
    assert main.info().checkout == "none"
    reader = scion.vfs.connect("shop@main@init", store=store.location)
    assert reader.execute("SELECT count(*) FROM items").fetchone()[0] == 3
    with pytest.raises(sqlite3.OperationalError):
        reader.execute("DELETE FROM items")
    with pytest.raises(scion.BranchNotFound):
        scion.vfs.connect("shop@ghost", store=store.location)
    with pytest.raises(scion.CheckpointNotFound):
        scion.vfs.connect("shop@main@ghost", store=store.location)


@pytest.mark.parametrize("python", ["/usr/bin/python3", sys.executable])
def test_each_interpreter_on_this_machine(python: str, store: scion.Store, tmp_path: Path) -> None:
    if not Path(python).exists():
        pytest.fail(f"{python} is missing: the test command installs Debian's python3")
    store.create("shop", source=make_sqlite(tmp_path / "s.db"))
    got = run_with(python, Path(store.location))
    assert got["before"] == 3 and got["version"] == 2
    can_load = subprocess.run(
        [python, "-c", "import sqlite3; print(hasattr(sqlite3.Connection, 'enable_load_extension'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert got["how"] == ("load_extension" if can_load == "True" else "ctypes")


BOTH_LIBRARIES = """
import site, json
site.addsitedir({site!r})
import sqlite3, scion, scion.vfs
store = scion.open_store({store!r})
shop = store.branch("shop@main")
a, b = shop.fork("a"), shop.fork("b")
for branch, sql in [(a, "UPDATE items SET price = 10 WHERE id = 1"), (b, "UPDATE items SET price = 20 WHERE id = 2")]:
    with branch.connect() as conn:
        conn.executescript(sql)
    branch.checkpoint("done")
shop.merge(a, force=True)
merged = shop.merge(b, force=True)
conn = scion.vfs.connect("shop@main", store={store!r})
prices = conn.execute("SELECT price FROM items WHERE id IN (1, 2) ORDER BY id").fetchall()
print(json.dumps({{"outcome": merged.outcome, "prices": [p[0] for p in prices]}}))
"""


def test_the_vfs_in_this_interpreter_after_a_merge_used_it_in_scions_own_sqlite(
    store: scion.Store, tmp_path: Path
) -> None:
    # A three-way merge opens its scratch fork through the VFS in the SQLite linked into
    # scion's module; the interpreter's sqlite3 is another library, where the VFS must be
    # registered too. A fresh process makes the order certain.
    store.create("shop", source=make_sqlite(tmp_path / "s.db"))
    site = sysconfig.get_paths()["purelib"]
    out = subprocess.run(
        [sys.executable, "-c", BOTH_LIBRARIES.format(site=site, store=str(store.location))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    import json

    got = json.loads(out.stdout)
    assert got == {"outcome": "merged", "prices": [10, 20]}
