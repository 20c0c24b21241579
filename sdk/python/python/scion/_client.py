"""A client of ``scion serve``: what needs a live process (sessions that capture a writer's
commits as they happen, events), plus every at-rest operation, over the daemon's unix
socket (or TCP with a token)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union
from urllib.parse import urlsplit

from . import _errors
from ._api import Api, Branch, _meta
from ._types import TTL, ttl_text


def _stable_hash(name: str) -> int:
    # FNV-1a over the UTF-8 bytes: the daemon derives its socket's name the same way.
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def default_socket(store_location: str) -> Path:
    """The socket ``scion serve`` listens on by default for the store at ``store_location``
    (``SCION_SOCKET`` when set)."""
    env = os.environ.get("SCION_SOCKET")
    if env:
        return Path(env)
    h = _stable_hash(store_location) & 0xFFFFFFFFFFFF
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run:
        return Path(run) / f"scion-{os.getuid()}" / f"{h:012x}.sock"
    # Never a shared directory such as /tmp: another user could make it first.
    state = os.environ.get("XDG_STATE_HOME") or (
        os.path.join(os.environ["HOME"], ".local", "state") if os.environ.get("HOME") else None
    )
    if state:
        return Path(state) / "scion" / "run" / f"{h:012x}.sock"
    return Path(tempfile.gettempdir()) / f"scion-{os.getuid()}" / f"{h:012x}.sock"


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._socket_path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._socket_path)
        except OSError:
            s.close()
            raise
        self.sock = s


class _HttpTransport:
    """One keep-alive connection per thread, so a client is safe to share."""

    def __init__(self, socket_path: Optional[Path], url: Optional[str], token: Optional[str], timeout: float) -> None:
        self.socket_path = socket_path
        self.url = url
        self.token = token
        self.timeout = timeout
        self._local = threading.local()

    def where(self) -> str:
        return str(self.socket_path) if self.socket_path is not None else str(self.url)

    def connection(self, timeout: Optional[float] = None) -> http.client.HTTPConnection:
        t = self.timeout if timeout is None else timeout
        if self.socket_path is not None:
            return _UnixConnection(str(self.socket_path), t)
        parts = urlsplit(str(self.url))
        return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=t)

    def headers(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if extra:
            h.update(extra)
        return h

    def unreachable(self, e: BaseException) -> _errors.Error:
        return _errors.DaemonUnreachable(
            f"no scion daemon answers at {self.where()}: {e}",
            code="daemon_unreachable",
            hint="start one with `scion serve` (it prints its socket), or pass socket= / set SCION_SOCKET",
            retryable=True,
        )

    def call(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None) -> Any:
        payload = None if body is None else json.dumps(body).encode()
        for attempt in range(2):
            conn = getattr(self._local, "conn", None)
            fresh = conn is None
            if conn is None:
                conn = self.connection()
                self._local.conn = conn
            try:
                conn.request(method, path, body=payload, headers=self.headers())
                resp = conn.getresponse()
                data = resp.read()
                break
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                conn.close()
                self._local.conn = None
                # A kept-alive connection the daemon closed meanwhile: one retry on a new one.
                if fresh or attempt == 1:
                    raise self.unreachable(e) from None
        text = data.decode("utf-8", "replace")
        if resp.status >= 400:
            raise _errors.from_envelope(text, resp.status)
        ctype = resp.getheader("Content-Type", "")
        if "json" not in ctype:
            return text
        return json.loads(text) if text else None

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


@dataclass(frozen=True)
class Event:
    """One event of the daemon: ``kind`` (``forked``, ``checkpointed``, ``session_opened``,
    ``flushed``, ``fenced``, ...), its id (increasing) and its data."""

    id: int
    kind: str
    at_ms: int
    data: Dict[str, Any]


class Session:
    """A live session: the daemon captures every commit made to :attr:`path` by any SQLite
    writer, and makes it durable on :meth:`flush` (and every few seconds). A context
    manager: closing flushes what was captured and releases the branch (an ephemeral
    session's branch is destroyed)."""

    def __init__(self, client: "Client", v: Mapping[str, Any]) -> None:
        self._client = client
        self.id: str = str(v["id"])
        self.branch: str = str(v["branch"])
        self.path: Path = Path(v["path"])
        self.version: int = int(v.get("version", 0))
        self.closed = False

    def __repr__(self) -> str:
        return f"Session({self.id!r}, branch={self.branch!r}, path={str(self.path)!r})"

    def flush(self, checkpoint: Optional[str] = None, *, meta: Optional[Mapping[str, Any]] = None) -> int:
        """Make everything committed so far durable; with ``checkpoint``, name that version.
        Returns the durable version."""
        body: Dict[str, Any] = {}
        if checkpoint is not None:
            body["checkpoint"] = checkpoint
        if meta:
            body["meta"] = _meta(meta)
        v = self._client.call("POST", f"/v1/sessions/{self.id}/flush", body)
        self.version = int(v["version"])
        return self.version

    def info(self) -> Dict[str, Any]:
        return dict(self._client.call("GET", f"/v1/sessions/{self.id}"))

    def connect(self, **sqlite3_kwargs: Any) -> Any:
        """``sqlite3.connect`` on the session's file; as a ``with`` block it commits (or
        rolls back) and closes on exit."""
        from ._types import ClosingConnection, connect_closing

        conn: ClosingConnection = connect_closing(self.path, **sqlite3_kwargs)
        return conn

    def close(self) -> Dict[str, Any]:
        """Flush, stop capturing and release the branch. Idempotent."""
        v = dict(self._client.call("POST", f"/v1/sessions/{self.id}/close", {}))
        self.closed = True
        return v

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Client(Api):
    """A client of ``scion serve``. ``socket``: the daemon's unix socket (default:
    ``SCION_SOCKET``, else the default socket of the store :func:`scion.open_store` would
    open); or ``url`` and ``token`` for a daemon listening on TCP. Thread-safe."""

    def __init__(
        self,
        socket: Union[str, "os.PathLike[str]", None] = None,
        *,
        url: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = 30.0,
    ) -> None:
        path: Optional[Path] = None
        if url is None:
            if socket is not None:
                path = Path(os.fspath(socket))
            elif os.environ.get("SCION_SOCKET"):
                path = Path(os.environ["SCION_SOCKET"])
            else:
                try:
                    # Absent from scion-client, which has no engine to find the store with.
                    from ._store import open_store  # type: ignore[import-not-found, unused-ignore]
                except ImportError as e:
                    raise _errors.EngineNotInstalled("Client() with no socket (pass one, or set SCION_SOCKET)") from e
                path = default_socket(open_store().location)
        self._http = _HttpTransport(path, url, token, timeout)
        super().__init__(self._http)

    @property
    def socket(self) -> Optional[Path]:
        return self._http.socket_path

    def __repr__(self) -> str:
        return f"Client({self._http.where()!r})"

    def health(self) -> bool:
        """Whether the daemon answers and its store is reachable."""
        try:
            self.call("GET", "/readyz")
            return True
        except _errors.Error:
            return False

    def open(
        self,
        target: Union[str, Branch],
        *,
        fork_from: Optional[str] = None,
        ttl: Optional[TTL] = None,
        idle_timeout: Optional[TTL] = None,
        ephemeral: bool = False,
        fork_ephemeral: bool = False,
        meta: Optional[Mapping[str, Any]] = None,
        bind_to_process: bool = False,
    ) -> Session:
        """Open a session on ``target`` (``db@branch``). With ``fork_from`` (a branch of the
        same database, or ``branch@checkpoint``), fork it first as ``target``'s branch.
        ``ephemeral`` destroys the branch on close; ``fork_ephemeral`` marks the fork
        ephemeral without destroying it on close (its history goes with it when it is
        destroyed later); ``bind_to_process`` closes the session when this process exits."""
        db, _, branch = str(target).partition("@")
        body: Dict[str, Any] = {"db": db, "ephemeral": ephemeral}
        if branch:
            body["branch"] = branch
        if fork_from is not None:
            body["fork_from"] = fork_from
        if fork_ephemeral:
            body["fork_ephemeral"] = True
        if ttl is not None:
            body["ttl"] = ttl_text(ttl)
        if idle_timeout is not None:
            body["idle_timeout"] = ttl_text(idle_timeout)
        if meta:
            body["meta"] = _meta(meta)
        if bind_to_process:
            body["owner_pid"] = os.getpid()
        return Session(self, self.call("POST", "/v1/sessions", body))

    def sessions(self) -> List[Dict[str, Any]]:
        return list(self.call("GET", "/v1/sessions")["sessions"])

    def session(self, name: str) -> "Session":
        """The open session named by its id (``s-...``) or by the branch it captures
        (``shop@ux``; ``shop`` is ``shop@main``)."""
        return Session(self, self.call("GET", f"/v1/sessions/{name}"))

    def events(
        self, *, since: Optional[int] = None, follow: bool = True, timeout: Optional[float] = None
    ) -> Iterator[Event]:
        """Events as they happen (after event ``since``, when given: missed ones are
        replayed). Runs on its own connection; stop by breaking out of the loop. With
        ``follow=False`` the iteration ends after the events kept so far."""
        conn = self._http.connection(timeout=timeout)
        query = [f"since={since}"] if since is not None else []
        if not follow:
            query.append("follow=false")
        path = "/v1/events" + ("?" + "&".join(query) if query else "")
        try:
            conn.request("GET", path, headers=self._http.headers({"Accept": "text/event-stream"}))
            resp = conn.getresponse()
        except OSError as e:
            conn.close()
            raise self._http.unreachable(e) from None
        if resp.status >= 400:
            text = resp.read().decode("utf-8", "replace")
            conn.close()
            raise _errors.from_envelope(text, resp.status)
        try:
            data: List[str] = []
            while True:
                line = resp.readline()
                if not line:
                    return
                text = line.decode("utf-8", "replace").rstrip("\r\n")
                if text.startswith("data:"):
                    data.append(text[5:].lstrip(" "))
                elif text == "" and data:
                    v = json.loads("\n".join(data))
                    data = []
                    yield Event(
                        id=int(v["id"]), kind=str(v["kind"]), at_ms=int(v["at_ms"]), data=dict(v.get("data") or {})
                    )
        finally:
            conn.close()

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
