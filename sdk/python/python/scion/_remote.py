"""What :meth:`Branch.push` and :meth:`Branch.pull` answer: the transfer's report, typed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ._merge import MergeReport


@dataclass(frozen=True)
class Transfer:
    """What travelled: segments sent (and their bytes), found already there, and versions
    of the history whose root records went along."""

    segments_needed: int
    objects_sent: int
    bytes_sent: int
    objects_skipped: int
    ancestors: int

    @classmethod
    def from_json(cls, v: Mapping[str, Any]) -> "Transfer":
        return cls(
            segments_needed=int(v["segments_needed"]),
            objects_sent=int(v["objects_sent"]),
            bytes_sent=int(v["bytes_sent"]),
            objects_skipped=int(v["objects_skipped"]),
            ancestors=int(v["ancestors"]),
        )


@dataclass(frozen=True)
class PushReport:
    """A push: ``outcome`` is ``up_to_date``, ``created``, ``fast_forward`` or ``forced``."""

    branch: str
    remote: str
    remote_branch: str
    outcome: str
    version: int
    remote_version: int
    tracking: str
    """This store's remote-tracking branch (``db@REMOTE~BRANCH``), now the pushed version."""
    transfer: Transfer
    raw: Mapping[str, Any]

    @classmethod
    def from_json(cls, v: Mapping[str, Any]) -> "PushReport":
        return cls(
            branch=str(v["branch"]),
            remote=str(v["remote"]),
            remote_branch=str(v["remote_branch"]),
            outcome=str(v["outcome"]),
            version=int(v["version"]),
            remote_version=int(v["remote_version"]),
            tracking=str(v["tracking"]),
            transfer=Transfer.from_json(v["transfer"]),
            raw=v,
        )


@dataclass(frozen=True)
class PullReport:
    """A pull: ``outcome`` is ``up_to_date``, ``created``, ``fast_forward``, ``merged``,
    ``conflicts`` (nothing published; the remote's version is in ``tracking``) or
    ``fetched`` (``fetch_only``)."""

    remote_branch: str
    remote: str
    remote_version: int
    tracking: str
    into: str
    outcome: str
    transfer: Transfer
    merge: Optional[MergeReport]
    raw: Mapping[str, Any]

    @classmethod
    def from_json(cls, v: Mapping[str, Any]) -> "PullReport":
        merge = v.get("merge")
        return cls(
            remote_branch=str(v["remote_branch"]),
            remote=str(v["remote"]),
            remote_version=int(v["remote_version"]),
            tracking=str(v["tracking"]),
            into=str(v["into"]),
            outcome=str(v["outcome"]),
            transfer=Transfer.from_json(v["transfer"]),
            merge=MergeReport.from_json(merge) if merge else None,
            raw=v,
        )
