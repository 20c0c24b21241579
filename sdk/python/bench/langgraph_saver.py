"""ScionSaver's put, get_tuple and list beside LangGraph's stock SqliteSaver on a plain file.

Both savers get the same checkpoints (a state of a few channels, as a small graph stores at
each step) for one thread, through LangGraph's public saver API: per operation, the median
and 90th percentile of `runs` calls after a warm-up. What differs: the stock saver keeps
every thread in one file; ScionSaver keeps each thread on its own branch, written through the
scion VFS (each put is a commit: a new version of the branch).

    python sdk/python/bench/langgraph_saver.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

import scion
from scion.langgraph import ScionSaver


def _timed(calls: int, op: Callable[[int], Any]) -> List[float]:
    out = []
    for i in range(calls):
        start = time.perf_counter()
        op(i)
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def _summary(samples: List[float]) -> Dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered),
        "p90_ms": ordered[int(len(ordered) * 0.9) - 1] if len(ordered) >= 10 else ordered[-1],
    }


def measure(saver: BaseCheckpointSaver[Any], runs: int, thread: str) -> Dict[str, Dict[str, float]]:
    config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    state = {"messages": ["hello"] * 8, "step": 0, "notes": "x" * 512}

    def put(i: int) -> None:
        nonlocal config
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {**state, "step": i}
        checkpoint["channel_versions"] = {"messages": str(i + 1), "step": str(i + 1)}
        config = saver.put(config, checkpoint, {"source": "loop", "step": i, "parents": {}}, {"step": str(i + 1)})

    _timed(5, put)  # warm-up: the thread's branch is made by the first put
    put_ms = _timed(runs, put)
    get_ms = _timed(runs, lambda _: saver.get_tuple(config))
    list_ms = _timed(runs, lambda _: list(saver.list({"configurable": {"thread_id": thread}}, limit=10)))
    return {"put": _summary(put_ms), "get_tuple": _summary(get_ms), "list (10)": _summary(list_ms)}


def main(runs: int) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "checkpoints.db", check_same_thread=False)
        stock = SqliteSaver(conn)
        stock.setup()
        stock_rows = measure(stock, runs, "bench")
        conn.close()

        store = scion.open_store(Path(tmp) / "store", create=True)
        saver = ScionSaver(store)
        scion_rows = measure(saver, runs, "bench")
        saver.close()
    return {"runs": runs, "SqliteSaver (plain file)": stock_rows, "ScionSaver": scion_rows}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = main(args.runs)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        stock, ours = result["SqliteSaver (plain file)"], result["ScionSaver"]
        print(f"{'operation':<12}{'SqliteSaver median':>20}{'ScionSaver median':>20}{'ratio':>8}")
        for op in stock:
            a, b = stock[op]["median_ms"], ours[op]["median_ms"]
            print(f"{op:<12}{a:>17.3f} ms{b:>17.3f} ms{b / a:>7.1f}x")
