"""Shared fixtures of scion's Python tests: real stores in temporary directories, real
SQLite files, and (for the daemon client) a real `scion serve`."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, List

import pytest

import scion

pytest_plugins = ["pytester"]


def pytest_configure(config: pytest.Config) -> None:
    # scripts/test-python runs the tests without this mark against the stdlib-only scion-client.
    config.addinivalue_line("markers", "engine: needs the embedded engine (open_store, the VFS)")


REPO = Path(__file__).resolve().parents[3]


def load_example(path: Path) -> ModuleType:
    """An example (or recipe) file imported as a module, as the tests run the pages' code."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def store(tmp_path: Path) -> scion.Store:
    return scion.open_store(tmp_path / "store", create=True)


def make_sqlite(path: Path, rows: int = 3) -> Path:
    conn = sqlite3.connect(str(path))
    conn.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price INTEGER)")
    conn.executemany("INSERT INTO items(name, price) VALUES (?, ?)", [(f"item-{i}", i * 10) for i in range(rows)])
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def shop(store: scion.Store, tmp_path: Path) -> scion.Branch:
    return store.create("shop", source=make_sqlite(tmp_path / "shop.db"))


def rows(path: Path, sql: str = "SELECT id, name, price FROM items ORDER BY id") -> List[Any]:
    conn = sqlite3.connect(str(path))
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def scion_bin() -> str:
    """The `scion` binary for daemon tests: SCION_BIN, else the workspace's debug build.
    The daemon exists, so these tests are required: a missing binary fails them."""
    candidates = [os.environ.get("SCION_BIN"), str(REPO / "target" / "debug" / "scion"), shutil.which("scion")]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    pytest.fail("no scion binary for the daemon tests: build it (cargo build) or set SCION_BIN")


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[scion.Client]:
    """`scion serve` on a fresh store and its own socket; stopped after the test."""
    bin_ = scion_bin()
    store_dir = tmp_path / "dstore"
    subprocess.run([bin_, "--store", str(store_dir), "init"], check=True, capture_output=True)
    sock = tmp_path / "d.sock"
    log = open(tmp_path / "daemon.log", "wb")
    proc = subprocess.Popen(
        [bin_, "--store", str(store_dir), "serve", "--socket", str(sock), "--flush-every", "200ms"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "SCION_LOG": "info"},
    )
    client = scion.Client(sock)
    for _ in range(500):
        if client.health():
            break
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    else:
        proc.kill()
    if proc.poll() is not None or not client.health():
        proc.kill()
        pytest.fail("scion serve did not start: " + (tmp_path / "daemon.log").read_text())
    try:
        yield client
    finally:
        client.close()
        alive = proc.poll() is None
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        # Shown by pytest with a failing test's output.
        print(f"daemon (alive at teardown: {alive}, exit {proc.returncode}) log:")
        print((tmp_path / "daemon.log").read_text()[-4000:])
