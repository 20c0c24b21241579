"""The at-rest operations, over any transport that answers scion's ``/v1`` API: the engine
embedded in this process (:func:`scion.open_store`) or a daemon (:class:`scion.Client`)."""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import (
    Any,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Protocol,
    Union,
)
from urllib.parse import quote, urlencode

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
    checkpoints_from_json,
    connect_closing,
    ttl_text,
)

PathLike = Union[str, "os.PathLike[str]"]


class _Keep:
    def __repr__(self) -> str:
        return "scion.KEEP"


#: For :meth:`Branch.touch`: leave the TTL as it is.
KEEP: Any = _Keep()


class Transport(Protocol):
    def call(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None) -> Any:
        """Answer one request with its JSON body, or raise the error it answered."""
        ...


def _segment(name: str) -> str:
    return quote(name, safe="@")


def _meta(meta: Optional[Mapping[str, Any]]) -> Dict[str, str]:
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise TypeError(f"meta is a mapping of strings, not {type(meta).__name__}")
    return {str(k): str(v) for k, v in meta.items()}


def _split_target(target: str) -> "tuple[str, str]":
    db, _, branch = target.partition("@")
    return db, (branch or "main")


class Branch:
    """One branch of a database (``db@branch``): a handle, cheap to make; nothing is read
    until a method asks. Safe to share between threads."""

    def __init__(self, api: "Api", target: str) -> None:
        db, branch = _split_target(target)
        if "@" in branch:
            raise ValueError(
                f"{target!r} names a checkpoint: a branch is 'db@branch' "
                "(fork it with branch.fork(name, at=checkpoint))"
            )
        self._api = api
        self.db = db
        self.name = branch

    @property
    def ref(self) -> str:
        """``db@branch``."""
        return f"{self.db}@{self.name}"

    def __repr__(self) -> str:
        return f"Branch({self.ref!r})"

    def __str__(self) -> str:
        return self.ref

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Branch) and other.ref == self.ref and other._api is self._api

    def __hash__(self) -> int:
        return hash(self.ref)

    def _path(self, suffix: str = "") -> str:
        return f"/v1/branches/{_segment(self.ref)}{suffix}"

    def info(self) -> BranchInfo:
        """The branch's status: version, checkout state, TTL, meta, ..."""
        return BranchInfo.from_json(self.db, self._api.call("GET", self._path()))

    def exists(self) -> bool:
        from ._errors import NotFound

        try:
            self.info()
            return True
        except NotFound:
            return False

    def fork(
        self,
        name: str,
        *,
        at: Optional[str] = None,
        ttl: Optional[TTL] = None,
        meta: Optional[Mapping[str, Any]] = None,
        ephemeral: bool = False,
    ) -> "Branch":
        """A new branch ``name`` at this branch's head (or its checkpoint ``at``). O(1):
        one small write, whatever the database's size. An ``ephemeral`` branch (one test's,
        one attempt's) takes its head history with it when destroyed or reaped, so ``gc``
        reclaims its pages at once; ``restore`` cannot bring it back."""
        body: Dict[str, Any] = {"source": self.ref, "name": name}
        if ephemeral:
            body["ephemeral"] = True
        if at is not None:
            body["at"] = at
        if ttl is not None:
            body["ttl"] = ttl_text(ttl)
        if meta:
            body["meta"] = _meta(meta)
        self._api.call("POST", "/v1/branches", body)
        return Branch(self._api, f"{self.db}@{name}")

    def checkout(self, *, force: bool = False) -> Path:
        """The path of the branch's writable checkout, a stock SQLite file (made if
        missing, refreshed if stale; a file with changes not yet checkpointed is returned
        as it is). ``force`` replaces a file holding changes scion cannot account for."""
        v = self._api.call("POST", self._path("/checkout"), {"force": force})
        return Path(v["path"])

    def release_checkout(self, *, force: bool = False) -> Dict[str, Any]:
        """End the branch's writable checkout on the daemon's host: the file is removed
        and writers through the VFS may write the branch again. Raises ``DirtyCheckout``
        while the file holds changes never checkpointed, unless ``force`` (which also drops
        other hosts' checkout records)."""
        query = "?force=true" if force else ""
        result: Dict[str, Any] = self._api.call("DELETE", self._path("/checkout") + query)
        return result

    def checkout_read_only(self, at: Optional[str] = None) -> Path:
        """A read-only file of the head (or of checkpoint ``at``)."""
        body: Dict[str, Any] = {"read_only": True}
        if at is not None:
            body["checkpoint"] = at
        return Path(self._api.call("POST", self._path("/checkout"), body)["path"])

    def connect(self, **sqlite3_kwargs: Any) -> sqlite3.Connection:
        """``sqlite3.connect`` on the branch's checkout (arguments are passed on). As a
        ``with`` block it commits (or rolls back, when the block raised) and closes on exit,
        so the checkout is free for ``checkpoint``, ``destroy`` and the next connection."""
        conn: sqlite3.Connection = connect_closing(self.checkout(), **sqlite3_kwargs)
        return conn

    def checkpoint(self, name: str, *, meta: Optional[Mapping[str, Any]] = None) -> CheckpointResult:
        """Commit what changed in the checkout and name the new version ``name``. Commit
        open transactions first: what SQLite has committed is what is kept."""
        body: Dict[str, Any] = {"name": name}
        if meta:
            body["meta"] = _meta(meta)
        v = self._api.call("POST", self._path("/checkpoints"), body)
        return CheckpointResult(
            branch=self.ref,
            name=name,
            version=int(v["version"]),
            meta=_meta(meta),
            committed=bool(v.get("committed", False)),
            pages_changed=int(v.get("pages_changed", 0)),
        )

    def checkpoints(self) -> List[Checkpoint]:
        return checkpoints_from_json(self.ref, self._api.call("GET", self._path("/checkpoints")))

    def rollback(
        self,
        to: str,
        *,
        force: bool = False,
        backup: bool = True,
        backup_ttl: Optional[TTL] = None,
    ) -> MoveResult:
        """Move the head back to checkpoint ``to`` (``fork`` and ``init`` name the fork
        point and the created version). The move is recorded in the head history
        (:meth:`undo` takes it back), and the replaced head is also kept on a safety fork
        unless ``backup`` is false. A protected branch (main) and changes not yet
        checkpointed are refused unless ``force``."""
        body = self._move_body(force, backup, backup_ttl)
        body["to"] = to
        return MoveResult.from_json(self._api.call("POST", self._path("/rollback"), body))

    def promote(
        self,
        onto: Union[str, "Branch"] = "main",
        *,
        force: bool = False,
        backup: bool = True,
        backup_ttl: Optional[TTL] = None,
    ) -> MoveResult:
        """Make branch ``onto`` (of the same database) hold this branch's head."""
        if isinstance(onto, Branch):
            if onto.db != self.db:
                raise ValueError(f"promote stays within a database: {self.ref} onto {onto.ref}")
            onto = onto.name
        body = self._move_body(force, backup, backup_ttl)
        body["onto"] = onto
        return MoveResult.from_json(self._api.call("POST", self._path("/promote"), body))

    def merge(
        self,
        source: Union[str, "Branch"],
        *,
        dry_run: bool = False,
        strategy: str = "fail",
        resolutions: Optional[Mapping[str, Any]] = None,
        conflict_granularity: str = "cell",
        schema_policy: str = "refuse",
        allow_violations: bool = False,
        base: Optional[str] = None,
        renumber: bool = False,
        force: bool = False,
    ) -> MergeReport:
        """Bring ``source``'s changes (a branch of the same database, or
        ``db@branch@checkpoint``) into this branch, three-way at the cell, atomically.

        Conflicts and violations are data, not exceptions: a report whose ``outcome`` is
        ``conflicts`` published nothing; settle them with ``strategy`` (``ours`` or
        ``theirs``) or ``resolutions`` (by conflict id: ``"ours"``, ``"theirs"``, or the
        value to write) and merge again. With ``renumber``, rows both sides added under
        the same INTEGER PRIMARY KEY are kept as two rows: the source's get ids after this
        branch's, its rows that refer to them by a foreign key follow, and the report's
        ``renumbered`` lists each id given. A protected branch needs ``force``."""
        if isinstance(source, Branch):
            if source.db != self.db:
                raise ValueError(f"merge stays within a database: {source.ref} into {self.ref}")
            source = source.ref
        body: Dict[str, Any] = {
            "from": source,
            "dry_run": dry_run,
            "strategy": strategy,
            "conflict_granularity": conflict_granularity,
            "schema_policy": schema_policy,
            "resolutions": dict(resolutions or {}),
            "allow_violations": allow_violations,
            "renumber": renumber,
            "force": force,
        }
        if base is not None:
            body["base"] = base
        return MergeReport.from_json(self._api.call("POST", self._path("/merge"), body))

    def push(
        self,
        remote: str,
        *,
        as_branch: Optional[str] = None,
        checkpoints: bool = False,
        force_with_lease: bool = False,
        force: bool = False,
    ) -> PushReport:
        """Send this branch to ``remote`` (a name from :meth:`Store.remotes`) and move the
        branch there, fast-forward only: only what the remote lacks travels. A remote head
        this store does not descend from raises :class:`scion.NotFastForward` (pull and
        merge first); ``force_with_lease`` replaces it only if it is still the version last
        seen here (:class:`scion.RemoteMoved` otherwise)."""
        body: Dict[str, Any] = {
            "remote": remote,
            "checkpoints": checkpoints,
            "force_with_lease": force_with_lease,
            "force": force,
        }
        if as_branch is not None:
            body["as"] = as_branch
        return PushReport.from_json(self._api.call("POST", self._path("/push"), body))

    def pull(
        self,
        remote: str,
        *,
        source: Optional[str] = None,
        strategy: str = "fail",
        fetch_only: bool = False,
        renumber: bool = False,
        force: bool = False,
    ) -> PullReport:
        """Bring ``source`` (the remote's branch; default: this branch's name) into this
        branch: its head goes into the read-only ``db@REMOTE~BRANCH``, then this branch is
        made, fast-forwarded or merged (conflicts are data in ``report.merge``; nothing is
        published). ``renumber`` as for :meth:`merge`. A protected branch needs ``force``."""
        body: Dict[str, Any] = {
            "remote": remote,
            "strategy": strategy,
            "fetch_only": fetch_only,
            "renumber": renumber,
            "force": force,
        }
        if source is not None:
            body["from"] = source
        return PullReport.from_json(self._api.call("POST", self._path("/pull"), body))

    def history(self, *, limit: int = 50) -> HeadHistory:
        """Every move of the head, newest first: commits, rollbacks, promotes, undos,
        restores (and the destroy of a destroyed branch, while its history lasts)."""
        return HeadHistory.from_json(self._api.call("GET", self._path(f"/history?limit={int(limit)}")))

    def undo(self, *, force: bool = False) -> MoveResult:
        """Take back the latest head move not undone yet (repeat to go further back). A
        protected branch needs ``force``."""
        return MoveResult.from_json(self._api.call("POST", self._path("/undo"), {"force": force}))

    def restore(self, to: Optional[int] = None, *, force: bool = False) -> MoveResult:
        """Put the head where history entry ``to`` left it, or bring a destroyed branch back
        (by default as it was when destroyed). A protected branch needs ``force``."""
        body: Dict[str, Any] = {"force": force}
        if to is not None:
            body["to"] = int(to)
        return MoveResult.from_json(self._api.call("POST", self._path("/restore"), body))

    @staticmethod
    def _move_body(force: bool, backup: bool, backup_ttl: Optional[TTL]) -> Dict[str, Any]:
        body: Dict[str, Any] = {"force": force, "no_backup": not backup}
        if backup_ttl is not None:
            body["backup_ttl"] = ttl_text(backup_ttl)
        return body

    def destroy(self, *, force: bool = False, missing_ok: bool = False) -> None:
        """Delete the branch, its checkpoints and its checkout. A checkout holding changes,
        and a protected branch, are refused unless ``force``."""
        from ._errors import BranchNotFound

        q = "?force=true" if force else ""
        try:
            self._api.call("DELETE", self._path(q))
        except BranchNotFound:
            if not missing_ok:
                raise

    def touch(self, ttl: Any = KEEP) -> None:
        """Count the branch as active now (its TTL restarts). ``ttl``: a new TTL,
        ``None`` to clear it, or :data:`KEEP`."""
        body: Dict[str, Any] = {}
        if ttl is None:
            body["ttl"] = ""
        elif ttl is not KEEP:
            body["ttl"] = ttl_text(ttl)
        self._api.call("POST", self._path("/touch"), body)

    def protect(self, on: bool = True) -> None:
        """Protect the branch from destroy, rollback, promote onto it and TTL reaping."""
        self._api.call("POST", self._path("/protect"), {"protected": on})

    def unprotect(self) -> None:
        self.protect(False)

    @contextmanager
    def attempt(
        self,
        name: Optional[str] = None,
        *,
        at: Optional[str] = None,
        ttl: Optional[TTL] = "1h",
        meta: Optional[Mapping[str, Any]] = None,
    ) -> Iterator["Attempt"]:
        """Fork, hand the fork to the block, and destroy it afterwards unless the block
        called ``.keep()`` or promoted it. The TTL (default an hour) reaps forks a killed
        process could not destroy."""
        if name is None:
            name = f"attempt-{os.urandom(5).hex()}"
        fork = self.fork(name, at=at, ttl=ttl, meta=meta)
        attempt = Attempt(self._api, fork.ref)
        try:
            yield attempt
        finally:
            if not attempt.kept:
                attempt.destroy(force=True, missing_ok=True)


