"""The daemon client against a real `scion serve`: sessions capturing a real SQLite writer,
events, the at-rest surface over the socket, typed errors."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import List

import pytest

import scion
import scion.aio
from conftest import make_sqlite, rows


def seed(client: scion.Client, tmp_path: Path) -> scion.Branch:
    return client.create("shop", source=make_sqlite(tmp_path / "seed.db"))


def test_health_and_at_rest_over_the_socket(daemon: scion.Client, tmp_path: Path) -> None:
    assert daemon.health()
    main = seed(daemon, tmp_path)
    assert daemon.databases() == ["shop"]
    fork = main.fork("f", meta={"via": "daemon"})
    assert fork.info().meta == {"via": "daemon"}
    with fork.connect() as conn:
        conn.execute("DELETE FROM items WHERE id = 1")
    fork.checkpoint("one")
    d = daemon.diff(main, fork)
    items = d.table("items")
    assert items is not None and items.removed == 1
    with pytest.raises(scion.BranchExists):
        main.fork("f")
    fork.destroy(force=True)


def test_session_captures_a_writer_and_flushes(daemon: scion.Client, tmp_path: Path) -> None:
    seed(daemon, tmp_path)
    with daemon.open("shop@work", fork_from="main", meta={"by": "test"}) as s:
        assert s.path.exists() and s.branch == "shop@work"
        conn = sqlite3.connect(str(s.path))
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("INSERT INTO items(name, price) VALUES ('live', 7)")
        conn.commit()
        version = s.flush("after-insert", meta={"step": "1"})
        conn.close()
        assert version >= 2
        info = daemon.branch("shop@work").info()
        assert info.session == s.id and info.meta == {"by": "test"}
        # At rest changes go through the session while it is open.
        with pytest.raises(scion.LeaseHeld) as e:
            daemon.branch("shop@work").checkpoint("x")
        assert s.id in (e.value.hint or "")
    assert s.closed
    cps = {c.name: c for c in daemon.branch("shop@work").checkpoints()}
    assert cps["after-insert"].meta == {"step": "1"}
    exported = daemon.export("shop@work@after-insert", tmp_path / "out.db")
    assert ("live", 7) in [(r[1], r[2]) for r in rows(exported.path)]


def test_ephemeral_session_destroys_its_branch(daemon: scion.Client, tmp_path: Path) -> None:
    seed(daemon, tmp_path)
    s = daemon.open("shop@tmp", fork_from="main", ephemeral=True, ttl="1h")
    assert any(x["id"] == s.id for x in daemon.sessions())
    # A session is named by its id or by its branch.
    by_name = daemon.session("shop@tmp")
    assert by_name.id == s.id and by_name.path == s.path
    with pytest.raises(scion.SessionNotFound):
        daemon.session("shop@nosuch")
    closed = s.close()
    assert closed["destroyed"] is True
    assert s.close()["id"] == s.id  # idempotent
    assert not daemon.branch("shop@tmp").exists()


def test_session_errors(daemon: scion.Client, tmp_path: Path) -> None:
    seed(daemon, tmp_path)
    with pytest.raises(scion.BranchNotFound):
        daemon.open("shop@ghost")
    with pytest.raises(scion.InvalidInput):
        daemon.open("shop@x", ephemeral=True)
    with pytest.raises(scion.SessionNotFound):
        scion.Session(daemon, {"id": "s-nope", "branch": "shop@main", "path": "/x"}).flush()


def test_events_stream(daemon: scion.Client, tmp_path: Path) -> None:
    main = seed(daemon, tmp_path)
    seen: List[scion.Event] = []
    ready = threading.Event()

    def listen() -> None:
        for e in daemon.events(since=0):
            seen.append(e)
            ready.set()
            if e.kind == "forked" and e.data.get("branch") == "shop@ev":
                return

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    main.fork("ev")
    t.join(30)
    assert not t.is_alive(), "no 'forked' event arrived"
    ids = [e.id for e in seen]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert seen[-1].kind == "forked"


def test_unreachable_daemon(tmp_path: Path) -> None:
    c = scion.Client(tmp_path / "nobody.sock")
    assert not c.health()
    with pytest.raises(scion.DaemonUnreachable) as e:
        c.databases()
    assert e.value.retryable and "scion serve" in (e.value.hint or "")


@pytest.mark.engine
def test_default_socket_matches_the_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The daemon derives its socket from the store's location; so does the client.
    import subprocess

    from conftest import scion_bin

    monkeypatch.delenv("SCION_SOCKET", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    store = scion.open_store(tmp_path / "st", create=True)
    proc = subprocess.Popen(
        [scion_bin(), "--store", store.location, "serve"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "socket " in first, first
        printed = Path(first.rsplit("socket ", 1)[1].strip())
        assert printed == scion.default_socket(store.location)
        monkeypatch.setenv("SCION_STORE", store.location)
        found = scion.Client()  # no socket given: derived from the store, as the daemon did
        assert found.socket == printed
        for _ in range(250):
            if found.health():
                break
            time.sleep(0.02)
        assert found.databases() == []
    finally:
        proc.terminate()
        proc.wait(10)


def test_async_client(daemon: scion.Client, tmp_path: Path) -> None:
    seed(daemon, tmp_path)

    async def main() -> None:
        client = scion.aio.connect(daemon.socket)
        assert await client.health()
        async with await client.open("shop@a", fork_from="main", ephemeral=True) as s:
            conn = sqlite3.connect(str(s.path))
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("DELETE FROM items")
            conn.commit()
            conn.close()
            assert await s.flush() >= 2
        assert not await client.branch("shop@a").exists()

    asyncio.run(main())


def test_one_kept_alive_connection_serves_many_requests(daemon: scion.Client, tmp_path: Path) -> None:
    # Requests with a body their handler does not read (a session's close) must not make
    # the daemon drop the connection: the next request on it would fail.
    seed(daemon, tmp_path)
    for i in range(150):
        s = daemon.open(f"shop@k{i}", fork_from="main", ephemeral=True)
        s.close()
        s.close()
    assert daemon.sessions() == []


def test_events_without_follow_end_after_the_kept_ones(daemon: scion.Client, tmp_path: Path) -> None:
    main = seed(daemon, tmp_path)
    main.fork("kept-ev")
    kinds = [e.kind for e in daemon.events(since=0, follow=False)]
    assert "forked" in kinds
