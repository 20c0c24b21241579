"""docs/recipes/pytest.md runs as its page shows it: the example suite on 4 xdist workers over
a 100 MiB seed, and through `scion serve` with a daemon session per test."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Iterator

import pytest

import scion
from conftest import scion_bin

REPO = Path(__file__).resolve().parents[3]
SUITE = REPO / "examples" / "python" / "pytest_suite"
# The example suite's own tests, as in `pytest -n 4` in its directory.
SUITE_TESTS = 24


def big_seed(path: Path, mib: int) -> Path:
    """The suite's seed.sql, and `mib` MiB of rows no test reads."""
    with closing(sqlite3.connect(path)) as db:
        db.executescript((SUITE / "seed.sql").read_text())
        db.execute("CREATE TABLE archive(id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        db.executemany("INSERT INTO archive(body) VALUES (randomblob(4000))", [()] * (mib * 256))
        db.commit()
    return path


def run_suite(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SCION_STORE"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "4", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_the_suite_runs_on_4_workers_over_a_100_mib_seed_stored_once(tmp_path: Path) -> None:
    seed = big_seed(tmp_path / "big.db", 100)
    assert seed.stat().st_size > 100 * 2**20
    store_dir = tmp_path / "store"
    done = run_suite(SUITE, "--scion-seed", str(seed), "--scion-store", str(store_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{SUITE_TESTS} passed" in done.stdout, done.stdout
    store = scion.open_store(store_dir)
    # One seed for all four workers, made once; every test's fork is gone.
    (db,) = store.databases()
    assert [b.branch for b in store.branches(db)] == [f"{db}@main"]
    # The 24 forks added no pages: the store holds the seed's 100 MiB (random, so
    # incompressible) once, not once per test or per worker.
    held = int(store.status()["space"]["bytes"])
    assert 100 * 2**20 < held < 110 * 2**20, held


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Path]:
    """`scion serve` on a store of its own, stopped at the end."""
    # A private directory (the daemon refuses a socket others could replace), with a path
    # short enough for a unix socket.
    sock_dir = Path(tempfile.mkdtemp(prefix="scion-"))
    sock = sock_dir / "s.sock"
    store_dir = tmp_path / "daemon-store"
    subprocess.run([scion_bin(), "--store", str(store_dir), "init"], check=True, capture_output=True)
    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen(
            [scion_bin(), "--store", str(store_dir), "serve", "--socket", str(sock)],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        for _ in range(200):
            if sock.exists():
                with socket.socket(socket.AF_UNIX) as s:
                    if s.connect_ex(str(sock)) == 0:
                        break
            time.sleep(0.05)
        else:
            raise AssertionError((tmp_path / "serve.log").read_text())
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(sock_dir, ignore_errors=True)


def test_the_suite_runs_through_a_daemon_with_a_session_per_test(tmp_path: Path, daemon: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(SUITE, suite)
    # One more test: its database is a live session of the daemon, on its own fork.
    (suite / "test_daemon_session.py").write_text(
        "import scion\n\n"
        "def test_the_database_is_a_daemon_session(scion_db):\n"
        "    assert isinstance(scion_db.store, scion.Client)\n"
        "    assert scion_db.session is not None and scion_db.session.path == scion_db.path\n"
        "    live = scion_db.store.session(scion_db.branch.ref)\n"
        "    assert live.id == scion_db.session.id\n"
        "    # Ephemeral: destroyed, its pages need not wait out the head history.\n"
        "    assert scion_db.store.branch(scion_db.branch.ref).info().ephemeral\n"
        "    scion_db.connection.execute(\"INSERT INTO users(email) VALUES ('dan@example.com')\")\n"
        "    scion_db.checkpoint('one-more-user')\n"
        "    diff = scion_db.store.diff(scion_db.seed.target, scion_db.branch)\n"
        "    assert diff.table('users').added == 1\n"
    )
    done = run_suite(suite, f"--scion-daemon={daemon}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{SUITE_TESTS + 1} passed" in done.stdout, done.stdout
    client = scion.Client(daemon)
    assert client.sessions() == []
    (db,) = client.databases()
    assert [b.branch for b in client.branches(db)] == [f"{db}@main"]


def test_the_daemon_mode_refuses_a_store_of_its_own_and_a_daemon_that_is_not_there(
    tmp_path: Path, daemon: Path
) -> None:
    both = run_suite(SUITE, f"--scion-daemon={daemon}", f"--scion-store={tmp_path / 's'}")
    assert both.returncode != 0
    assert "--scion-daemon uses the daemon's store" in both.stdout + both.stderr
    nobody = run_suite(SUITE, f"--scion-daemon={tmp_path / 'none.sock'}")
    assert nobody.returncode != 0
    assert "no `scion serve` answers there" in nobody.stdout + nobody.stderr


def test_a_failing_test_keeps_its_fork_through_the_daemon_with_keep_failed(tmp_path: Path, daemon: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(SUITE, suite)
    (suite / "test_billing.py").unlink()
    (suite / "test_fails.py").write_text(
        "def test_fails(scion_db):\n"
        "    scion_db.connection.execute(\"INSERT INTO users(email) VALUES ('zed@example.com')\")\n"
        "    scion_db.connection.commit()\n"
        "    assert False\n"
    )
    done = run_suite(suite, f"--scion-daemon={daemon}", "--scion-keep-failed", "-n", "0")
    assert done.returncode == 1 and "1 failed" in done.stdout, done.stdout + done.stderr
    assert "changes checkpointed as 'kept'" in done.stdout, done.stdout
    client = scion.Client(daemon)
    assert client.sessions() == []
    (db,) = client.databases()
    (kept,) = [b for b in client.branches(db) if b.branch != f"{db}@main"]
    assert kept.checkpoints == 1 and kept.ttl_secs is None, kept
    with closing(sqlite3.connect(client.branch(kept.branch).checkout_read_only(at="kept"))) as conn:
        assert conn.execute("SELECT count(*) FROM users WHERE email = 'zed@example.com'").fetchone() == (1,)
