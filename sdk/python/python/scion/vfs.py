"""Open a branch through the scion VFS from Python's own ``sqlite3`` module: no checkout
file, each read transaction sees one version, each commit publishes the pages SQLite wrote.

    import scion.vfs
    conn = scion.vfs.connect("shop@main", store="./.scion")
    conn.execute("UPDATE items SET price = price * 2")
    conn.commit()                      # a new version of shop@main

The package's native module is also a SQLite loadable extension. :func:`load` registers the
VFS in the SQLite library the ``sqlite3`` module uses: through
``Connection.load_extension`` where the interpreter allows it, else (Python builds without
``--enable-loadable-sqlite-extensions``, such as pyenv's default) by calling the same
library's ``sqlite3_load_extension`` through ``ctypes``. A Python whose ``sqlite3`` module
has SQLite linked in statically, with extension loading compiled out, cannot use the VFS:
use :meth:`scion.Branch.checkout` there.
"""

from __future__ import annotations

import ctypes
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Optional, Union
from urllib.parse import quote

from . import _errors, _native

_ENTRY = "sqlite3_native_init"
_loaded: Optional[str] = None
_lock = threading.Lock()


def _module_path() -> str:
    return str(_native.__file__)


def _sqlite_library() -> Optional[str]:
    """The SQLite shared library this process's ``sqlite3`` module uses."""
    import _sqlite3  # noqa: F401  (mapped into the process by this import)

    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "libsqlite3" in os.path.basename(path):
                    return path
    except OSError:
        pass
    return None


def _load_with_ctypes() -> None:
    path = _sqlite_library()
    if path is None:
        raise _errors.Unsupported(
            "this Python's sqlite3 module has no shared SQLite library to load the scion VFS into",
            code="unsupported",
            hint="use Branch.checkout() and a plain file, or a Python built with loadable SQLite extensions",
        )
    lib = ctypes.CDLL(path)
    db = ctypes.c_void_p()
    if lib.sqlite3_open(b":memory:", ctypes.byref(db)) != 0:
        raise _errors.Failure("could not open a SQLite connection to load the scion VFS", code="sqlite_error")
    try:
        lib.sqlite3_enable_load_extension(db, 1)
        err = ctypes.c_char_p()
        rc = lib.sqlite3_load_extension(db, _module_path().encode(), _ENTRY.encode(), ctypes.byref(err))
        if rc != 0:
            message = err.value.decode(errors="replace") if err.value else f"error {rc}"
            raise _errors.Failure(f"loading the scion VFS failed: {message}", code="sqlite_error")
    finally:
        lib.sqlite3_close(db)


def load() -> str:
    """Register the scion VFS with the SQLite that ``sqlite3`` uses (once per process).
    Returns how: ``"load_extension"`` or ``"ctypes"``."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        conn = sqlite3.connect(":memory:")
        try:
            enable = getattr(conn, "enable_load_extension", None)
            if enable is not None:
                enable(True)
                # sqlite3 derives the entry point from the file name: sqlite3_native_init.
                conn.load_extension(_module_path())
                _loaded = "load_extension"
            else:
                _load_with_ctypes()
                _loaded = "ctypes"
        finally:
            conn.close()
        return _loaded


def uri(target: str, *, store: Union[str, "os.PathLike[str]", None] = None, read_only: bool = False) -> str:
    """``file:<target>?vfs=scion&store=...``: what ``sqlite3.connect(..., uri=True)`` opens."""
    spec = os.fspath(store) if store is not None else os.environ.get("SCION_STORE")
    params = "vfs=scion"
    if spec:
        if "://" not in spec:
            spec = str(Path(spec).resolve())
        params += "&store=" + quote(spec, safe="/:")
    if read_only:
        params += "&mode=ro"
    return f"file:{target}?{params}"


def connect(
    target: str,
    *,
    store: Union[str, "os.PathLike[str]", None] = None,
    read_only: bool = False,
    **sqlite3_kwargs: Any,
) -> sqlite3.Connection:
    """``sqlite3.connect`` on ``target`` (``db@branch``, or ``db@branch@checkpoint``
    read-only) through the scion VFS; ``store`` defaults to ``SCION_STORE`` or the nearest
    ``.scion``."""
    load()
    try:
        name = uri(target, store=store, read_only=read_only)
        conn: sqlite3.Connection = sqlite3.connect(name, uri=True, **sqlite3_kwargs)
        conn.execute("SELECT 1 FROM sqlite_schema LIMIT 1").fetchall()
    except sqlite3.OperationalError as e:
        _diagnose(target, store)
        raise _errors.Failure(f"opening {target} through the scion VFS: {e}", code="sqlite_error") from None
    return conn


def _diagnose(target: str, store: Union[str, "os.PathLike[str]", None]) -> None:
    """Raise the engine's own error for a target that cannot be opened (SQLite can only
    say "unable to open database file")."""
    from ._store import open_store

    opened = open_store(store)
    parts = target.split("@")
    branch = opened.branch("@".join(parts[:2]))
    if len(parts) > 2:
        names = [c.name for c in branch.checkpoints()]
        if parts[2] not in names and parts[2] not in ("fork", "init"):
            raise _errors.CheckpointNotFound(
                f"checkpoint {target} does not exist", code="checkpoint_not_found", hint=f"checkpoints: {names}"
            )
    else:
        branch.info()
