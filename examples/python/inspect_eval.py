"""Inspect AI on scion: each sample works on its own fork of one seed, scored from its diff.

An eval whose samples change a database needs each sample to start from the same state and
to leave nothing behind for the others, however many run at once. Here a solver forks the
seed for each sample (O(1), whatever the seed's size), the model's `sql` tool writes to that
fork only, the scorer reads the database the sample left (the row the task asks for, and a
diff against the seed that may touch nothing else), and the task's cleanup destroys the
fork, even when the sample fails.

    python examples/python/inspect_eval.py [--samples 20] [--seed-mib N] [--store DIR]

The model is Inspect's `mockllm/model` with a scripted policy (no network): it ships the
order the sample names with one `sql` call, but for every fifth order it ships all of that
customer's orders, a mistake only the diff catches.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sqlite3
import statistics
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Dict, List

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog
from inspect_ai.model import ChatMessage, ChatMessageTool, GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer
from inspect_ai.solver import Generate, Solver, TaskState, generate, solver, use_tools
from inspect_ai.tool import Tool, ToolChoice, ToolInfo, tool
from inspect_ai.util import store as sample_store

import scion
import scion.aio
import scion.vfs

SEED = "shop@main"


def seed_file(path: Path, orders: int, mib: int = 0) -> Path:
    conn = sqlite3.connect(str(path))
    conn.executescript(
        "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer TEXT NOT NULL, status TEXT NOT NULL);"
        "CREATE TABLE documents(id INTEGER PRIMARY KEY, body BLOB NOT NULL);"
    )
    # Bulk no sample touches, to show that a fork costs the same whatever the seed's size.
    conn.executemany("INSERT INTO documents(body) VALUES (randomblob(4000))", [()] * (mib * 256))
    # Three orders per customer, so shipping "all of this customer's" touches three rows.
    conn.executemany(
        "INSERT INTO orders(id, customer, status) VALUES (?, ?, 'new')",
        [(i, f"customer-{(i - 1) // 3}") for i in range(1, orders * 3 + 1)],
    )
    conn.commit()
    conn.close()
    return path


class Forks:
    """The forks in flight, to show how many samples ran at once and what a fork cost."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        # The fork itself, timed in the thread that makes it (20 at once contend for the
        # store), and as the sample waited for it (Inspect's event loop is busy with the
        # other samples, so resuming takes longer than the fork).
        self.fork_ms: List[float] = []
        self.waited_ms: List[float] = []


@solver
def fork_database(store: scion.aio.AsyncStore, forks: Forks) -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        def fork() -> str:
            started = time.perf_counter()
            branch = store.sync.branch(SEED).fork(f"sample-{state.sample_id}-{state.epoch}", ttl="1h")
            forks.fork_ms.append((time.perf_counter() - started) * 1000)
            return branch.ref

        asked = time.perf_counter()
        state.store.set("branch", await asyncio.to_thread(fork))
        forks.waited_ms.append((time.perf_counter() - asked) * 1000)
        forks.in_flight += 1
        forks.peak = max(forks.peak, forks.in_flight)
        return state

    return solve


@tool
def sql(store: scion.aio.AsyncStore) -> Tool:
    async def execute(query: str) -> str:
        """Run one SQL statement on this sample's database and return the rows it gives.

        Args:
            query: One SQL statement.
        """
        # The sample's own store (Inspect's, one per sample) names its fork.
        branch = sample_store().get("branch")

        def run() -> str:
            # Through the scion VFS: no file is made, and the commit is a new version.
            with closing(scion.vfs.connect(branch, store=store.location)) as db, db:
                rows = db.execute(query).fetchall()
                return f"{db.total_changes} rows changed; rows: {rows}"

        return await asyncio.to_thread(run)

    return execute


