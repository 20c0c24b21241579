"""The pytest plugin: a fresh fork of a seeded database for every test, in O(1).

Fixtures:

- ``scion_store``: the run's store (a temporary one, shared by xdist workers; or
  ``--scion-store`` / ini ``scion_store``). ``--scion-page-compression none`` / ini
  ``scion_page_compression`` makes it keep pages raw: about twice the space, the fastest
  checkouts (a lasting store that keeps them otherwise is an error, not ignored).
- ``scion_seed``: the seeded database, made once per run (per seed) under a file lock, so
  xdist workers share one seed; a seed whose content did not change is not made again in a
  lasting store. The seed is ini ``scion_seed`` (a ``.sql`` file or an existing ``.db``),
  or a test's ``@pytest.mark.scion_seed(...)`` (a path, SQL text via ``sql=``, or a
  callable that fills the database at the path it is given); override the
  ``scion_seed_source`` fixture to set it in code.
- ``scion_db``: a fork of the seed for one test (``.path``, ``.connection``, ``.branch``),
  destroyed at teardown. Forks a crashed process left behind are destroyed by the next
  run, and by the end of this one.

``--scion-keep-failed`` keeps the forks of failing tests (their changes checkpointed) and
says how to open them.

``--scion-daemon=SOCKET`` (ini ``scion_daemon``) runs the fixtures through ``scion serve``
instead of an engine in each process: ``scion_store`` is a :class:`scion.Client`, and each
test's database is a daemon session on its fork (``scion_db.session``; the daemon captures
what the test commits, and closes the session if the worker dies). This mode needs only the
stdlib-only ``scion-client`` distribution, which ships this plugin too. Write it with ``=``:
pytest takes an existing path given as a separate argument for a test path when it picks
the rootdir.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import inspect
import os
import socket
import sqlite3
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

import pytest

from . import _errors
from ._api import Api, Branch
from ._client import Client, Session

SeedSource = Union[str, "os.PathLike[str]", Callable[[Path], Any], "SqlSeed", None]
KEPT_CHECKPOINT = "kept"
_META_RUN = "pytest_run"
_META_PID = "pytest_pid"
_META_HOST = "pytest_host"
_META_NODE = "pytest_nodeid"


@dataclass(frozen=True)
class SqlSeed:
    """A seed given as SQL text (``@pytest.mark.scion_seed(sql="CREATE TABLE ...")``)."""

    text: str


@dataclass(frozen=True)
class Seed:
    """A seeded database: its ``main`` branch, checkpoint ``seed`` holding the seed."""

    db: str
    fingerprint: str
    branch: Branch

    @property
    def target(self) -> str:
        return f"{self.branch.ref}@seed"


@dataclass
class ScionDb:
    """A test's own fork of the seed. :attr:`connection` reads and writes it through the
    scion VFS (nothing is copied, whatever the seed's size; each commit is a version of the
    fork); :attr:`path` makes a stock SQLite file of it when a test needs one, and from then
    on :attr:`connection` is a connection to that file. Under ``--scion-daemon`` the file is
    the daemon session's, from the start."""

    branch: Branch
    seed: Seed
    store: Api
    session: Optional[Session] = None
    """The daemon session holding :attr:`path`, under ``--scion-daemon``."""
    _path: Optional[Path] = field(default=None, repr=False)
    _connection: Optional[sqlite3.Connection] = field(default=None, repr=False)
    _through_vfs: bool = field(default=False, repr=False)

    @property
    def path(self) -> Path:
        """The fork's stock SQLite file, made on first use (a VFS connection of this test
        is committed and closed first: the branch is then written through the file)."""
        if self._path is None:
            if self._connection is not None:
                self._connection.commit()
                self._connection.close()
                self._connection = None
                self._through_vfs = False
            self._path = self.branch.checkout()
        return self._path

    @property
    def connection(self) -> sqlite3.Connection:
        """A connection to the fork, made on first use and closed at teardown: through the
        scion VFS, or to :attr:`path` once the file exists."""
        if self._connection is None:
            location = getattr(self.store, "location", None)
            if self._path is None and isinstance(location, str) and self.session is None:
                # Imported by name: the stdlib-only scion-client ships this plugin (for
                # daemon mode) without the engine's vfs module.
                vfs = importlib.import_module("scion.vfs")
                self._connection = vfs.connect(self.branch.ref, store=location)
                self._through_vfs = True
            else:
                self._connection = sqlite3.connect(str(self.path))
        return self._connection

    def connect(self, **kwargs: Any) -> sqlite3.Connection:
        """Another connection, to :attr:`path`."""
        conn: sqlite3.Connection = sqlite3.connect(str(self.path), **kwargs)
        return conn

    def checkpoint(self, name: str) -> None:
        if self._connection is not None:
            self._connection.commit()
        if self.session is not None:
            self.session.flush(name)
        else:
            # Through the VFS every commit already is a version: this names the head.
            self.branch.checkpoint(name)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("scion", "scion: a fresh SQLite database per test")
    group.addoption(
        "--scion-keep-failed",
        action="store_true",
        default=None,
        help="keep the forks of failing tests (changes checkpointed as 'kept') and say how to open them",
    )
    group.addoption("--scion-store", default=None, help="the store to use (default: a temporary one per run)")
    group.addoption("--scion-seed", default=None, help="the default seed: a .sql file or an existing .db")
    group.addoption(
        "--scion-page-compression",
        default=None,
        choices=["lz4", "none"],
        help="how the run's store keeps pages: lz4 (default) or none (about twice the space, fastest checkouts)",
    )
    group.addoption(
        "--scion-daemon",
        default=None,
        metavar="SOCKET",
        help="run through `scion serve` at this unix socket (--scion-daemon=SOCKET): "
        "each test's database is a daemon session on its fork",
    )
    parser.addini("scion_seed", "the default seed: a .sql file or a .db, relative to rootdir", default="")
    parser.addini("scion_daemon", "the unix socket of a `scion serve` to run the fixtures through", default="")
    group.addoption(
        "--scion-connect",
        default=None,
        choices=["vfs", "file"],
        help="how scion_db.connection reaches the fork: vfs (default: through the scion VFS, nothing copied) "
        "or file (a checkout file per test, faster for tests that scan much of a large seed)",
    )
    parser.addini("scion_connect", "vfs (default) or file: how scion_db.connection reaches the fork", default="")
    parser.addini("scion_store", "the store to use (default: a temporary one per run)", default="")
    parser.addini("scion_page_compression", "how the run's store keeps pages: lz4 (default) or none", default="")
    parser.addini("scion_ttl", "TTL of each test's fork (reaped by gc if left behind)", default="1h")
    parser.addini("scion_keep_failed", "keep the forks of failing tests", type="bool", default=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "scion_seed(source=None, *, sql=None): the seed of this test's scion_db: a .sql or .db path, "
        "SQL text (sql=...), or a callable filling the database at the path it is given",
    )
    workerinput = getattr(config, "workerinput", None)
    run_id = workerinput.get("scion_run_id") if workerinput else None
    config.stash[_RUN_ID] = run_id or uuid.uuid4().hex[:12]
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "scion-xdist-hooks")


