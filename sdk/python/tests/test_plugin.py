"""The pytest plugin, run as users run it (pytester, real pytest processes, real xdist
workers, a worker killed with SIGKILL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import scion

SEED_SQL = """
CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT);
INSERT INTO items(name) VALUES ('a'), ('b'), ('c');
"""

# A seed callable that records every call, so a test can count how often seeding ran.
CONFTEST_COUNTING_SEED = """
import os, sqlite3, pytest

@pytest.fixture(scope="session")
def scion_seed_source():
    def fill(path):
        with open(os.environ["SEED_LOG"], "a") as f:
            f.write(f"{os.getpid()}\\n")
        conn = sqlite3.connect(str(path))
        conn.executescript("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT);"
                           "INSERT INTO items(name) VALUES ('a'), ('b'), ('c');")
        conn.close()
    return fill
"""

ISOLATION_TESTS = """
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_each_gets_the_seed_alone(scion_db, i):
    c = scion_db.connection
    assert [r[0] for r in c.execute("SELECT name FROM items ORDER BY id")] == ["a", "b", "c"]
    c.execute("DELETE FROM items WHERE name = 'a'")
    c.execute("INSERT INTO items(name) VALUES (?)", (f"t{{i}}",))
    c.commit()
    assert c.execute("SELECT count(*) FROM items").fetchone()[0] == 3
"""


@pytest.fixture
def seed_log(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = pytester.path / "seed.log"
    monkeypatch.setenv("SEED_LOG", str(log))
    return log


def test_sql_seed_from_ini_isolation_and_teardown(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sql", seed=SEED_SQL)
    pytester.makeini("[pytest]\nscion_seed = seed.sql\n")
    pytester.makepyfile(
        ISOLATION_TESTS.format(n=5)
        + """
def test_zz_no_fork_left(scion_store, scion_seed):
    branches = [b.branch for b in scion_store.branches(scion_seed.db)]
    assert branches == [scion_seed.db + "@main"], branches
"""
    )
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=6)


def test_seeded_once_per_run_and_not_again_when_unchanged(pytester: pytest.Pytester, seed_log: Path) -> None:
    pytester.makeconftest(CONFTEST_COUNTING_SEED)
    pytester.makepyfile(ISOLATION_TESTS.format(n=6))
    store = pytester.path / "lasting-store"
    result = pytester.runpytest_subprocess("-q", f"--scion-store={store}")
    result.assert_outcomes(passed=6)
    assert len(seed_log.read_text().split()) == 1
    # The same seed in a lasting store: not seeded again.
    result = pytester.runpytest_subprocess("-q", f"--scion-store={store}")
    result.assert_outcomes(passed=6)
    assert len(seed_log.read_text().split()) == 1
    # A changed seed is seeded again.
    pytester.makeconftest(CONFTEST_COUNTING_SEED.replace("('a'), ('b'), ('c')", "('a'), ('b'), ('c'), ('d')"))
    pytester.makepyfile(
        ISOLATION_TESTS.format(n=2).replace('["a", "b", "c"]', '["a", "b", "c", "d"]').replace("== 3", "== 4")
    )
    result = pytester.runpytest_subprocess("-q", f"--scion-store={store}")
    result.assert_outcomes(passed=2)
    assert len(seed_log.read_text().split()) == 2


def test_xdist_four_workers_share_one_seed(pytester: pytest.Pytester, seed_log: Path) -> None:
    pytester.makeconftest(CONFTEST_COUNTING_SEED)
    pytester.makepyfile(ISOLATION_TESTS.format(n=40))
    result = pytester.runpytest_subprocess("-q", "-n", "4")
    result.assert_outcomes(passed=40)
    seeders = seed_log.read_text().split()
    assert len(seeders) == 1, f"seeded by {len(seeders)} processes"


def test_marker_picks_the_seed(pytester: pytest.Pytester, tmp_path: Path) -> None:
    import sqlite3

    db = pytester.path / "other.db"
    conn = sqlite3.connect(str(db))
    conn.execute("CREATE TABLE other(x)")
    conn.execute("INSERT INTO other VALUES (42)")
    conn.commit()
    conn.close()
    pytester.makepyfile(
        """
import pytest

def test_default_is_empty(scion_db):
    assert scion_db.connection.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0] == 0