def scripted_model(
    messages: List[ChatMessage], tools: List[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
) -> ModelOutput:
    """One `sql` call, then an answer; every fifth order is shipped with its customer's others."""
    found = re.search(r"order (\d+)", messages[0].text)
    assert found, messages[0].text
    order = int(found.group(1))
    if any(isinstance(m, ChatMessageTool) for m in messages):
        output = ModelOutput.from_content("mockllm/model", f"Order {order} is shipped.")
    else:
        if order % 5 == 0:
            query = (
                "UPDATE orders SET status = 'shipped' "
                f"WHERE customer = (SELECT customer FROM orders WHERE id = {order})"
            )
        else:
            query = f"UPDATE orders SET status = 'shipped' WHERE id = {order}"
        output = ModelOutput.for_tool_call("mockllm/model", "sql", {"query": query})
    # Token counts given, so mockllm does not fetch a tokenizer (no network here).
    output.usage = ModelUsage(input_tokens=len(messages), output_tokens=1, total_tokens=len(messages) + 1)
    return output


@scorer(metrics=[accuracy()])
def database_diff(store: scion.aio.AsyncStore) -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        fork = store.branch(state.store.get("branch"))
        order = int(target.text)
        with closing(scion.vfs.connect(fork.ref, store=store.location, read_only=True)) as db:
            (status,) = db.execute("SELECT status FROM orders WHERE id = ?", (order,)).fetchone()
        # Each commit through the VFS is a version: the diff sees what the sample wrote.
        diff = await store.diff(SEED, fork)
        touched = {t.table: t.added + t.removed + t.changed for t in diff.tables}
        right = status == "shipped" and touched == {"orders": 1}
        return Score(
            value=CORRECT if right else INCORRECT,
            explanation=f"order {order} is {status}; rows changed: {touched}",
        )

    return score


def make_task(store: scion.aio.AsyncStore, samples: int, forks: Forks) -> Task:
    async def destroy_fork(state: TaskState) -> None:
        forks.in_flight -= 1
        await store.branch(state.store.get("branch")).destroy(missing_ok=True)

    return Task(
        dataset=[Sample(input=f"Ship order {n}.", target=str(n), id=n) for n in range(1, samples + 1)],
        solver=[fork_database(store, forks), use_tools(sql(store)), generate()],
        scorer=database_diff(store),
        cleanup=destroy_fork,
    )


def main(store_dir: Path, samples: int = 20, seed_mib: int = 0, log_dir: Path | None = None) -> Dict[str, Any]:
    sync_store = scion.open_store(store_dir, create=True)
    with tempfile.TemporaryDirectory() as tmp:
        seed = seed_file(Path(tmp) / "shop.db", samples, seed_mib)
        print(f"seed: {seed.stat().st_size / 2**20:.1f} MiB")
        sync_store.create("shop", source=seed)
        store = scion.aio.AsyncStore(sync_store)
        forks = Forks()
        [log] = eval(
            make_task(store, samples, forks),
            model=get_model("mockllm/model", custom_outputs=scripted_model),
            max_samples=samples,
            log_dir=str(log_dir or Path(tmp) / "logs"),
            display="none",
        )
        # The log's samples are read from its file in log_dir.
        return report(log, forks, sync_store)


def report(log: EvalLog, forks: Forks, store: scion.Store) -> Dict[str, Any]:
    assert log.status == "success", log.error.message if log.error else log.status
    assert log.results is not None and log.samples is not None
    accuracy_value = log.results.scores[0].metrics["accuracy"].value
    verdicts = {s.id: s.scores["database_diff"].value for s in log.samples if s.scores}
    for sample in sorted(log.samples, key=lambda s: int(s.id)):
        assert sample.scores is not None
        if sample.scores["database_diff"].value != CORRECT:
            print(f"  sample {sample.id}: {sample.scores['database_diff'].explanation}")
    print(f"{len(log.samples)} samples, accuracy {accuracy_value:.2f}; {forks.peak} samples in flight at once")
    for what, times in (("fork per sample", forks.fork_ms), ("the sample's wait for it", forks.waited_ms)):
        ms = sorted(times)
        print(
            f"{what}: median {statistics.median(ms):.2f} ms, "
            f"p90 {ms[max(0, int(len(ms) * 0.9) - 1)]:.2f} ms, max {ms[-1]:.2f} ms"
        )
    # Every sample's fork is gone, and the seed is as it was made.
    left = [b.branch for b in store.branches("shop")]
    assert left == [SEED], left
    assert store.diff("shop@main@init", SEED).empty
    print(f"branches left: {left}")
    return {"accuracy": accuracy_value, "verdicts": verdicts, "peak": forks.peak, "fork_ms": sorted(forks.fork_ms)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=None)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--seed-mib", type=int, default=0, help="bulk to add to the seed, in MiB")
    args = parser.parse_args()
    if args.store:
        main(args.store, args.samples, args.seed_mib)
    else:
        with tempfile.TemporaryDirectory() as tmp_dir:
            main(Path(tmp_dir) / "store", args.samples, args.seed_mib)
