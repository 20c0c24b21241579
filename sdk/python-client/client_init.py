"""scion, as a client of ``scion serve`` only: the stdlib-only distribution (``scion-client``).

The same names as the embedded package where they overlap (:class:`Client`,
:class:`Branch`, the error classes, the result types, :mod:`scion.aio`'s ``connect``), so
code written against a daemon runs unchanged with either installed::

    import scion

    client = scion.Client("/srv/shop/scion.sock")   # where `scion serve --socket` listens
    fork = client.branch("shop@main").fork("attempt-1")

What needs the engine in this process (``open_store``, ``Store``) raises
:class:`EngineNotInstalled`.
"""

from importlib.metadata import version as _version

from . import _daemon_surface
from ._daemon_surface import *  # noqa: F403
from ._errors import EngineNotInstalled

__version__ = _version("scion-client")

__all__ = ["__version__"]
__all__ += _daemon_surface.__all__

_EMBEDDED_ONLY = ("Store", "open_store", "vfs", "pytest_plugin", "langgraph")


def __getattr__(name: str) -> object:
    if name in _EMBEDDED_ONLY:
        raise EngineNotInstalled(name)
    raise AttributeError(f"module 'scion' has no attribute {name!r}")
