"""scion for asyncio: the surface of :mod:`scion`, with every engine or daemon call run off
the event loop (``asyncio.to_thread``; the engine releases the GIL while it works)::

    store = await scion.aio.open_store("./.scion")
    main = store.branch("shop@main")
    async with main.attempt() as fork:
        path = await fork.checkout()
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Dict, List, Mapping, Optional, Union

from . import _api, _client, _errors, _types
from ._api import KEEP, PathLike
from ._merge import MergeReport
from ._remote import PullReport, PushReport
from ._types import (
    TTL,
    BranchInfo,
    Checkpoint,
    CheckpointResult,
    Diff,
    ExportResult,
    GcResult,
    HeadHistory,
    MoveResult,
)

if TYPE_CHECKING:
    from . import _store

__all__ = ["AsyncBranch", "AsyncClient", "AsyncSession", "AsyncStore", "connect", "open_store"]


class AsyncBranch:
    """:class:`scion.Branch`, awaitable."""

    def __init__(self, branch: _api.Branch) -> None:
        self.sync = branch

    @property
    def ref(self) -> str:
        return self.sync.ref

    @property
    def db(self) -> str:
        return self.sync.db

    @property
    def name(self) -> str:
        return self.sync.name

    def __str__(self) -> str:
        return self.sync.ref

    def __repr__(self) -> str:
        return f"AsyncBranch({self.sync.ref!r})"

    async def info(self) -> BranchInfo:
        return await asyncio.to_thread(self.sync.info)

    async def exists(self) -> bool:
        return await asyncio.to_thread(self.sync.exists)

    async def fork(
        self,
        name: str,
        *,
        at: Optional[str] = None,
        ttl: Optional[TTL] = None,
        meta: Optional[Mapping[str, Any]] = None,
        ephemeral: bool = False,
    ) -> "AsyncBranch":
        return AsyncBranch(
            await asyncio.to_thread(self.sync.fork, name, at=at, ttl=ttl, meta=meta, ephemeral=ephemeral)
        )

    async def checkout(self, *, force: bool = False) -> Path:
        return await asyncio.to_thread(self.sync.checkout, force=force)

    async def checkout_read_only(self, at: Optional[str] = None) -> Path:
        return await asyncio.to_thread(self.sync.checkout_read_only, at)

    async def connect(self, **sqlite3_kwargs: Any) -> sqlite3.Connection:
        """The checkout is made off the loop; the connection itself is a plain
        ``sqlite3.Connection`` (``check_same_thread=False`` to use it from other threads)
        that closes at the end of a ``with`` block."""
        path = await self.checkout()
        conn: sqlite3.Connection = _types.connect_closing(path, **sqlite3_kwargs)
        return conn

    async def checkpoint(self, name: str, *, meta: Optional[Mapping[str, Any]] = None) -> CheckpointResult:
        return await asyncio.to_thread(self.sync.checkpoint, name, meta=meta)

    async def checkpoints(self) -> List[Checkpoint]:
        return await asyncio.to_thread(self.sync.checkpoints)

    async def rollback(self, to: str, **kwargs: Any) -> MoveResult:
        return await asyncio.to_thread(self.sync.rollback, to, **kwargs)

    async def history(self, *, limit: int = 50) -> HeadHistory:
        return await asyncio.to_thread(self.sync.history, limit=limit)

    async def undo(self, *, force: bool = False) -> MoveResult:
        return await asyncio.to_thread(self.sync.undo, force=force)

    async def restore(self, to: Optional[int] = None, *, force: bool = False) -> MoveResult:
        return await asyncio.to_thread(self.sync.restore, to, force=force)

    async def promote(self, onto: Union[str, "AsyncBranch", _api.Branch] = "main", **kwargs: Any) -> MoveResult:
        target = onto.sync if isinstance(onto, AsyncBranch) else onto
        return await asyncio.to_thread(self.sync.promote, target, **kwargs)

    async def merge(self, source: Union[str, "AsyncBranch", _api.Branch], **kwargs: Any) -> MergeReport:
        src = source.sync if isinstance(source, AsyncBranch) else source
        return await asyncio.to_thread(self.sync.merge, src, **kwargs)

    async def push(self, remote: str, **kwargs: Any) -> PushReport:
        return await asyncio.to_thread(self.sync.push, remote, **kwargs)

    async def pull(self, remote: str, **kwargs: Any) -> PullReport:
        return await asyncio.to_thread(self.sync.pull, remote, **kwargs)

    async def destroy(self, *, force: bool = False, missing_ok: bool = False) -> None:
        await asyncio.to_thread(self.sync.destroy, force=force, missing_ok=missing_ok)

    async def touch(self, ttl: Any = KEEP) -> None:
        await asyncio.to_thread(self.sync.touch, ttl)

    async def protect(self, on: bool = True) -> None:
        await asyncio.to_thread(self.sync.protect, on)

    @asynccontextmanager
    async def attempt(
        self,
        name: Optional[str] = None,
        *,
        at: Optional[str] = None,
        ttl: Optional[TTL] = "1h",
        meta: Optional[Mapping[str, Any]] = None,
    ) -> AsyncIterator["AsyncAttempt"]:
        """:meth:`scion.Branch.attempt`: the fork is destroyed after the block unless
        ``keep()`` was called or it was promoted."""
        if name is None:
            name = f"attempt-{os.urandom(5).hex()}"
        fork = await asyncio.to_thread(self.sync.fork, name, at=at, ttl=ttl, meta=meta)
        attempt = AsyncAttempt(_api.Attempt(fork._api, fork.ref))
        try:
            yield attempt
        finally:
            if not attempt.kept:
                await attempt.destroy(force=True, missing_ok=True)


class AsyncAttempt(AsyncBranch):
    sync: _api.Attempt

    @property
    def kept(self) -> bool:
        return self.sync.kept

    def keep(self) -> "AsyncAttempt":
        self.sync.keep()
        return self


class _AsyncApi:
    def __init__(self, api: _api.Api) -> None:
        self.sync = api

    async def create(self, db: str, source: Optional[PathLike] = None) -> AsyncBranch:
        return AsyncBranch(await asyncio.to_thread(self.sync.create, db, source))

    async def databases(self) -> List[str]:
        return await asyncio.to_thread(self.sync.databases)

    async def remotes(self) -> Dict[str, str]:
        return await asyncio.to_thread(self.sync.remotes)

    async def add_remote(self, name: str, location: str) -> str:
        return await asyncio.to_thread(self.sync.add_remote, name, location)

    async def remove_remote(self, name: str) -> str:
        return await asyncio.to_thread(self.sync.remove_remote, name)

    def branch(self, target: str) -> AsyncBranch:
        return AsyncBranch(self.sync.branch(target))

    async def branches(self, db: str) -> List[BranchInfo]:
        return await asyncio.to_thread(self.sync.branches, db)

    async def diff(self, left: Union[str, AsyncBranch], right: Union[str, AsyncBranch], **kwargs: Any) -> Diff:
        return await asyncio.to_thread(self.sync.diff, str(left), str(right), **kwargs)

    async def export(self, target: Union[str, AsyncBranch], path: PathLike, *, force: bool = False) -> ExportResult:
        return await asyncio.to_thread(self.sync.export, str(target), path, force=force)

    async def gc(self, *, grace: Optional[TTL] = None, force: bool = False) -> GcResult:
        return await asyncio.to_thread(self.sync.gc, grace=grace, force=force)

    async def status(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.status)


class AsyncStore(_AsyncApi):
    """:class:`scion.Store`, awaitable."""

    sync: _store.Store

    @property
    def location(self) -> str:
        return self.sync.location


async def open_store(
    spec: Union[str, "os.PathLike[str]", None] = None,
    *,
    create: bool = False,
    page_compression: Optional[str] = None,
) -> AsyncStore:
    # Imported here: the stdlib-only distribution (scion-client) has this module but not the engine.
    try:
        from . import _store
    except ImportError as e:
        raise _errors.EngineNotInstalled("aio.open_store") from e

    return AsyncStore(
        await asyncio.to_thread(_store.open_store, spec, create=create, page_compression=page_compression)
    )


class AsyncSession:
    """:class:`scion.Session`, awaitable; an async context manager."""

    def __init__(self, session: _client.Session) -> None:
        self.sync = session

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def path(self) -> Path:
        return self.sync.path

    @property
    def branch(self) -> str:
        return self.sync.branch

    async def flush(self, checkpoint: Optional[str] = None, *, meta: Optional[Mapping[str, Any]] = None) -> int:
        return await asyncio.to_thread(self.sync.flush, checkpoint, meta=meta)

    async def close(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class AsyncClient(_AsyncApi):
    """:class:`scion.Client`, awaitable."""

    sync: _client.Client

    async def health(self) -> bool:
        return await asyncio.to_thread(self.sync.health)

    async def open(self, target: str, **kwargs: Any) -> AsyncSession:
        return AsyncSession(await asyncio.to_thread(self.sync.open, target, **kwargs))

    async def sessions(self) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(self.sync.sessions)

    async def events(self, *, since: Optional[int] = None, follow: bool = True) -> AsyncIterator[_client.Event]:
        """Events, read by a thread and handed to the loop one at a time (``follow=False``:
        only those kept so far)."""
        it = self.sync.events(since=since, follow=follow)
        done = object()
        try:
            while True:
                e = await asyncio.to_thread(next, it, done)
                if e is done:
                    return
                assert isinstance(e, _client.Event)
                yield e
        finally:
            await asyncio.to_thread(it.close)  # type: ignore[attr-defined]


def connect(socket: Union[str, "os.PathLike[str]", None] = None, **kwargs: Any) -> AsyncClient:
    """An :class:`AsyncClient` of the daemon (arguments as :class:`scion.Client`)."""
    return AsyncClient(_client.Client(socket, **kwargs))
