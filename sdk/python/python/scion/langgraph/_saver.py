"""ScionSaver: LangGraph's checkpoints, one branch per thread."""

from __future__ import annotations

import asyncio
import heapq
import json
import sqlite3
import tempfile
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver

from .. import _errors, vfs
from .._api import Branch
from .._store import Store
from ._names import thread_branch_name, thread_id_of

if TYPE_CHECKING:
    from ._forks import ThreadForks

# Rows inside a thread's branch carry this thread id, not the real one (which is in the
# table `scion_thread`): a copy of the thread is then a fork plus one row, not a rewrite
# of every checkpoint.
_LOCAL_THREAD = ""
_THREAD_TABLE = "CREATE TABLE scion_thread(id TEXT NOT NULL)"


def _local(config: RunnableConfig) -> RunnableConfig:
    configurable = dict(config.get("configurable", {}))
    configurable["thread_id"] = _LOCAL_THREAD
    return {**config, "configurable": configurable}


def _public_config(config: Optional[RunnableConfig], thread_id: str) -> Optional[RunnableConfig]:
    if config is None:
        return None
    configurable = dict(config.get("configurable", {}))
    configurable["thread_id"] = thread_id
    return {**config, "configurable": configurable}


def _public(tup: CheckpointTuple, thread_id: str) -> CheckpointTuple:
    return tup._replace(
        config=_public_config(tup.config, thread_id) or tup.config,
        parent_config=_public_config(tup.parent_config, thread_id),
    )


@dataclass
class _Open:
    """One thread's branch, open through the VFS."""

    branch: Branch
    conn: sqlite3.Connection
    lock: threading.Lock = field(default_factory=threading.Lock)


class ScionSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer keeping each thread on its own branch of ``db``.

    ``store`` is an embedded :class:`scion.Store` (the VFS opens its branches). ``ttl``
    gives every thread branch a time to live (renewed by its writes); ``forks`` attaches
    a :class:`ThreadForks` whose app database follows this saver's checkpoints. At most
    ``max_open`` threads keep a connection open at once."""

    def __init__(
        self,
        store: Store,
        db: str = "langgraph",
        *,
        forks: Optional[ThreadForks] = None,
        ttl: Optional[str] = None,
        prefix: str = "t-",
        max_open: int = 64,
        serde: Optional[SerializerProtocol] = None,
    ) -> None:
        super().__init__(serde=serde)
        self.store = store
        self.db = db
        self.forks = forks
        self.ttl = ttl
        self.prefix = prefix
        self.max_open = max(1, max_open)
        self._lock = threading.Lock()
        self._opening = threading.Lock()
        self._open: "OrderedDict[str, _Open]" = OrderedDict()
        self._ensure_database()

    # -- the database and its thread branches ------------------------------------------

    def _ensure_database(self) -> None:
        if self.db in self.store.databases():
            return
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "langgraph.db"
            conn = sqlite3.connect(path, check_same_thread=False)
            try:
                # The stock saver's own schema; its setup turns WAL on, which a plain
                # rollback journal replaces before the file becomes the database.
                SqliteSaver(conn).setup()
                conn.execute(_THREAD_TABLE)
                conn.commit()
                conn.execute("PRAGMA journal_mode=DELETE")
            finally:
                conn.close()
            try:
                self.store.create(self.db, source=path)
            except _errors.DatabaseExists:
                pass  # made meanwhile by another saver

    def branch_for(self, thread_id: str) -> Branch:
        """The branch holding ``thread_id``'s checkpoints (it may not exist yet)."""
        return self.store.branch(f"{self.db}@{thread_branch_name(self.prefix, thread_id)}")

    def _thread(self, thread_id: str, *, create: bool) -> Optional[_Open]:
        with self._lock:
            found = self._open.get(thread_id)
            if found is not None:
                self._open.move_to_end(thread_id)
                return found
        # One opener at a time: LangGraph stores a step's checkpoint and its writes from
        # two threads at once, and both may find the thread's branch missing.
        with self._opening:
            with self._lock:
                found = self._open.get(thread_id)
            return found if found is not None else self._open_thread(thread_id, create)

    def _open_thread(self, thread_id: str, create: bool) -> Optional[_Open]:
        branch = self.branch_for(thread_id)
        try:
            conn = vfs.connect(branch.ref, store=self.store.location, check_same_thread=False)
            fresh = False
        except _errors.BranchNotFound:
            if not create:
                return None
            try:
                self.store.branch(f"{self.db}@main").fork(branch.name, ttl=self.ttl)
                fresh = True
            except _errors.BranchExists:
                fresh = False  # forked meanwhile by another process
            conn = vfs.connect(branch.ref, store=self.store.location, check_same_thread=False)
        if fresh:
            with conn:
                conn.execute("INSERT INTO scion_thread(id) VALUES (?)", (thread_id,))
        return self._remember(thread_id, _Open(branch, conn))

    def _remember(self, thread_id: str, opened: _Open) -> _Open:
        with self._lock:
            existing = self._open.get(thread_id)
            if existing is not None:
                opened.conn.close()
                return existing
            self._open[thread_id] = opened
            while len(self._open) > self.max_open:
                _, oldest = self._open.popitem(last=False)
                with oldest.lock:
                    oldest.conn.close()
            return opened

    def _forget(self, thread_id: str) -> None:
        with self._lock:
            opened = self._open.pop(thread_id, None)
        if opened is not None:
            with opened.lock:
                opened.conn.close()

    def _inner(self, opened: _Open) -> SqliteSaver:
        saver = SqliteSaver(opened.conn, serde=self.serde)
        saver.is_setup = True  # made with the database; its WAL pragma is refused here
        saver.lock = opened.lock
        return saver

    def _threads(self) -> List[str]:
        """Every thread id with a branch in this database."""
        ids: List[str] = []
        for info in self.store.branches(self.db):
            name = info.branch.split("@", 1)[1]
            if not name.startswith(self.prefix):
                continue
            try:
                conn = vfs.connect(f"{self.db}@{name}", store=self.store.location, read_only=True)
            except _errors.NotFound:
                continue  # destroyed meanwhile
            try:
                row = conn.execute("SELECT id FROM scion_thread").fetchone()
            finally:
                conn.close()
            if row is not None:
                ids.append(str(row[0]))
        return ids

    # -- the checkpointer ----------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        thread_id = thread_id_of(config)
        if thread_id is None:
            return None
        opened = self._thread(thread_id, create=False)
        if opened is None:
            return None
        tup = self._inner(opened).get_tuple(_local(config))
        return None if tup is None else _public(tup, thread_id)

    def list(
        self,
        config: Optional[RunnableConfig],
        *,
        filter: Optional[Dict[str, Any]] = None,
        before: Optional[RunnableConfig] = None,
        limit: Optional[int] = None,
    ) -> Iterator[CheckpointTuple]:
        thread_id = thread_id_of(config)
        if thread_id is not None and config is not None:
            opened = self._thread(thread_id, create=False)
            if opened is None:
                return
            for tup in self._inner(opened).list(_local(config), filter=filter, before=before, limit=limit):
                yield _public(tup, thread_id)
            return
        # Across threads: each branch lists newest first; merged by checkpoint id.
        ns = (config or {}).get("configurable", {}).get("checkpoint_ns")
        scoped: Optional[RunnableConfig] = None
        if ns is not None:
            scoped = {"configurable": {"thread_id": _LOCAL_THREAD, "checkpoint_ns": ns}}
        streams = []
        for tid in self._threads():
            opened = self._thread(tid, create=False)
            if opened is None:
                continue
            rows = list(self._inner(opened).list(scoped, filter=filter, before=before, limit=limit))
            streams.append([_public(t, tid) for t in rows])
        merged = heapq.merge(*streams, key=lambda t: t.config["configurable"]["checkpoint_id"], reverse=True)
        for n, tup in enumerate(merged):
            if limit is not None and n >= limit:
                return
            yield tup

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id = thread_id_of(config)
        if thread_id is None:
            raise _errors.InvalidInput("a checkpoint's config names no thread_id", code="invalid_input")
        opened = self._thread(thread_id, create=True)
        assert opened is not None
        saved = self._inner(opened).put(_local(config), checkpoint, metadata, new_versions)
        if self.forks is not None and config["configurable"].get("checkpoint_ns", "") == "":
            self.forks._on_put(
                thread_id,
                parent=config["configurable"].get("checkpoint_id"),
                checkpoint=checkpoint["id"],
                source=str(metadata.get("source", "")),
            )
        return _public_config(saved, thread_id) or saved

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id = thread_id_of(config)
        if thread_id is None:
            raise _errors.InvalidInput("a write's config names no thread_id", code="invalid_input")
        opened = self._thread(thread_id, create=True)
        assert opened is not None
        self._inner(opened).put_writes(_local(config), writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        thread_id = str(thread_id)
        self._forget(thread_id)
        self.branch_for(thread_id).destroy(force=True, missing_ok=True)
        if self.forks is not None:
            self.forks.delete(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        wanted = {str(r) for r in run_ids}
        if not wanted:
            return
        for tid in self._threads():
            opened = self._thread(tid, create=False)
            if opened is None:
                continue
            with opened.lock, opened.conn:
                rows = opened.conn.execute("SELECT checkpoint_ns, checkpoint_id, metadata FROM checkpoints").fetchall()
                doomed = [(ns, cid) for ns, cid, md in rows if _run_id(md) in wanted]
                opened.conn.executemany("DELETE FROM checkpoints WHERE checkpoint_ns = ? AND checkpoint_id = ?", doomed)
                opened.conn.executemany("DELETE FROM writes WHERE checkpoint_ns = ? AND checkpoint_id = ?", doomed)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """A fork of the source thread's branch (O(1) whatever its size), renamed by one row."""
        source, target = str(source_thread_id), str(target_thread_id)
        self._copy(source, target)
        if self.forks is not None:
            self.forks._on_copy(source, target)

    def _copy(self, source: str, target: str) -> None:
        if self._thread(source, create=False) is None:
            raise _errors.NotFound(f"no thread {source!r} to copy", code="not_found")
        target_branch = self.branch_for(target)
        if target_branch.exists():
            raise _errors.AlreadyExists(f"thread {target!r} exists already", code="already_exists")
        self.branch_for(source).fork(target_branch.name, ttl=self.ttl)
        conn = vfs.connect(target_branch.ref, store=self.store.location, check_same_thread=False)
        with conn:
            conn.execute("UPDATE scion_thread SET id = ?", (target,))
        self._remember(target, _Open(target_branch, conn))

    def fork_thread(self, source_thread_id: str, at_checkpoint: str, target_thread_id: str) -> RunnableConfig:
        """A new thread holding ``source``'s checkpoints (a fork of its branch), with the
        attached app database forked at its state for ``at_checkpoint``. Returns the
        config that continues the new thread from that checkpoint:
        ``graph.invoke(None, saver.fork_thread(...))``."""
        source, target = str(source_thread_id), str(target_thread_id)
        if self.forks is not None:
            self.forks._check_fork(source, at_checkpoint, target)
        self._copy(source, target)
        if self.forks is not None:
            self.forks.fork_thread(source, at_checkpoint, target)
        return {"configurable": {"thread_id": target, "checkpoint_ns": "", "checkpoint_id": at_checkpoint}}

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if strategy not in ("keep_latest", "delete"):
            raise _errors.InvalidInput(
                f"unknown prune strategy {strategy!r}: 'keep_latest' or 'delete'", code="invalid_input"
            )
        for tid in thread_ids:
            opened = self._thread(str(tid), create=False)
            if opened is None:
                continue
            with opened.lock, opened.conn:
                if strategy == "delete":
                    opened.conn.execute("DELETE FROM checkpoints")
                    opened.conn.execute("DELETE FROM writes")
                    continue
                keep = "SELECT checkpoint_ns, max(checkpoint_id) FROM checkpoints GROUP BY checkpoint_ns"
                opened.conn.execute(f"DELETE FROM checkpoints WHERE (checkpoint_ns, checkpoint_id) NOT IN ({keep})")
                opened.conn.execute(f"DELETE FROM writes WHERE (checkpoint_ns, checkpoint_id) NOT IN ({keep})")

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        thread_id = thread_id_of(config)
        opened = None if thread_id is None else self._thread(thread_id, create=False)
        if opened is None:
            return {ch: {"writes": []} for ch in channels}
        return self._inner(opened).get_delta_channel_history(config=_local(config), channels=channels)

    def get_next_version(self, current: Optional[str], channel: None) -> str:
        return SqliteSaver.get_next_version(self, current, channel)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close every open thread connection (they reopen on next use)."""
        with self._lock:
            opened, self._open = list(self._open.values()), OrderedDict()
        for o in opened:
            with o.lock:
                o.conn.close()

    # -- async: the same work in a worker thread --------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: Optional[RunnableConfig],
        *,
        filter: Optional[Dict[str, Any]] = None,
        before: Optional[RunnableConfig] = None,
        limit: Optional[int] = None,
    ) -> AsyncIterator[CheckpointTuple]:
        rows = await asyncio.to_thread(lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for row in rows:
            yield row

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await asyncio.to_thread(lambda: self.get_delta_channel_history(config=config, channels=channels))


def _run_id(metadata: Any) -> Optional[str]:
    if metadata is None:
        return None
    try:
        value = json.loads(metadata).get("run_id")
    except (ValueError, AttributeError):
        return None
    return None if value is None else str(value)
