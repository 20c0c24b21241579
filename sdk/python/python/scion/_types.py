"""What scion's operations return: plain frozen dataclasses built from the API's answers."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

#: A time to live: a :class:`~datetime.timedelta`, whole seconds, or a duration string
#: such as ``"30s"``, ``"10m"``, ``"2h"``, ``"7d"``.
TTL = Union[timedelta, int, str]


def ttl_text(ttl: TTL) -> str:
    """``ttl`` as the API's duration string."""
    if isinstance(ttl, bool):
        raise TypeError("a TTL is a timedelta, whole seconds or a duration string such as '2h'")
    if isinstance(ttl, timedelta):
        seconds = int(ttl.total_seconds())
        if seconds <= 0:
            raise ValueError(f"a TTL must be positive, not {ttl!r}")
        return f"{seconds}s"
    if isinstance(ttl, int):
        if ttl <= 0:
            raise ValueError(f"a TTL must be positive, not {ttl}")
        return f"{ttl}s"
    if isinstance(ttl, str):
        return ttl
    raise TypeError(f"a TTL is a timedelta, whole seconds or a duration string, not {ttl!r}")


def _meta(v: Any) -> Dict[str, str]:
    return dict(v) if isinstance(v, Mapping) else {}


@dataclass(frozen=True)
class BranchInfo:
    """A branch as ``status`` and ``branches`` report it."""

    branch: str
    """``db@branch``."""
    version: int
    page_size: int
    page_count: int
    protected: bool
    checkpoints: int
    checkout: str
    """The checkout's state: ``none``, ``clean``, ``dirty``, ``stale``, ``unknown``."""
    parent: Optional[str]
    ttl_secs: Optional[int]
    ttl_left_secs: Optional[int]
    meta: Dict[str, str]
    session: Optional[str]
    """The id of the daemon session capturing the branch, if any."""
    raw: Dict[str, Any] = field(repr=False, compare=False)
    ephemeral: bool = False
    """Made for one test or attempt: destroyed, its head history goes with it."""

    @classmethod
    def from_json(cls, db: str, v: Mapping[str, Any]) -> "BranchInfo":
        return cls(
            branch=f"{db}@{v['branch']}",
            version=int(v["version"]),
            page_size=int(v["page_size"]),
            page_count=int(v["page_count"]),
            protected=bool(v["protected"]),
            checkpoints=int(v["checkpoints"]),
            checkout=str(v["checkout"]),
            parent=v.get("parent"),
            ttl_secs=v.get("ttl_secs"),
            ttl_left_secs=v.get("ttl_left_secs"),
            meta=_meta(v.get("meta")),
            session=v.get("session"),
            raw=dict(v),
            ephemeral=bool(v.get("ephemeral", False)),
        )


@dataclass(frozen=True)
class Checkpoint:
    """A named version of a branch."""

    branch: str
    name: str
    version: int
    meta: Dict[str, str]

    @property
    def target(self) -> str:
        """``db@branch@name``: what opens, forks or diffs this version."""
        return f"{self.branch}@{self.name}"


@dataclass(frozen=True)
class CheckpointResult(Checkpoint):
    """What :meth:`Branch.checkpoint` did."""

    committed: bool
    """A new version was committed (``False``: the checkout held nothing new)."""
    pages_changed: int


@dataclass(frozen=True)
class MoveResult:
    """What a rollback or a promote did."""

    branch: str
    version: int
    abandoned_version: int
    safety_fork: Optional[str]
    """A branch that also names the replaced head (``db@branch``), unless turned off or
    the move was an undo or a restore; the head history keeps it either way."""
    checkout: Optional[str]
    discarded_changes: bool
    warnings: Tuple[str, ...]
    history_entry: int = 0
    """The number of this move in the branch's head history (:meth:`Branch.history`)."""
    undid_entry: Optional[int] = None
    """On an undo: the entry it took back; restoring to that entry redoes it."""

    @classmethod
    def from_json(cls, v: Mapping[str, Any]) -> "MoveResult":
        return cls(
            branch=str(v["branch"]),
            version=int(v["version"]),
            abandoned_version=int(v["abandoned_version"]),
            history_entry=int(v.get("history_entry", 0)),
            undid_entry=v.get("undid_entry"),
            safety_fork=v.get("safety_fork"),
            checkout=v.get("checkout"),
            discarded_changes=bool(v.get("discarded_changes", False)),
            warnings=tuple(v.get("warnings", ())),
        )


@dataclass(frozen=True)
class HeadEntry:
    """One move of a branch head."""

    seq: int
    """Its number: :meth:`Branch.restore` takes it."""
    op: str
    """``commit``, ``rollback``, ``promote``, ``compact``, ``undo``, ``restore`` or ``destroy``."""
    old_version: int
    new_version: int
    at: str
    """The store's clock when the move was published (RFC 3339)."""
    holder: str
    detail: Optional[str]
    undoes: Optional[int]
    destroyed: bool
    """The move destroyed the branch."""

    @classmethod
    def from_json(cls, v: Mapping[str, Any]) -> "HeadEntry":
        return cls(
            seq=int(v["seq"]),
            op=str(v["op"]),
            old_version=int(v["old_version"]),
            new_version=int(v["new_version"]),
            at=str(v["at"]),
            holder=str(v["holder"]),
            detail=v.get("detail"),
            undoes=v.get("undoes"),
            destroyed=v.get("new") is None,
        )


