"""scion's errors: one class per error code, each under the family its exit code names.

The codes are the CLI's ``--json`` codes and the daemon's; catch a family
(``scion.NotFound``, ``scion.Refused``, ...) or one code (``scion.BranchNotFound``,
``scion.DirtyCheckout``, ...). Every error carries ``.code``, ``.message``, ``.hint``
(what to do next, when there is something), ``.retryable`` and ``.exit_code``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Type


class Error(Exception):
    """Any error scion reports."""

    exit_code_of_family: int = 1

    def __init__(
        self,
        message: str,
        *,
        code: str = "error",
        hint: Optional[str] = None,
        retryable: bool = False,
        exit_code: Optional[int] = None,
        status: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.hint = hint
        self.retryable = retryable
        self.exit_code = self.exit_code_of_family if exit_code is None else exit_code
        self.status = status

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} (hint: {self.hint})"
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class Failure(Error):
    """Something failed that is neither the caller's input nor the store's state."""

    exit_code_of_family = 1


class NotFound(Error):
    """A database, branch, checkpoint, table or session that does not exist."""

    exit_code_of_family = 3


class AlreadyExists(Error):
    """A name that is taken, or an output file that exists."""

    exit_code_of_family = 4


class Conflict(Error):
    """Someone else moved the branch first: read it again and retry if it still makes sense."""

    exit_code_of_family = 5


class Refused(Error):
    """The operation would lose something (unsaved changes, a protected branch, a lease)."""

    exit_code_of_family = 6


class Corrupt(Error):
    """The store holds damaged or missing data; nothing was changed."""

    exit_code_of_family = 7


class InvalidInput(Error):
    """A bad name, duration or argument."""

    exit_code_of_family = 8


class Transient(Error):
    """Try again: the store or a writer was briefly unavailable."""

    exit_code_of_family = 9


class Unsupported(Error):
    """Not possible here (a filesystem without clones, a store format too new)."""

    exit_code_of_family = 10


_FAMILIES: Dict[int, Type[Error]] = {
    f.exit_code_of_family: f
    for f in (
        Failure,
        NotFound,
        AlreadyExists,
        Conflict,
        Refused,
        Corrupt,
        InvalidInput,
        Transient,
        Unsupported,
    )
}

# One class per code, under the family its exit code names; the codes that name a family
# (conflict, corrupt, invalid_input) are that family's class.


class InvalidName(InvalidInput):
    """Error code ``invalid_name``."""


class NotInitialized(NotFound):
    """Error code ``not_initialized``."""


class AlreadyInitialized(AlreadyExists):
    """Error code ``already_initialized``."""


class FormatTooNew(Unsupported):
    """Error code ``format_too_new``."""


class DatabaseNotFound(NotFound):
    """Error code ``database_not_found``."""


class DatabaseExists(AlreadyExists):
    """Error code ``database_exists``."""


class BranchNotFound(NotFound):
    """Error code ``branch_not_found``."""


class BranchExists(AlreadyExists):
    """Error code ``branch_exists``."""


class RemoteNotFound(NotFound):
    """Error code ``remote_not_found``."""


class RemoteExists(AlreadyExists):
    """Error code ``remote_exists``."""


class NotFastForward(Conflict):
    """Error code ``not_fast_forward``: the remote's branch holds versions this store does not;
    pull and merge first."""


class RemoteMoved(Conflict):
    """Error code ``remote_moved``: ``force_with_lease`` found the remote's branch moved."""


class TrackingBranch(Refused):
    """Error code ``tracking_branch``: only a pull moves a remote-tracking branch."""


class CheckpointNotFound(NotFound):
    """Error code ``checkpoint_not_found``."""


class CheckpointExists(AlreadyExists):
    """Error code ``checkpoint_exists``."""


class ReservedName(InvalidInput):
    """Error code ``reserved_name``."""


class DirtyCheckout(Refused):
    """Error code ``dirty_checkout``."""


class UnknownCheckout(Refused):
    """Error code ``unknown_checkout``."""


