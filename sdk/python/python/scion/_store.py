"""A store opened in this process: the engine is embedded, no daemon and no binary needed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from . import _errors
from ._api import Api
from ._native import Engine, EngineError


class _EngineTransport:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def call(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None) -> Any:
        text = None if body is None else json.dumps(body)
        status, answer = self._engine.request(method, path, text)
        if status >= 400:
            raise _errors.from_envelope(answer, status)
        return json.loads(answer)


class Store(Api):
    """A scion store (a local directory or an S3 bucket) with the engine in this process.
    Every method runs without the GIL held; one store may be used from many threads."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(_EngineTransport(engine))
        self._engine = engine

    @property
    def location(self) -> str:
        return self._engine.location

    @property
    def store_id(self) -> str:
        return self._engine.store_id

    @property
    def checkouts_dir(self) -> Path:
        return Path(self._engine.checkouts_dir)

    def __repr__(self) -> str:
        return f"Store({self.location!r})"


def open_store(
    spec: Union[str, "os.PathLike[str]", None] = None,
    *,
    create: bool = False,
    page_compression: Optional[str] = None,
) -> Store:
    """Open a store: a directory, ``file:///path``, ``s3://bucket/prefix`` or
    ``az://container/prefix``. Without ``spec``: ``SCION_STORE``, else the nearest
    ``.scion`` at or above the working directory. ``create`` makes a local store that does not exist yet (``./.scion``
    without a spec), with pages stored as ``page_compression`` says: ``"lz4"`` (the
    default, about half the bytes) or ``"none"`` (about twice the space, the fastest
    checkouts). Naming a compression that an existing store does not use raises
    ``InvalidInput`` (``scion config --page-compression`` changes a store's)."""
    text = None if spec is None else os.fspath(spec)
    try:
        engine = Engine(text, str(Path.cwd()), create, page_compression)
    except EngineError as e:
        raise _errors.from_envelope(str(e.args[0])) from None
    return Store(engine)