@pytest.mark.scion_seed("other.db")
def test_from_a_db_file(scion_db):
    assert scion_db.connection.execute("SELECT x FROM other").fetchone()[0] == 42

@pytest.mark.scion_seed(sql="CREATE TABLE s(v); INSERT INTO s VALUES ('sql');")
def test_from_sql_text(scion_db):
    assert scion_db.connection.execute("SELECT v FROM s").fetchone()[0] == "sql"

def fill(path):
    import sqlite3
    c = sqlite3.connect(str(path))
    c.executescript("CREATE TABLE f(v); INSERT INTO f VALUES (1);")
    c.close()

@pytest.mark.scion_seed.with_args(fill)  # a lone callable needs with_args (pytest rule)
def test_from_a_callable(scion_db):
    assert scion_db.connection.execute("SELECT v FROM f").fetchone()[0] == 1
    assert scion_db.seed.target.endswith("@main@seed")
"""
    )
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=4)


def test_keep_failed_keeps_and_says_how_to_open(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sql", seed=SEED_SQL)
    pytester.makeini("[pytest]\nscion_seed = seed.sql\n")
    pytester.makepyfile(
        """
def test_passes(scion_db):
    scion_db.connection.execute("DELETE FROM items")
    scion_db.connection.commit()

def test_fails(scion_db):
    scion_db.connection.execute("INSERT INTO items(name) VALUES ('evidence')")
    scion_db.connection.commit()
    assert False, "on purpose"
"""
    )
    store = pytester.path / "st"
    result = pytester.runpytest_subprocess("-q", "--scion-keep-failed", f"--scion-store={store}", "-rA")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*kept seed-*@t-main-*", "*open it:  sqlite3 *", "*scion --store*checkout*"])
    s = scion.open_store(store)
    (db,) = s.databases()
    forks = [b for b in s.branches(db) if b.branch != f"{db}@main"]
    assert len(forks) == 1 and "test_fails" in forks[0].meta["pytest_nodeid"]
    assert forks[0].ttl_secs is None
    kept = s.branch(forks[0].branch)
    exported = s.export(f"{kept.ref}@kept", pytester.path / "kept.db")
    import sqlite3

    names = [r[0] for r in sqlite3.connect(str(exported.path)).execute("SELECT name FROM items")]
    assert "evidence" in names
    # Without the flag, nothing is kept.
    result = pytester.runpytest_subprocess("-q", f"--scion-store={store}")
    result.assert_outcomes(passed=1, failed=1)
    assert len(s.branches(db)) == 2


KILLER_TESTS = """
import os, signal

def test_killed(scion_db):
    scion_db.connection.execute("DELETE FROM items")
    scion_db.connection.commit()
    os.kill(os.getpid(), signal.SIGKILL)

def test_fine(scion_db):
    assert scion_db.connection.execute("SELECT count(*) FROM items").fetchone()[0] == 3
"""


def test_teardown_after_a_killed_xdist_worker(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sql", seed=SEED_SQL)
    pytester.makeini("[pytest]\nscion_seed = seed.sql\n")
    pytester.makepyfile(KILLER_TESTS)
    store = pytester.path / "st"
    result = pytester.runpytest_subprocess("-n", "2", f"--scion-store={store}")
    result.stdout.fnmatch_lines(["*crashed while running*test_killed*"])
    result.stdout.fnmatch_lines(["scion: destroyed 1 fork(s) a crashed test process left behind"])
    s = scion.open_store(store)
    (db,) = s.databases()
    assert [b.branch for b in s.branches(db)] == [f"{db}@main"]


def test_next_run_destroys_what_a_killed_run_left(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sql", seed=SEED_SQL)
    pytester.makeini("[pytest]\nscion_seed = seed.sql\n")
    pytester.makepyfile(KILLER_TESTS)
    store = pytester.path / "st"
    killed = pytester.runpytest_subprocess("-k", "killed", f"--scion-store={store}")
    assert killed.ret != 0
    s = scion.open_store(store)
    (db,) = s.databases()
    left = [b for b in s.branches(db) if b.branch != f"{db}@main"]
    assert len(left) == 1, "the killed run should have left its fork"
    result = pytester.runpytest_subprocess("-k", "fine", f"--scion-store={store}")
    result.assert_outcomes(passed=1)
    assert [b.branch for b in s.branches(db)] == [f"{db}@main"]


def test_store_is_temporary_per_run_by_default(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(
        """