class StaleCheckout(Refused):
    """Error code ``stale_checkout``."""


class CheckoutBusy(Refused):
    """Error code ``checkout_busy``."""


class CheckedOut(Refused):
    """Error code ``checked_out``: the branch is written through its checkout file
    (``scion checkout <branch> --release`` ends it)."""


class NotSqlite(InvalidInput):
    """Error code ``not_sqlite``."""


class JournalLeftovers(Refused):
    """Error code ``journal_leftovers``."""


class CheckpointTarget(InvalidInput):
    """Error code ``checkpoint_target``."""


class NoSuchDirectory(InvalidInput):
    """Error code ``no_such_directory``."""


class OutputIsDirectory(InvalidInput):
    """Error code ``output_is_directory``."""


class InsideStore(InvalidInput):
    """Error code ``inside_store``."""


class SourceBusy(Transient):
    """Error code ``source_busy``."""


class HotJournal(Refused):
    """Error code ``hot_journal``."""


class OutputExists(AlreadyExists):
    """Error code ``output_exists``."""


class CloneUnsupported(Unsupported):
    """Error code ``clone_unsupported``."""


class Protected(Refused):
    """Error code ``protected``."""


class LeaseHeld(Refused):
    """Error code ``lease_held``."""


class BeingDestroyed(NotFound):
    """Error code ``being_destroyed``."""


class NoSuchTable(NotFound):
    """Error code ``no_such_table``."""


class InvalidDuration(InvalidInput):
    """Error code ``invalid_duration``."""


class NothingToUndo(Refused):
    """Error code ``nothing_to_undo``."""


class HistoryEntryNotFound(NotFound):
    """Error code ``history_entry_not_found``."""


class SegmentCollision(Transient):
    """Error code ``segment_collision``."""


class CommitExpired(Transient):
    """Error code ``commit_expired``."""


class CommitLost(Transient):
    """Error code ``commit_lost``."""


class VerifyFailed(Corrupt):
    """Error code ``verify_failed``."""


class GraceBelowMinimum(Refused):
    """Error code ``grace_below_minimum``."""


class StoreTransient(Transient):
    """Error code ``store_transient``."""


class MissingData(Corrupt):
    """Error code ``missing_data``."""


class Unauthorized(Refused):
    """Error code ``unauthorized``."""


class StoreConfig(InvalidInput):
    """Error code ``store_config``."""


class StoreError(Failure):
    """Error code ``store_error``."""


class SqliteError(Failure):
    """Error code ``sqlite_error``."""


class IoError(Failure):
    """Error code ``io_error``."""


class Fenced(Conflict):
    """Error code ``fenced``."""


class NotWal(Refused):
    """Error code ``not_wal``."""


class CaptureUnsettled(Transient):
    """Error code ``capture_unsettled``."""


class SessionNotFound(NotFound):
    """Error code ``session_not_found``."""


class NoSuchEndpoint(NotFound):
    """Error code ``no_such_endpoint``."""


class SocketOnly(Refused):
    """Error code ``socket_only``."""


class Forbidden(Refused):
    """Error code ``forbidden``."""


class RequestInProgress(Transient):
    """Error code ``request_in_progress``."""


class Internal(Failure):
    """Error code ``internal``."""


class DaemonUnreachable(Transient):
    """Error code ``daemon_unreachable``."""


class DaemonError(Failure):
    """Error code ``daemon_error``."""