class Attempt(Branch):
    """A fork made by :meth:`Branch.attempt`: destroyed when the block ends unless kept."""

    kept = False

    def keep(self) -> "Attempt":
        """Keep this fork after the block (its TTL still applies; ``touch(None)`` clears it)."""
        self.kept = True
        return self

    def promote(self, onto: Union[str, Branch] = "main", **kwargs: Any) -> MoveResult:
        result = super().promote(onto, **kwargs)
        self.kept = True
        return result


class Api:
    """Every at-rest operation, over one transport."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    def call(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None) -> Any:
        return self._transport.call(method, path, body)

    def create(self, db: str, source: Optional[PathLike] = None) -> Branch:
        body: Dict[str, Any] = {"name": db}
        if source is not None:
            src = Path(source)
            if not src.exists():
                raise FileNotFoundError(f"no such SQLite file: {src}")
            body["from"] = str(src.resolve())
        self.call("POST", "/v1/databases", body)
        return Branch(self, f"{db}@main")

    def databases(self) -> List[str]:
        return list(self.call("GET", "/v1/databases")["databases"])

    def remotes(self) -> Dict[str, str]:
        """The other stores this one pushes to and pulls from: name -> location."""
        return {str(r["remote"]): str(r["location"]) for r in self.call("GET", "/v1/remotes")}

    def add_remote(self, name: str, location: str) -> str:
        """Record the store at ``location`` (a directory, ``s3://``, ``az://``) as ``name``;
        returns the location as recorded."""
        return str(self.call("POST", "/v1/remotes", {"name": name, "location": location})["location"])

    def remove_remote(self, name: str) -> str:
        """Forget remote ``name``; returns where it was."""
        return str(self.call("DELETE", f"/v1/remotes/{_segment(name)}")["location"])

    def branch(self, target: str) -> Branch:
        return Branch(self, target)

    def branches(self, db: str) -> List[BranchInfo]:
        v = self.call("GET", f"/v1/databases/{_segment(db)}/branches")
        return [BranchInfo.from_json(db, b) for b in v["branches"]]

    def diff(
        self,
        left: Union[str, Branch],
        right: Union[str, Branch],
        *,
        table: Optional[str] = None,
        rows: bool = False,
        limit: int = 100,
        sql: bool = False,
        working: bool = False,
    ) -> Diff:
        """How version ``right`` differs from ``left`` (branches or ``db@branch@checkpoint``).
        ``rows`` lists the differing rows (at most ``limit`` per table); ``sql`` adds the
        statements that turn left into right at once (else :meth:`Diff.sql` reads them
        when asked). ``working`` reads a side whose checkout holds changes not checkpointed
        from that file (``scion diff --working``)."""
        q: Dict[str, Any] = {"from": str(left), "to": str(right)}
        if table is not None:
            q["table"] = table
        if rows:
            q["rows"] = "true"
            q["limit"] = str(limit)
        if working:
            q["working"] = "true"
        base = dict(q)

        def fetch_sql() -> Optional[str]:
            v = self.call("GET", "/v1/diff?" + urlencode({**base, "sql": "true"}))
            sql = v.get("sql")
            return str(sql) if sql is not None else None

        if sql:
            q["sql"] = "true"
        return Diff.from_json(self.call("GET", "/v1/diff?" + urlencode(q)), fetch_sql)

    def export(self, target: Union[str, Branch], path: PathLike, *, force: bool = False) -> ExportResult:
        """Write the version ``target`` names to ``path`` as a plain SQLite file."""
        body = {"target": str(target), "path": str(Path(path).resolve()), "force": force}
        v = self.call("POST", "/v1/export", body)
        return ExportResult(path=Path(v["path"]), bytes=int(v["bytes"]), raw=dict(v))

    def gc(self, *, grace: Optional[TTL] = None, force: bool = False) -> GcResult:
        """Delete what no branch or checkpoint can reach any more, and reap expired branches."""
        body: Dict[str, Any] = {"force": force}
        if grace is not None:
            body["grace"] = ttl_text(grace)
        return GcResult(raw=dict(self.call("POST", "/v1/gc", body)))

    def status(self) -> Dict[str, Any]:
        """The store's status: its location, every database and branch."""
        return dict(self.call("GET", "/v1/status"))
