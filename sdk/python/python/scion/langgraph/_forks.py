"""ThreadForks: an app database per LangGraph thread that follows the graph through
time travel."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Set

from langchain_core.runnables import RunnableConfig

from .. import _errors, vfs
from .._api import Branch
from .._store import Store
from ._names import RECORDING_PREFIX, NoRecordedState, thread_branch_name, thread_id_of


@dataclass
class _ThreadState:
    """What the companion knows of one thread: the LangGraph checkpoint its app branch
    is at (the tip), and the checkpoints recorded so far."""

    tip: Optional[str] = None
    recorded: Set[str] = field(default_factory=set)
    loaded: bool = False
    has_branch: bool = False
    changed: threading.Condition = field(default_factory=threading.Condition)


class ThreadForks:
    """Each LangGraph thread gets its own branch of the app database ``db`` (forked from
    ``base`` on first use), kept in step with the graph by a :class:`ScionSaver` it is
    attached to (``ScionSaver(store, forks=forks)``):

    - at each checkpoint LangGraph stores, a scion checkpoint ``lg-<checkpoint id>`` of
      the app branch records its state;
    - a replay or fork from an earlier checkpoint (a stored checkpoint whose parent is
      not the tip, or a ``fork``/``update`` one) rolls the app branch back to the state
      recorded for that parent first;
    - :meth:`connect` in a node opens the app database once the checkpoint its step runs
      from is recorded (``wait`` seconds at most);
    - ``delete_thread`` destroys the thread's app branch, ``copy_thread`` forks it.
    """

    def __init__(
        self,
        store: Store,
        db: str,
        *,
        base: str = "main",
        prefix: str = "thread-",
        ttl: Optional[str] = None,
        wait: float = 30.0,
    ) -> None:
        self.store = store
        self.db = db
        self.base = store.branch(f"{db}@{base}")
        if not self.base.exists():
            raise _errors.BranchNotFound(f"no branch {self.base.ref} to fork threads from", code="branch_not_found")
        self.prefix = prefix
        self.ttl = ttl
        self.wait = wait
        self._lock = threading.Lock()
        self._states: Dict[str, _ThreadState] = {}

    def branch_for(self, thread_id: str) -> Branch:
        """The app branch of ``thread_id`` (it may not exist yet)."""
        return self.store.branch(f"{self.db}@{thread_branch_name(self.prefix, thread_id)}")

    def branch(self, thread_id: str) -> Branch:
        """The app branch of ``thread_id``, forked from the base on first use."""
        branch = self.branch_for(thread_id)
        state = self._state(thread_id)
        if state.has_branch:
            return branch
        if not branch.exists():
            try:
                self.base.fork(branch.name, ttl=self.ttl, meta={"langgraph_thread": thread_id})
            except _errors.BranchExists:
                pass  # forked meanwhile
        state.has_branch = True
        return branch

    def connect(
        self, config: RunnableConfig, *, timeout: Optional[float] = None, **sqlite3_kwargs: Any
    ) -> sqlite3.Connection:
        """The app database of the thread ``config`` names, through the scion VFS, in the
        state of the checkpoint the current step runs from (a node's ``config``). Outside
        a run (a config without a step) it opens the branch's head."""
        thread_id = thread_id_of(config)
        if thread_id is None:
            raise _errors.InvalidInput("the config names no thread_id", code="invalid_input")
        configurable = config.get("configurable", {})
        base = (configurable.get("checkpoint_map") or {}).get("")
        branch = self.branch(thread_id)
        if base is not None:
            self._await_recorded(thread_id, str(base), self.wait if timeout is None else timeout)
        return vfs.connect(branch.ref, store=self.store.location, **sqlite3_kwargs)

    async def aconnect(self, config: RunnableConfig, **sqlite3_kwargs: Any) -> sqlite3.Connection:
        """:meth:`connect` for async nodes: waits without blocking the event loop."""
        return await asyncio.to_thread(lambda: self.connect(config, **sqlite3_kwargs))

    def rewind(self, thread_id: str, checkpoint_id: str) -> None:
        """Put the thread's app database back in its state at LangGraph checkpoint
        ``checkpoint_id`` (the head history keeps the replaced head: ``scion undo``)."""
        state = self._state(thread_id)
        with state.changed:
            self._restore(thread_id, checkpoint_id)
            state.tip = checkpoint_id
            state.changed.notify_all()

    def fork_thread(self, from_thread: str, at_checkpoint: str, new_thread: str) -> Branch:
        """A new thread's app branch, forked from ``from_thread``'s at the state recorded
        for ``at_checkpoint``. Pair it with ``saver.copy_thread(from_thread, new_thread)``
        (or call :meth:`ScionSaver.copy_thread`, which forks the app database too) and
        invoke the new thread from ``at_checkpoint``."""
        self._check_fork(from_thread, at_checkpoint, new_thread)
        source, target = self.branch_for(from_thread), self.branch_for(new_thread)
        name = RECORDING_PREFIX + at_checkpoint
        forked = source.fork(target.name, at=name, ttl=self.ttl, meta={"langgraph_thread": new_thread})
        forked.checkpoint(name)
        state = self._state(new_thread)
        with state.changed:
            state.tip = at_checkpoint
            state.recorded.add(at_checkpoint)
        return forked

    def _check_fork(self, from_thread: str, at_checkpoint: str, new_thread: str) -> None:
        source = self.branch_for(from_thread)
        if not source.exists():
            raise _errors.NotFound(f"no thread {from_thread!r}: it has no app branch", code="not_found")
        if self.branch_for(new_thread).exists():
            raise _errors.AlreadyExists(f"thread {new_thread!r} has an app branch already", code="already_exists")
        if RECORDING_PREFIX + at_checkpoint not in {c.name for c in source.checkpoints()}:
            raise NoRecordedState(
                f"{source.ref} has no recorded state for checkpoint {at_checkpoint}",
                code="checkpoint_not_found",
                hint="only checkpoints stored while ThreadForks was attached to the saver are recorded",
            )

    def delete(self, thread_id: str) -> None:
        """Destroy the thread's app branch (no-op when it has none)."""
        self.branch_for(thread_id).destroy(force=True, missing_ok=True)
        with self._lock:
            self._states.pop(thread_id, None)

    # -- hooks the saver calls -----------------------------------------------------------

    def _state(self, thread_id: str) -> _ThreadState:
        with self._lock:
            state = self._states.setdefault(thread_id, _ThreadState())
        with state.changed:
            if not state.loaded:
                branch = self.branch_for(thread_id)
                if branch.exists():
                    state.has_branch = True
                    names = [c.name for c in branch.checkpoints() if c.name.startswith(RECORDING_PREFIX)]
                    ids = [n[len(RECORDING_PREFIX) :] for n in names]
                    state.recorded.update(ids)
                    # LangGraph's ids grow with time: the newest recorded is the tip.
                    state.tip = max(ids) if ids else None
                state.loaded = True
        return state

    def _restore(self, thread_id: str, checkpoint_id: Optional[str]) -> None:
        branch = self.branch(thread_id)
        name = "fork" if checkpoint_id is None else RECORDING_PREFIX + checkpoint_id
        checkpoints = {c.name: c.version for c in branch.checkpoints()}
        if checkpoint_id is not None and name not in checkpoints:
            raise NoRecordedState(
                f"{branch.ref} has no recorded state for checkpoint {checkpoint_id}",
                code="checkpoint_not_found",
                hint="only checkpoints stored while ThreadForks was attached to the saver are recorded",
            )
        if checkpoints.get(name) == branch.info().version:
            return
        branch.rollback(name, force=True, backup=False)

    def _on_put(self, thread_id: str, *, parent: Optional[str], checkpoint: str, source: str) -> None:
        state = self._state(thread_id)
        with state.changed:
            branch = self.branch(thread_id)
            forward = source in ("loop", "input") and parent == state.tip
            if not forward:
                self._restore(thread_id, parent)
            if checkpoint not in state.recorded:
                try:
                    branch.checkpoint(RECORDING_PREFIX + checkpoint, meta={"langgraph_source": source})
                except _errors.CheckpointExists:
                    pass
                state.recorded.add(checkpoint)
            state.tip = checkpoint
            state.changed.notify_all()

    def _on_copy(self, source: str, target: str) -> None:
        src = self._state(source)
        with src.changed:
            tip = src.tip
        source_branch = self.branch_for(source)
        if not source_branch.exists():
            return
        target_branch = self.branch_for(target)
        target_branch.destroy(force=True, missing_ok=True)
        forked = source_branch.fork(target_branch.name, ttl=self.ttl, meta={"langgraph_thread": target})
        state = self._state(target)
        with state.changed:
            state.recorded.clear()
            state.tip = tip
            if tip is not None:
                forked.checkpoint(RECORDING_PREFIX + tip)
                state.recorded.add(tip)

    def _await_recorded(self, thread_id: str, checkpoint: str, timeout: float) -> None:
        state = self._state(thread_id)
        with state.changed:
            if not state.changed.wait_for(lambda: checkpoint in state.recorded, timeout=timeout):
                raise _errors.Transient(
                    f"LangGraph has not stored checkpoint {checkpoint} of thread {thread_id!r} "
                    f"within {timeout:g} s: the app database follows the checkpoints the saver stores",
                    code="not_recorded",
                    hint="attach ThreadForks to the graph's ScionSaver (ScionSaver(store, forks=...)) and "
                    "run with durability 'async' or 'sync' (with 'exit' only the last checkpoint is stored)",
                )
            if state.tip != checkpoint:
                # Another run of this thread moved the app branch meanwhile: this step
                # runs from an older checkpoint, so the app database goes back to it.
                self._restore(thread_id, checkpoint)
                state.tip = checkpoint