_BY_CODE: Dict[str, Type[Error]] = {
    "invalid_name": InvalidName,
    "not_initialized": NotInitialized,
    "already_initialized": AlreadyInitialized,
    "format_too_new": FormatTooNew,
    "database_not_found": DatabaseNotFound,
    "database_exists": DatabaseExists,
    "branch_not_found": BranchNotFound,
    "branch_exists": BranchExists,
    "remote_not_found": RemoteNotFound,
    "remote_exists": RemoteExists,
    "not_fast_forward": NotFastForward,
    "remote_moved": RemoteMoved,
    "tracking_branch": TrackingBranch,
    "checkpoint_not_found": CheckpointNotFound,
    "checkpoint_exists": CheckpointExists,
    "reserved_name": ReservedName,
    "conflict": Conflict,
    "dirty_checkout": DirtyCheckout,
    "unknown_checkout": UnknownCheckout,
    "stale_checkout": StaleCheckout,
    "checkout_busy": CheckoutBusy,
    "checked_out": CheckedOut,
    "not_sqlite": NotSqlite,
    "journal_leftovers": JournalLeftovers,
    "checkpoint_target": CheckpointTarget,
    "no_such_directory": NoSuchDirectory,
    "output_is_directory": OutputIsDirectory,
    "inside_store": InsideStore,
    "source_busy": SourceBusy,
    "hot_journal": HotJournal,
    "output_exists": OutputExists,
    "clone_unsupported": CloneUnsupported,
    "corrupt": Corrupt,
    "protected": Protected,
    "lease_held": LeaseHeld,
    "being_destroyed": BeingDestroyed,
    "no_such_table": NoSuchTable,
    "invalid_duration": InvalidDuration,
    "invalid_input": InvalidInput,
    "nothing_to_undo": NothingToUndo,
    "history_entry_not_found": HistoryEntryNotFound,
    "segment_collision": SegmentCollision,
    "commit_expired": CommitExpired,
    "commit_lost": CommitLost,
    "verify_failed": VerifyFailed,
    "grace_below_minimum": GraceBelowMinimum,
    "store_transient": StoreTransient,
    "missing_data": MissingData,
    "unauthorized": Unauthorized,
    "store_config": StoreConfig,
    "store_error": StoreError,
    "sqlite_error": SqliteError,
    "io_error": IoError,
    "fenced": Fenced,
    "not_wal": NotWal,
    "capture_unsettled": CaptureUnsettled,
    "session_not_found": SessionNotFound,
    "no_such_endpoint": NoSuchEndpoint,
    "socket_only": SocketOnly,
    "forbidden": Forbidden,
    "request_in_progress": RequestInProgress,
    "internal": Internal,
    "daemon_unreachable": DaemonUnreachable,
    "daemon_error": DaemonError,
}
# Shown as ``scion.BranchNotFound``, where users catch them.
for _cls in (Error, *_FAMILIES.values(), *_BY_CODE.values()):
    _cls.__module__ = "scion"

BY_CODE: Mapping[str, Type[Error]] = _BY_CODE
ERROR_CODES = tuple(_BY_CODE)


def from_body(body: Mapping[str, Any], status: Optional[int] = None) -> Error:
    """The exception for an API error body (``{"code", "message", "hint", ...}``)."""
    code = str(body.get("code", "error"))
    exit_code = body.get("exit_code")
    cls = BY_CODE.get(code)
    if cls is None:
        cls = _FAMILIES.get(exit_code, Error) if isinstance(exit_code, int) else Error
    return cls(
        str(body.get("message", code)),
        code=code,
        hint=body.get("hint"),
        retryable=bool(body.get("retryable", False)),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        status=status,
    )


def from_envelope(text: str, status: Optional[int] = None) -> Error:
    """The exception for an ``{"error": {...}}`` envelope given as JSON text."""
    try:
        value = json.loads(text)
        body = value["error"]
    except (ValueError, KeyError, TypeError):
        return Failure(f"unexpected answer: {text[:200]}", code="daemon_error", status=status)
    return from_body(body, status)


class EngineNotInstalled(ImportError):
    """Raised by the stdlib-only distribution (``scion-client``) for what needs the engine in
    this process (``open_store``, ``Store``, ``scion.vfs``): it talks to ``scion serve`` only."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"scion.{what} needs the embedded engine, and this is scion-client, which talks to "
            "`scion serve` only: use scion.Client (or scion.aio.connect), or install the scion wheel "
            "(./scripts/build-wheel makes it)"
        )
        self.what = what
