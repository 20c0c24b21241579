"""What :meth:`Branch.merge` answers: the merge's report, typed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple


@dataclass(frozen=True)
class MergeCell:
    """One column of a conflict: its base, ours and theirs values (JSON: numbers, strings,
    ``None``, blobs as ``{"blob": "<hex>"}``)."""

    name: str
    base: Any
    ours: Any
    theirs: Any


@dataclass(frozen=True)
class MergeConflict:
    """One conflict. ``id`` is stable: a resolution names it."""

    id: str
    table: str
    kind: str
    """``update/update``, ``update/delete``, ``delete/update``, ``insert/insert`` or
    ``delete/delete`` (ours first, theirs second)."""
    key: Mapping[str, Any]
    columns: Tuple[MergeCell, ...]
    base: Optional[Mapping[str, Any]]
    ours: Optional[Mapping[str, Any]]
    theirs: Optional[Mapping[str, Any]]
    resolution: str
    """``ours``, ``theirs``, ``value`` (from the resolutions) or ``unresolved``."""

    @classmethod
    def from_json(cls, v: Mapping[str, Any]) -> "MergeConflict":
        return cls(
            id=str(v["id"]),
            table=str(v["table"]),
            kind=str(v["kind"]),
            key=dict(v.get("key") or {}),
            columns=tuple(MergeCell(str(c["name"]), c["base"], c["ours"], c["theirs"]) for c in v.get("columns", ())),
            base=v.get("base"),
            ours=v.get("ours"),
            theirs=v.get("theirs"),
            resolution=str(v["resolution"]),
        )


@dataclass(frozen=True)
class MergeViolation:
    """A constraint the merged result would break, row by row."""

    kind: str
    """``unique``, ``primary_key``, ``not_null``, ``check``, ``foreign_key`` or ``constraint``."""
    table: str
    key: Any
    parent: Optional[str]
    message: Optional[str]

    @classmethod
    def from_json(cls, v: Mapping[str, Any]) -> "MergeViolation":
        return cls(str(v["kind"]), str(v["table"]), v.get("key"), v.get("parent"), v.get("message"))


@dataclass(frozen=True)
class MergeReport:
    """Everything a merge found and did; complete whatever the outcome."""

    src: str
    dst: str
    dry_run: bool
    outcome: str
    """``up_to_date``, ``fast_forward``, ``merged`` or ``conflicts`` (nothing published)."""
    base: str
    """Which version both sides were compared against, and why."""
    conflicts: Tuple[MergeConflict, ...]
    violations: Tuple[MergeViolation, ...]
    schema_conflicts: Tuple[Mapping[str, Any], ...]
    tables: Tuple[Mapping[str, Any], ...]
    unresolved: int
    renumbered: Tuple[Mapping[str, Any], ...]
    """With ``renumber``: each row of the source given a new id, as
    ``{"table", "column", "from", "to"}``."""
    version: Optional[int]
    """The destination's new version, when one was published."""
    published: Optional[Mapping[str, Any]]
    """What was published, as in the JSON (``version``, ``root``, ``history_entry``, ...);
    ``None`` for a dry run or a stopped merge."""
    raw: Mapping[str, Any]
    """The whole report as the API answered it."""

    @property
    def stopped(self) -> bool:
        """Conflicts or violations stopped the merge: nothing was published."""
        return self.outcome == "conflicts"

    @classmethod
    def from_json(cls, v: Mapping[str, Any]) -> "MergeReport":
        published = v.get("published") or None
        return cls(
            src=str(v["src"]),
            dst=str(v["dst"]),
            dry_run=bool(v["dry_run"]),
            outcome=str(v["outcome"]),
            base=str(v["base"]["how"]),
            conflicts=tuple(MergeConflict.from_json(c) for c in v.get("conflicts", ())),
            violations=tuple(MergeViolation.from_json(x) for x in v.get("violations", ())),
            schema_conflicts=tuple(v.get("schema_conflicts", ())),
            tables=tuple(v.get("tables", ())),
            unresolved=int(v.get("unresolved", 0)),
            renumbered=tuple(v.get("renumbered", ())),
            version=published.get("version") if published else None,
            published=published,
            raw=v,
        )