import json, os

def test_where(scion_store, scion_db):
    with open(os.environ["WHERE"], "w") as f:
        json.dump({"store": scion_store.location, "path": str(scion_db.path)}, f)
"""
    )
    where = pytester.path / "where.json"
    monkeypatch.setenv("WHERE", str(where))
    result = pytester.runpytest_subprocess("-q", "--basetemp", str(pytester.path / "bt"))
    result.assert_outcomes(passed=1)
    got = json.loads(where.read_text())
    assert got["store"] == str(pytester.path / "bt" / "scion-store")
    assert got["path"].startswith(got["store"])


def test_a_seeding_that_died_half_way_is_redone(pytester: pytest.Pytester, seed_log: Path) -> None:
    pytester.makeconftest(
        CONFTEST_COUNTING_SEED.replace(
            "        conn = sqlite3.connect(str(path))",
            "        if not os.path.exists(os.environ['SEED_LOG'] + '.failed-once'):\n"
            "            open(os.environ['SEED_LOG'] + '.failed-once', 'w').close()\n"
            "            os.kill(os.getpid(), 9)\n"
            "        conn = sqlite3.connect(str(path))",
        )
    )
    pytester.makepyfile(ISOLATION_TESTS.format(n=2))
    store = pytester.path / "st"
    first = pytester.runpytest_subprocess("-q", f"--scion-store={store}")
    assert first.ret != 0
    s = scion.open_store(store)
    (db,) = s.databases()
    assert s.branch(f"{db}@main").checkpoints() == []
    result = pytester.runpytest_subprocess("-q", f"--scion-store={store}")
    result.assert_outcomes(passed=2)
    assert len(seed_log.read_text().split()) == 2
    assert [c.name for c in s.branch(f"{db}@main").checkpoints()] == ["seed"]


def test_page_compression_option_makes_the_runs_store_keep_raw_pages(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sql", seed=SEED_SQL)
    pytester.makeini("[pytest]\nscion_seed = seed.sql\nscion_page_compression = none\n")
    pytester.makepyfile(
        ISOLATION_TESTS.format(n=2)
        + """
def test_zz_the_store_keeps_pages_raw(scion_store):
    assert scion_store.status()["page_compression"] == "none"
"""
    )
    store = pytester.path / "store"
    result = pytester.runpytest_subprocess("-q", f"--scion-store={store}")
    result.assert_outcomes(passed=3)
    assert scion.open_store(store).status()["page_compression"] == "none"
    # The command line wins over the ini; a lasting store kept otherwise is an error.
    result = pytester.runpytest_subprocess("-q", f"--scion-store={store}", "--scion-page-compression=lz4")
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(["*InvalidInput*keeps pages none*"])


VFS_TESTS = """
import sqlite3

def test_the_connection_goes_through_the_vfs_until_a_file_is_asked_for(scion_db):
    c = scion_db.connection
    assert c.execute("PRAGMA scion_version").fetchone() is not None  # only the scion VFS answers it
    c.execute("INSERT INTO items(name) VALUES ('vfs')")
    c.commit()
    scion_db.checkpoint("one")
    path = scion_db.path  # a file now, holding what the VFS committed
    with sqlite3.connect(path) as f:
        assert f.execute("SELECT count(*) FROM items WHERE name = 'vfs'").fetchone()[0] == 1
    scion_db.connection.execute("INSERT INTO items(name) VALUES ('file')")
    scion_db.checkpoint("two")
"""


FILE_TESTS = """
def test_a_file_from_the_start(scion_db):
    # The first connection is to the file: the VFS pragma is not there.
    assert scion_db.connection.execute("PRAGMA scion_version").fetchone() is None
    assert scion_db.path.exists()
"""


@pytest.mark.parametrize("connect", ["vfs", "file"])
def test_scion_db_connects_through_the_vfs_by_default_or_to_a_file(pytester: pytest.Pytester, connect: str) -> None:
    pytester.makefile(".sql", seed=SEED_SQL)
    pytester.makeini("[pytest]\nscion_seed = seed.sql\n")
    pytester.makepyfile(VFS_TESTS if connect == "vfs" else FILE_TESTS)
    args = ["-p", "no:cacheprovider"] + ([] if connect == "vfs" else ["--scion-connect=file"])
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1)
