"""LangGraph on scion: ScionSaver against LangGraph's own conformance suite (all eight
capabilities), and ThreadForks keeping an app database in step with a compiled graph."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
from operator import add
from pathlib import Path
from typing import Annotated, Any, AsyncGenerator, Dict, List, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.graph import END, START, StateGraph

import scion
from scion.langgraph import NoRecordedState, ScionSaver, ThreadForks, thread_branch_name

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "python"


def test_the_conformance_suite_passes_every_capability(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stores = iter(range(100))

    @checkpointer_test(name="ScionSaver")
    async def factory() -> AsyncGenerator[ScionSaver, None]:
        store = scion.open_store(tmp_path / f"store-{next(stores)}", create=True)
        saver = ScionSaver(store)
        yield saver
        saver.close()

    report = asyncio.run(validate(factory))
    counts = [
        f"  {cap:<16} detected={r.detected} passed={r.tests_passed} failed={r.tests_failed} skipped={r.tests_skipped}"
        for cap, r in report.results.items()
    ]
    with capsys.disabled():
        report.print_report()
        print("\n".join(counts))
    # Under xdist a worker's output does not reach the terminal: scripts/test-python names a
    # file for the report and prints it after the run.
    if os.environ.get("SCION_CONFORMANCE_REPORT"):
        Path(os.environ["SCION_CONFORMANCE_REPORT"]).write_text(
            f"langgraph-checkpoint-conformance on ScionSaver: {report.conformance_level()}\n" + "\n".join(counts) + "\n"
        )
    results = report.to_dict()
    detected = {cap for cap, r in report.results.items() if r.detected}
    assert detected == {c.value for c in ALL_CAPABILITIES}, results
    failed = {cap: r.failures for cap, r in report.results.items() if not r.passed}
    assert not failed, failed
    assert all(r.tests_passed > 0 for r in report.results.values()), results


def test_copy_thread_is_a_fork(tmp_path: Path) -> None:
    store = scion.open_store(tmp_path / "store", create=True)
    saver = ScionSaver(store)
    graph = _counter(saver)
    for _ in range(5):
        graph.invoke({"n": 1}, {"configurable": {"thread_id": "Source Thread"}})
    saver.copy_thread("Source Thread", "copy")
    source, copy = saver.branch_for("Source Thread"), saver.branch_for("copy")
    assert source.name == thread_branch_name("t-", "Source Thread") and source.name.startswith("t-source-thread-")
    # The copy shares every page of the source but the one holding the thread's id.
    diff = store.diff(source, copy)
    changed = {t.table: t.total for t in diff.tables if t.total}
    assert changed == {"scion_thread": 1}, changed
    got = [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "copy"}})]
    want = [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "Source Thread"}})]
    assert got == want and len(got) >= 5
    assert graph.get_state({"configurable": {"thread_id": "copy"}}).values["n"] == 5
    with pytest.raises(scion.AlreadyExists):
        saver.copy_thread("Source Thread", "copy")
    with pytest.raises(scion.NotFound):
        saver.copy_thread("nobody", "other")
    saver.delete_thread("copy")
    assert not copy.exists() and source.exists()


def test_async_methods_run_a_graph(tmp_path: Path) -> None:
    store = scion.open_store(tmp_path / "store", create=True)
    saver = ScionSaver(store)
    graph = _counter(saver)

    async def run() -> List[int]:
        config: RunnableConfig = {"configurable": {"thread_id": "a"}}
        for _ in range(3):
            await graph.ainvoke({"n": 1}, config)
        return [s.values.get("n", 0) async for s in graph.aget_state_history(config)]

    history = asyncio.run(run())
    assert history[0] == 3 and len(history) == 3 * 3


class Counted(TypedDict):
    n: Annotated[int, add]


class Steps(TypedDict, total=False):
    steps: List[str]


def _counter(saver: ScionSaver) -> Any:
    graph = StateGraph(Counted)
    graph.add_node("noop", lambda s: {})
    graph.add_edge(START, "noop")
    graph.add_edge("noop", END)
    return graph.compile(checkpointer=saver)


def _seed(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE log(id INTEGER PRIMARY KEY, step TEXT NOT NULL)")
    conn.commit()
    conn.close()
    return path


def _logging_graph(forks: ThreadForks, saver: ScionSaver) -> Any:
    def node(name: str) -> Any:
        def run(state: Dict[str, Any], config: RunnableConfig) -> Dict[str, Any]:
            with forks.connect(config) as db:
                db.execute("INSERT INTO log(step) VALUES (?)", (name,))
            return {"steps": state.get("steps", []) + [name]}

        return run

    graph = StateGraph(Steps)
    for name in ("a", "b", "c"):
        graph.add_node(name, node(name))
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", END)
    return graph.compile(checkpointer=saver)


def _log(forks: ThreadForks, thread: str) -> List[str]:
    with forks.connect({"configurable": {"thread_id": thread}}) as db:
        return [r[0] for r in db.execute("SELECT step FROM log ORDER BY id")]


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_the_app_database_follows_replays_forks_and_deletes(tmp_path: Path, durability: str) -> None:
    store = scion.open_store(tmp_path / "store", create=True)
    store.create("app", source=_seed(tmp_path / "app.db"))
    forks = ThreadForks(store, "app")
    saver = ScionSaver(store, forks=forks)
    graph = _logging_graph(forks, saver)
    t1: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"steps": []}, t1, durability=durability)
    assert _log(forks, "t1") == ["a", "b", "c"]

    history = list(graph.get_state_history(t1))
    before_b = next(s for s in history if s.next == ("b",))
    # Every stored root checkpoint has a recorded state of the app database.
    recorded = {c.name for c in forks.branch_for("t1").checkpoints()}
    assert {f"lg-{s.config['configurable']['checkpoint_id']}" for s in history} <= recorded

    # A replay from before b: the app database goes back to [a] before b runs again.
    graph.invoke(None, before_b.config, durability=durability)
    assert _log(forks, "t1") == ["a", "b", "c"]

    # update_state from before b, then continue: the same.
    updated = graph.update_state(before_b.config, {"steps": ["a", "edited"]})
    graph.invoke(None, updated, durability=durability)
    assert _log(forks, "t1") == ["a", "b", "c"]

    # A fork of the thread at that checkpoint: a fork of the app database at it.
    at = before_b.config["configurable"]["checkpoint_id"]
    t2 = saver.fork_thread("t1", at, "t2")
    assert _log(forks, "t2") == ["a"]
    graph.invoke(None, t2, durability=durability)
    assert _log(forks, "t2") == ["a", "b", "c"] and _log(forks, "t1") == ["a", "b", "c"]

    # A new input continues the thread from its latest state.
    graph.invoke({"steps": []}, t1, durability=durability)
    assert _log(forks, "t1") == ["a", "b", "c", "a", "b", "c"]

    # Clear errors.
    with pytest.raises(scion.NotFound):
        saver.fork_thread("ghost", at, "t3")
    with pytest.raises(scion.AlreadyExists):
        saver.fork_thread("t1", at, "t2")
    with pytest.raises(NoRecordedState):
        saver.fork_thread("t1", "1f000000-0000-6000-8000-000000000000", "t3")
    with pytest.raises(NoRecordedState):
        forks.rewind("t1", "1f000000-0000-6000-8000-000000000000")

    saver.delete_thread("t2")
    assert not forks.branch_for("t2").exists() and not saver.branch_for("t2").exists()
    assert forks.branch_for("t1").exists()


def test_a_node_outside_a_stored_checkpoint_is_told_why(tmp_path: Path) -> None:
    store = scion.open_store(tmp_path / "store", create=True)
    store.create("app", source=_seed(tmp_path / "app.db"))
    forks = ThreadForks(store, "app", wait=0.2)
    # A saver without the companion: nothing records the app database.
    graph = _logging_graph(forks, ScionSaver(store))
    with pytest.raises(scion.Transient, match="has not stored checkpoint"):
        graph.invoke({"steps": []}, {"configurable": {"thread_id": "t"}})


def test_the_example_runs(tmp_path: Path) -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import langgraph_rewind  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(EXAMPLES))
    got = langgraph_rewind.main(tmp_path / "store")
    assert got["first"] == ([(1, "lamp", "shipped")], 1)
    assert got["replayed"] == ([(1, "lamp", "shipped")], 1)
    assert got["forked_before"] == ([(1, "lamp", "new")], 0)
    assert got["forked_after"] == ([(1, "lamp", "shipped")], 1)
    assert got["original_after_fork"] == ([(1, "lamp", "shipped")], 1)
    assert len(got["branches"]) == len(got["left"]) + 1
