"""LangGraph on scion: a checkpointer whose threads are branches, and a companion that
gives each thread its own branch of an application database that follows the graph
through time travel.

    from scion.langgraph import ScionSaver, ThreadForks

    store = scion.open_store("./.scion", create=True)
    forks = ThreadForks(store, "shop")           # the app database, one branch per thread
    saver = ScionSaver(store, forks=forks)       # LangGraph's checkpoints, ditto
    graph = builder.compile(checkpointer=saver)

    def node(state, config):
        with forks.connect(config) as db:        # the app database as of this step
            db.execute("INSERT INTO orders ...")

**ScionSaver** keeps each thread's checkpoints in its own branch (``langgraph@t-...``) of
one scion database, a stock ``langgraph-checkpoint-sqlite`` database written through the
scion VFS: every write is a version of the branch, nothing is materialized on disk.
``copy_thread`` is a fork (O(1) whatever the thread's size), ``delete_thread`` destroys
the branch. Sync and async methods both work (the async ones run the sync ones in a
worker thread).

**ThreadForks** records a scion checkpoint of the thread's app branch at each LangGraph
checkpoint the saver stores. When LangGraph replays or forks from an earlier checkpoint
(``graph.invoke(None, past_config)``, ``graph.update_state(past_config, ...)``), the app
branch is rolled back to the state recorded for it before any node runs on it; a node
asks for the app database with ``forks.connect(config)``, which waits until the
checkpoint its step runs from has been recorded.

Needs the ``langgraph`` extra: ``pip install 'scion[langgraph]'``.
"""

try:
    import langgraph.checkpoint.sqlite  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "scion.langgraph needs LangGraph: pip install 'scion[langgraph]' "
        "(langgraph-checkpoint and langgraph-checkpoint-sqlite)"
    ) from e

from ._forks import ThreadForks
from ._names import NoRecordedState, thread_branch_name
from ._saver import ScionSaver

__all__ = ["ScionSaver", "ThreadForks", "NoRecordedState", "thread_branch_name"]