_RUN_ID = pytest.StashKey[str]()
_STORE_SPEC = pytest.StashKey[str]()
_FAILED = pytest.StashKey[bool]()
_SWEPT = pytest.StashKey[List[str]]()


class _XdistHooks:
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["scion_run_id"] = node.config.stash[_RUN_ID]


def _shared_dir(config: pytest.Config, factory: pytest.TempPathFactory) -> Path:
    """A directory every xdist worker of this run shares (the run's base temp dir)."""
    base = factory.getbasetemp()
    return base.parent if getattr(config, "workerinput", None) else base


def _daemon_socket(config: pytest.Config) -> Optional[str]:
    value = config.getoption("--scion-daemon") or config.getini("scion_daemon")
    return str(value) if value else None


def _open(config: pytest.Config, spec: str, **kwargs: Any) -> Api:
    """The run's store: through the daemon under ``--scion-daemon``, else in this process."""
    socket_path = _daemon_socket(config)
    if socket_path is not None:
        client = Client(socket_path)
        if not client.health():
            raise pytest.UsageError(f"--scion-daemon {socket_path}: no `scion serve` answers there (start one)")
        return client
    try:
        from ._store import open_store  # type: ignore[import-not-found, unused-ignore]
    except ImportError as e:
        raise _errors.EngineNotInstalled("pytest_plugin without --scion-daemon=SOCKET") from e
    store: Api = open_store(spec, **kwargs)
    return store


def _identity(store: Api) -> "tuple[str, str]":
    """The store's location and id (a daemon's client asks it)."""
    location, store_id = getattr(store, "location", None), getattr(store, "store_id", None)
    if location is None or store_id is None:
        status = store.status()
        location, store_id = str(status["store"]), str(status["store_id"])
    return str(location), str(store_id)


