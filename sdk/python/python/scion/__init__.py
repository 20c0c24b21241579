"""scion: branching for SQLite databases.

Fork a database in O(1) whatever its size, work on a stock SQLite file, checkpoint, roll
back, promote the winner, diff, export, destroy. The engine runs in this process::

    import scion

    store = scion.open_store("./.scion", create=True)
    main = store.create("shop", source="shop.db")
    with main.attempt() as fork:
        with fork.connect() as db:
            db.execute("UPDATE items SET price = price * 2")
        fork.checkpoint("doubled")
        if store.diff(main, fork).table("items").changed < 100:
            fork.promote("main")

:class:`Client` talks to ``scion serve`` for live sessions and events; :mod:`scion.aio`
has the same surface for asyncio; the pytest plugin hands each test a fresh fork.
"""

from . import _daemon_surface
from ._daemon_surface import *  # noqa: F403
from ._native import __version__
from ._store import Store, open_store

__all__ = ["Store", "__version__", "open_store"]
__all__ += _daemon_surface.__all__