@dataclass(frozen=True)
class HeadHistory:
    """A branch's head history, newest entry first."""

    branch: str
    live: bool
    """False when the branch was destroyed (:meth:`Branch.restore` brings it back)."""
    entries: Tuple[HeadEntry, ...]
    more: bool
    """Older entries exist beyond the limit asked for."""

    @classmethod
    def from_json(cls, v: Mapping[str, Any]) -> "HeadHistory":
        return cls(
            branch=str(v["branch"]),
            live=bool(v["live"]),
            entries=tuple(HeadEntry.from_json(e) for e in v.get("entries", ())),
            more=bool(v.get("more", False)),
        )

    def __iter__(self) -> Iterator[HeadEntry]:
        """The entries, newest first."""
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i: int) -> HeadEntry:
        return self.entries[i]


@dataclass(frozen=True)
class SchemaChange:
    kind: str
    """``table``, ``index``, ``view`` or ``trigger``."""
    name: str
    change: str
    """``added``, ``removed`` or ``changed``."""
    old_sql: Optional[str]
    new_sql: Optional[str]


@dataclass(frozen=True)
class RowChange:
    key: Dict[str, Any]
    before: Optional[Dict[str, Any]]
    after: Optional[Dict[str, Any]]


@dataclass(frozen=True)
class TableDiff:
    table: str
    matched_by: str
    """How rows are matched: ``primary key (id)``, or ``rowid``."""
    added: int
    removed: int
    changed: int
    added_rows: Tuple[RowChange, ...] = ()
    removed_rows: Tuple[RowChange, ...] = ()
    changed_rows: Tuple[RowChange, ...] = ()
    truncated: bool = False
    """More rows differ than were listed."""

    @property
    def total(self) -> int:
        return self.added + self.removed + self.changed


def _rows(v: Any) -> Tuple[RowChange, ...]:
    return tuple(RowChange(key=dict(r.get("key", {})), before=r.get("before"), after=r.get("after")) for r in (v or ()))


@dataclass(frozen=True)
class Diff:
    """How two versions differ: schema, and rows per table."""

    left: str
    right: str
    schema_changes: Tuple[SchemaChange, ...]
    tables: Tuple[TableDiff, ...]
    pages_differing: int
    pages_read: int
    sql_text: Optional[str] = field(default=None, repr=False)
    fetch_sql: Optional[Callable[[], Optional[str]]] = field(default=None, repr=False, compare=False)
    #: Branches whose checkout holds changes not checkpointed, left out of this diff
    #: (``working=True`` takes them in).
    unsaved_checkouts: Tuple[str, ...] = ()
    #: With ``working=True``: the branches read from their checkout file.
    working_files: Tuple[str, ...] = ()

    def sql(self) -> str:
        """The SQL statements that turn ``left`` into ``right`` (read when first asked)."""
        if self.sql_text is None and self.fetch_sql is not None:
            object.__setattr__(self, "sql_text", self.fetch_sql() or "")
        return self.sql_text or ""

    @classmethod
    def from_json(cls, v: Mapping[str, Any], fetch_sql: Optional[Callable[[], Optional[str]]] = None) -> "Diff":
        tables = []
        for t in v.get("tables", ()):
            rows = t.get("rows") or {}
            tables.append(
                TableDiff(
                    table=t["table"],
                    matched_by=t["matched_by"],
                    added=int(t["added"]),
                    removed=int(t["removed"]),
                    changed=int(t["changed"]),
                    added_rows=_rows(rows.get("added")),
                    removed_rows=_rows(rows.get("removed")),
                    changed_rows=_rows(rows.get("changed")),
                    truncated=bool(rows.get("truncated", False)),
                )
            )
        return cls(
            left=v["left"],
            right=v["right"],
            schema_changes=tuple(
                SchemaChange(
                    kind=s["kind"],
                    name=s["name"],
                    change=s["change"],
                    old_sql=s.get("old_sql"),
                    new_sql=s.get("new_sql"),
                )
                for s in v.get("schema_changes", ())
            ),
            tables=tuple(tables),
            pages_differing=int(v.get("pages_differing", 0)),
            pages_read=int(v.get("pages_read", 0)),
            sql_text=v.get("sql"),
            fetch_sql=fetch_sql,
            unsaved_checkouts=tuple(v.get("unsaved_checkouts", ())),
            working_files=tuple(v.get("working_files", ())),
        )

    @property
    def empty(self) -> bool:
        """The two versions hold the same schema and rows."""
        return not self.schema_changes and all(t.total == 0 for t in self.tables)

    def table(self, name: str) -> Optional[TableDiff]:
        return next((t for t in self.tables if t.table == name), None)

    def __bool__(self) -> bool:
        return not self.empty


@dataclass(frozen=True)
class ExportResult:
    path: Path
    bytes: int
    raw: Dict[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class GcResult:
    raw: Dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]


def checkpoints_from_json(branch: str, v: Mapping[str, Any]) -> List[Checkpoint]:
    return [
        Checkpoint(branch=branch, name=c["name"], version=int(c["version"]), meta=_meta(c.get("meta")))
        for c in v.get("checkpoints", ())
    ]


class ClosingConnection(sqlite3.Connection):
    """A ``sqlite3.Connection`` whose ``with`` block also closes it: the stdlib's only ends
    the transaction, which leaves a checkout open that a checkpoint, a destroy or the end
    of an attempt then finds busy."""

    def __exit__(self, *exc: Any) -> Any:
        try:
            return super().__exit__(*exc)
        finally:
            self.close()


def connect_closing(path: Union[str, "os.PathLike[str]"], **sqlite3_kwargs: Any) -> ClosingConnection:
    """``sqlite3.connect(path, **kwargs)`` returning a :class:`ClosingConnection` (unless a
    ``factory`` is given)."""
    sqlite3_kwargs.setdefault("factory", ClosingConnection)
    conn: ClosingConnection = sqlite3.connect(str(path), **sqlite3_kwargs)
    return conn
