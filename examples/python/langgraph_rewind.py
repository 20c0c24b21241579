"""The application database follows a LangGraph graph through time travel.

A compiled StateGraph with two deterministic nodes (no model): `order` inserts an order
into the app database, `ship` records a shipment for it. Each thread gets its own branch
of the app database (ThreadForks), LangGraph's checkpoints live on scion too
(ScionSaver), and:

- replaying the thread from the checkpoint before `ship` rolls the app database back
  first, so the shipment is not recorded twice;
- forking a thread from that checkpoint forks the app database at it;
- deleting a thread destroys its branches.

Run: python examples/python/langgraph_rewind.py [STORE_DIR]
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Tuple, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

import scion
from scion.langgraph import ScionSaver, ThreadForks


class Order(TypedDict, total=False):
    item: str
    order_id: int


def build(forks: ThreadForks, saver: ScionSaver) -> Any:
    def order(state: Order, config: RunnableConfig) -> Dict[str, Any]:
        with forks.connect(config) as db:
            cur = db.execute("INSERT INTO orders(item, status) VALUES (?, 'new')", (state["item"],))
            return {"order_id": cur.lastrowid}

    def ship(state: Order, config: RunnableConfig) -> Dict[str, Any]:
        with forks.connect(config) as db:
            db.execute("INSERT INTO shipments(order_id) VALUES (?)", (state["order_id"],))
            db.execute("UPDATE orders SET status = 'shipped' WHERE id = ?", (state["order_id"],))
        return {}

    graph = StateGraph(Order)
    graph.add_node("order", order)
    graph.add_node("ship", ship)
    graph.add_edge(START, "order")
    graph.add_edge("order", "ship")
    graph.add_edge("ship", END)
    return graph.compile(checkpointer=saver)


def app_rows(forks: ThreadForks, thread: str) -> Tuple[List[Tuple[Any, ...]], int]:
    with forks.connect({"configurable": {"thread_id": thread}}) as db:
        orders = db.execute("SELECT id, item, status FROM orders ORDER BY id").fetchall()
        shipments = db.execute("SELECT count(*) FROM shipments").fetchone()[0]
    return orders, shipments


def seed(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE orders(id INTEGER PRIMARY KEY, item TEXT NOT NULL, status TEXT NOT NULL);"
        "CREATE TABLE shipments(id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id));"
    )
    conn.close()
    return path


def main(store_dir: Path) -> Dict[str, Any]:
    store = scion.open_store(store_dir, create=True)
    with tempfile.TemporaryDirectory() as tmp:
        store.create("shop", source=seed(Path(tmp) / "shop.db"))
    forks = ThreadForks(store, "shop")
    saver = ScionSaver(store, forks=forks)
    graph = build(forks, saver)
    t1: RunnableConfig = {"configurable": {"thread_id": "order-1"}}

    graph.invoke({"item": "lamp"}, t1)
    first = app_rows(forks, "order-1")
    print(f"after the run:    orders {first[0]}, shipments {first[1]}")

    before_ship = next(s for s in graph.get_state_history(t1) if s.next == ("ship",))
    at = before_ship.config["configurable"]["checkpoint_id"]
    graph.invoke(None, before_ship.config)
    replayed = app_rows(forks, "order-1")
    print(f"after a replay from the checkpoint before 'ship': orders {replayed[0]}, shipments {replayed[1]}")

    t2 = saver.fork_thread("order-1", at, "order-1-retry")
    forked_before = app_rows(forks, "order-1-retry")
    print(f"thread order-1-retry forked at that checkpoint: orders {forked_before[0]}, shipments {forked_before[1]}")
    graph.invoke(None, t2)
    forked_after = app_rows(forks, "order-1-retry")
    print(f"after running it: orders {forked_after[0]}, shipments {forked_after[1]}")
    print(f"order-1 unchanged: shipments {app_rows(forks, 'order-1')[1]}")

    branches = sorted(b.branch for b in store.branches("shop"))
    print(f"shop branches: {branches}")
    saver.delete_thread("order-1-retry")
    left = sorted(b.branch for b in store.branches("shop"))
    print(f"after deleting thread order-1-retry: {left}")
    return {
        "first": first,
        "replayed": replayed,
        "forked_before": forked_before,
        "forked_after": forked_after,
        "original_after_fork": app_rows(forks, "order-1"),
        "branches": branches,
        "left": left,
    }


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "store")