def _store_spec(config: pytest.Config, factory: pytest.TempPathFactory) -> str:
    spec = config.getoption("--scion-store") or config.getini("scion_store")
    if spec:
        return str(spec)
    return str(_shared_dir(config, factory) / "scion-store")


class _FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> "_FileLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: Any) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


def _lock_dir(store: Api) -> Path:
    """Where processes of this machine using ``store`` take their locks (any run, any
    worker: a lasting store is seeded once for all of them)."""
    import tempfile

    # The user's cache directory, never a shared one: another user could squat it (and the
    # daemon's socket directory is not shared with these locks).
    cache = os.environ.get("XDG_CACHE_HOME") or (
        os.path.join(os.environ["HOME"], ".cache") if os.environ.get("HOME") else None
    )
    store_id = _identity(store)[1]
    if cache:
        return Path(cache) / "scion" / "pytest-locks" / store_id
    return Path(tempfile.gettempdir()) / f"scion-{os.getuid()}" / "pytest-locks" / store_id


@pytest.fixture(scope="session")
def scion_store(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Api:
    """The run's store (shared by xdist workers): a :class:`scion.Store`, or under
    ``--scion-daemon`` a :class:`scion.Client` of the daemon."""
    compression = pytestconfig.getoption("--scion-page-compression") or pytestconfig.getini("scion_page_compression")
    if _daemon_socket(pytestconfig) is not None:
        if compression or pytestconfig.getoption("--scion-store") or pytestconfig.getini("scion_store"):
            raise pytest.UsageError("--scion-daemon uses the daemon's store: drop --scion-store and page compression")
        store = _open(pytestconfig, "")
        pytestconfig.stash[_STORE_SPEC] = _identity(store)[0]
    else:
        spec = _store_spec(pytestconfig, tmp_path_factory)
        pytestconfig.stash[_STORE_SPEC] = spec
        store = _open(pytestconfig, spec, create=True, page_compression=compression or None)
    with _FileLock(_lock_dir(store) / "sweep.lock"):
        _sweep(store, only_dead=True)
    return store


@pytest.fixture(scope="session")
def scion_seed_source(pytestconfig: pytest.Config) -> SeedSource:
    """The default seed: ``--scion-seed`` or ini ``scion_seed`` (override this fixture to
    seed from a callable or SQL text)."""
    value = pytestconfig.getoption("--scion-seed") or pytestconfig.getini("scion_seed")
    if not value:
        return None
    path = Path(value)
    return path if path.is_absolute() else Path(pytestconfig.rootpath) / path


def _fingerprint(source: SeedSource) -> str:
    h = hashlib.sha256()
    if source is None:
        h.update(b"empty")
    elif isinstance(source, SqlSeed):
        h.update(b"sql\0" + source.text.encode())
    elif callable(source):
        # Stable across workers and runs: the function's name and code, not its id().
        name = f"{getattr(source, '__module__', '')}.{getattr(source, '__qualname__', repr(source))}"
        try:
            code = inspect.getsource(source)
        except (OSError, TypeError):
            code = ""
        h.update(b"fn\0" + name.encode() + b"\0" + code.encode())
    else:
        path = Path(os.fspath(source))
        if not path.is_file():
            raise pytest.UsageError(f"scion seed {path} does not exist (a .sql file or a SQLite .db)")
        h.update(b"file\0" + path.suffix.encode() + b"\0")
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _is_sqlite(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


def _fill(path: Path, source: SeedSource) -> None:
    if source is None:
        return
    if isinstance(source, SqlSeed):
        sql = source.text
    elif callable(source):
        source(path)
        return
    else:
        sql = Path(os.fspath(source)).read_text()
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.executescript(sql)
    finally:
        conn.close()


def make_seed(store: Api, source: SeedSource, lock_dir: Path) -> Seed:
    """The seeded database for ``source``: made under a lock by the first process to ask,
    found by every later one (keyed by the seed's content)."""
    fp = _fingerprint(source)
    db = f"seed-{fp[:16]}"
    main = store.branch(f"{db}@main")
    with _FileLock(lock_dir / f"{db}.lock"):
        if any(c.name == "seed" for c in _checkpoints_or_empty(main)):
            # A clean checkout of the seed lets each fork's checkout copy (or clone) that
            # file instead of decoding the version from the store.
            main.checkout()
            return Seed(db, fp, main)
        if db in store.databases():
            # Another machine seeding a shared (S3) store holds no lock of ours: give it
            # time. Locally, under the lock, it is a seeding that died half way.
            if _identity(store)[0].startswith("s3://") and _wait_for_seed(main):
                main.checkout()
                return Seed(db, fp, main)
            for b in store.branches(db):
                store.branch(b.branch).destroy(force=True, missing_ok=True)
        try:
            _create_seed(store, db, main, source, fp)
        except _errors.DatabaseExists:
            if not _wait_for_seed(main):
                raise
        main.checkout()
    return Seed(db, fp, main)


def _wait_for_seed(main: Branch, timeout: float = 120.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(c.name == "seed" for c in _checkpoints_or_empty(main)):
            return True
        time.sleep(0.2)
    return False


def _create_seed(store: Api, db: str, main: Branch, source: SeedSource, fp: str) -> None:
    is_file = not callable(source) and isinstance(source, (str, os.PathLike))
    if is_file and _is_sqlite(Path(os.fspath(source))):  # type: ignore[arg-type]
        store.create(db, source=source)  # type: ignore[arg-type]
    else:
        store.create(db)
        _fill(main.checkout(), source)
    main.checkpoint("seed", meta={"fingerprint": fp})


def _checkpoints_or_empty(b: Branch) -> List[Any]:
    try:
        return list(b.checkpoints())
    except _errors.NotFound:
        return []


def _marker_source(request: pytest.FixtureRequest) -> Optional[SeedSource]:
    marker = request.node.get_closest_marker("scion_seed")
    if marker is None:
        return None
    if "sql" in marker.kwargs:
        return SqlSeed(str(marker.kwargs["sql"]))
    if not marker.args:
        raise pytest.UsageError("@pytest.mark.scion_seed needs a seed: a path, a callable, or sql=...")
    value = marker.args[0]
    if callable(value):
        return value  # type: ignore[no-any-return]
    path = Path(os.fspath(value))
    return path if path.is_absolute() else Path(request.config.rootpath) / path


def _source_key(source: SeedSource) -> Any:
    """A cheap identity for a seed source, so a seed's content is hashed once per process
    (a file by path, size and modification time)."""
    if source is None or isinstance(source, SqlSeed):
        return source
    if callable(source):
        return ("callable", id(source))
    path = Path(os.fspath(source))
    try:
        st = path.stat()
    except OSError:
        return ("file", str(path))
    return ("file", str(path), st.st_size, st.st_mtime_ns)


class _Seeds:
    def __init__(self, store: Api, lock_dir: Path, default: SeedSource) -> None:
        self.store = store
        self.lock_dir = lock_dir
        self.default = default
        # Sources are kept alive with their seeds: an id() is only unique while it lives.
        self._made: Dict[Any, "tuple[SeedSource, Seed]"] = {}

    def __call__(self, source: SeedSource = None) -> Seed:
        source = self.default if source is None else source
        key = _source_key(source)
        if key not in self._made:
            self._made[key] = (source, make_seed(self.store, source, self.lock_dir))
        return self._made[key][1]


@pytest.fixture(scope="session")
def scion_seeds(scion_store: Api, scion_seed_source: SeedSource) -> _Seeds:
    """Seeds by source: ``scion_seeds(path_or_callable_or_SqlSeed) -> Seed``."""
    return _Seeds(scion_store, _lock_dir(scion_store), scion_seed_source)


@pytest.fixture(scope="session")
def scion_seed(scion_seeds: _Seeds) -> Seed:
    """The default seed, made once per run."""
    return scion_seeds()


def _worker(config: pytest.Config) -> str:
    # From xdist's own handshake: an inherited PYTEST_XDIST_WORKER (a pytest run inside a
    # worker's test) would name the outer run's worker.
    workerinput = getattr(config, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else "main"


def _branch_name(config: pytest.Config, nodeid: str) -> str:
    body = "".join(c if c.isalnum() else "-" for c in nodeid.lower())
    body = "-".join(p for p in body.split("-") if p)[:40].strip("-") or "test"
    return f"t-{_worker(config)}-{body}-{os.urandom(4).hex()}"


@pytest.fixture
def scion_db(request: pytest.FixtureRequest, scion_seeds: _Seeds, scion_store: Api) -> Iterator[ScionDb]:
    """A fresh fork of the seed for this test: ``.path``, ``.connection``, ``.branch``."""
    source = _marker_source(request)
    seed = scion_seeds(source) if source is not None else scion_seeds()
    ttl = request.config.getini("scion_ttl") or "1h"
    meta = {
        _META_RUN: request.config.stash[_RUN_ID],
        _META_PID: str(os.getpid()),
        _META_HOST: socket.gethostname(),
        _META_NODE: request.node.nodeid[:500],
    }
    name = _branch_name(request.config, request.node.nodeid)
    if isinstance(scion_store, Client):
        # The daemon forks and opens the session in one call; it closes the session if this
        # worker dies, and the next run's sweep destroys the fork. The fork is ephemeral (gc
        # reclaims it at once once destroyed) but outlives the session: a failing test's
        # fork may be kept.
        session = scion_store.open(
            f"{seed.db}@{name}",
            fork_from=f"{seed.branch.name}@seed",
            ttl=ttl,
            meta=meta,
            bind_to_process=True,
            fork_ephemeral=True,
        )
        fork = scion_store.branch(session.branch)
        db = ScionDb(branch=fork, seed=seed, store=scion_store, session=session, _path=session.path)
    else:
        # Ephemeral: once the test's fork is destroyed, gc reclaims its pages at once
        # rather than keeping them for the head history's retention.
        fork = seed.branch.fork(name, at="seed", ttl=ttl, meta=meta, ephemeral=True)
        # No file until the test asks for one: the connection goes through the scion VFS
        # (unless the run asked for files).
        connect = request.config.getoption("--scion-connect") or request.config.getini("scion_connect") or "vfs"
        db = ScionDb(branch=fork, seed=seed, store=scion_store)
        if connect == "file":
            db.path  # noqa: B018 (made now: the connection is then to the file)
    try:
        yield db
    finally:
        db.close()
        _teardown(request, db)


def _keep_failed(config: pytest.Config) -> bool:
    opt = config.getoption("--scion-keep-failed")
    return bool(opt) if opt is not None else bool(config.getini("scion_keep_failed"))


def _teardown(request: pytest.FixtureRequest, db: ScionDb) -> None:
    failed = request.node.stash.get(_FAILED, False)
    try:
        if failed and _keep_failed(request.config):
            db.checkpoint(KEPT_CHECKPOINT)
            if db.session is not None:
                db.session.close()
            db.branch.touch(None)
            spec = request.config.stash.get(_STORE_SPEC, _identity(db.store)[0])
            request.node.add_report_section(
                "teardown",
                "scion",
                f"kept {db.branch.ref} (the test's database, changes checkpointed as '{KEPT_CHECKPOINT}')\n"
                f"  open it:  sqlite3 {db.path}\n"
                f"  or:       scion --store {spec} checkout {db.branch.ref}\n"
                f"  against the seed:  scion --store {spec} diff {db.seed.target} {db.branch.ref}",
            )
            return
        if db.session is not None:
            db.session.close()
        db.branch.destroy(force=True, missing_ok=True)
    except _errors.Error as e:
        # Teardown never fails a test; the sweep at the end of the run retries.
        warnings.warn(f"scion: could not clean up {db.branch.ref}: {e}", stacklevel=1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call" and report.failed:
        item.stash[_FAILED] = True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep(store: Api, *, only_dead: bool, run_id: Optional[str] = None) -> List[str]:
    """Destroy test forks left behind: of processes that died (``only_dead``), or of the
    run ``run_id``. Kept forks (checkpoint ``kept``) stay."""
    host = socket.gethostname()
    gone = []
    for db in store.databases():
        if not db.startswith("seed-"):
            continue
        for b in store.branches(db):
            meta = b.meta
            if _META_RUN not in meta or b.checkpoints > 0:
                continue
            if only_dead:
                if meta.get(_META_HOST) != host or _pid_alive(int(meta.get(_META_PID, "0") or 0)):
                    continue
            elif meta.get(_META_RUN) != run_id:
                continue
            store.branch(b.branch).destroy(force=True, missing_ok=True)
            gone.append(b.branch)
    return gone


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if getattr(config, "workerinput", None) is not None:
        return
    spec = config.stash.get(_STORE_SPEC, None)
    if spec is None and _daemon_socket(config) is None:
        # Under xdist only workers open the store: find the one they used.
        factory = getattr(config, "_tmp_path_factory", None)
        if factory is None:
            return
        spec = _store_spec(config, factory)
        if not spec.startswith("s3://") and not Path(spec).exists():
            return
    try:
        store = _open(config, spec or "")
        left = _sweep(store, only_dead=False, run_id=config.stash[_RUN_ID])
    except (_errors.Error, pytest.UsageError):
        return
    config.stash[_SWEPT] = left


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    left = config.stash.get(_SWEPT, [])
    if left:
        terminalreporter.write_line(f"scion: destroyed {len(left)} fork(s) a crashed test process left behind")
