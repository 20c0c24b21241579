"""OpenAI Agents SDK on scion: the session and the app's tables in one branch, a fork per attempt.

The Agents SDK keeps a conversation in `SQLiteSession`, a SQLite file. Put that file on a
scion branch, beside the tables the agent's tools write, and a fork is a copy of both: each
attempt at the next turn runs on its own fork (its messages and its side effects together),
is checked against the database it left, and the one that passes is promoted; the others
are destroyed, their conversation and their writes with them.

    python examples/python/agents_session.py [--store DIR]

The model is the SDK's own `ScriptedModel` (no network): three attempts at "refund order 7"
that call the `refund` tool with different arguments, two of them wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Tuple

from agents import Agent, RunContextWrapper, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

import scion

SESSION = "customer-42"


def seed_file(path: Path) -> Path:
    with closing(sqlite3.connect(str(path))) as conn, conn:
        conn.execute(
            "CREATE TABLE orders(id INTEGER PRIMARY KEY, item TEXT NOT NULL, total_cents INTEGER NOT NULL,"
            " refunded_cents INTEGER NOT NULL DEFAULT 0)"
        )
        conn.executemany(
            "INSERT INTO orders(id, item, total_cents) VALUES (?, ?, ?)",
            [(i, f"item-{i}", 1000 + 250 * i) for i in range(1, 11)],
        )
    return path


@dataclass
class Shop:
    """What the tools get: the file of the branch this run writes."""

    path: Path


@function_tool
def refund(ctx: RunContextWrapper[Shop], order_id: int, amount_cents: int) -> str:
    """Refund part or all of an order.

    Args:
        order_id: The order to refund.
        amount_cents: How much to refund, in cents.
    """
    with closing(sqlite3.connect(ctx.context.path)) as db, db:
        db.execute("UPDATE orders SET refunded_cents = refunded_cents + ? WHERE id = ?", (amount_cents, order_id))
    return f"refunded {amount_cents} cents on order {order_id}"


def agent(steps: List[Any]) -> Agent[Shop]:
    return Agent[Shop](
        name="support",
        instructions="You help customers with their orders.",
        tools=[refund],
        model=ScriptedModel(steps),
    )


def run_turn(path: Path, text: str, steps: List[Any]) -> str:
    """One turn of the conversation kept in the file at `path`, with the model's steps."""
    session = SQLiteSession(SESSION, path)
    try:
        result = Runner.run_sync(agent(steps), text, session=session, context=Shop(path))
        return str(result.final_output)
    finally:
        session.close()


# Three attempts at the customer's second turn: the model refunds twice the total, refunds
# the wrong order, or does it right.
ATTEMPTS: Dict[str, Tuple[int, int]] = {"double": (7, 2 * 2750), "wrong-order": (8, 3000), "right": (7, 2750)}


def attempt_steps(name: str) -> List[Any]:
    order, cents = ATTEMPTS[name]
    return [
        [function_call("refund", {"order_id": order, "amount_cents": cents}, call_id=f"call-{name}")],
        [assistant_message(f"Done: {cents / 100:.2f} refunded on order {order}.")],
    ]


def check(path: Path) -> str:
    """What is wrong with the database an attempt left ('' if nothing)."""
    with closing(sqlite3.connect(path)) as db:
        refunds = db.execute("SELECT id, refunded_cents, total_cents FROM orders WHERE refunded_cents > 0").fetchall()
    if refunds != [(7, 2750, 2750)]:
        return f"refunds {refunds}, not order 7 in full"
    return ""


def session_items(path: Path) -> List[str]:
    session = SQLiteSession(SESSION, path)
    try:
        items = asyncio.run(session.get_items())
        return [str(item.get("role") or item.get("type")) for item in items]
    finally:
        session.close()


def main(store_dir: Path) -> Dict[str, Any]:
    set_tracing_disabled(True)
    store = scion.open_store(store_dir, create=True)
    with tempfile.TemporaryDirectory() as tmp:
        main_branch = store.create("support", source=seed_file(Path(tmp) / "support.db"))
    # The first turn, on main: the session's tables are made in the branch's file.
    reply = run_turn(
        main_branch.checkout(),
        "Hi, order 7 arrived broken.",
        [[assistant_message("Sorry about that! Would you like a refund or a replacement?")]],
    )
    print(f"turn 1 on {main_branch.ref}: {reply}")
    main_branch.checkpoint("turn-1")

    verdicts: Dict[str, str] = {}
    winner = None
    for name in ATTEMPTS:
        with main_branch.attempt(f"turn-2-{name}") as fork:
            path = fork.checkout()
            reply = run_turn(path, "A refund, please.", attempt_steps(name))
            why = check(path)
            verdicts[name] = why or "passed"
            print(f"attempt {name} on {fork.ref}: {reply!r} -> {verdicts[name]}")
            if not why and winner is None:
                fork.checkpoint("turn-2")
                # main is protected (as every database's first branch is): moving it is said.
                # No backup branch: main's head history keeps the move, `undo` takes it back.
                fork.promote(onto="main", force=True, backup=False)
                fork.destroy(force=True)
                winner = name

    path = main_branch.checkout()
    roles = session_items(path)
    with closing(sqlite3.connect(path)) as db:
        refunded = db.execute("SELECT id, refunded_cents FROM orders WHERE refunded_cents > 0").fetchall()
    print(f"{main_branch.ref} after promoting attempt {winner!r}: session items {roles}; refunds {refunded}")
    left = [b.branch for b in store.branches("support")]
    print(f"branches left: {left}")
    moves = [f"{e.op} v{e.old_version} -> v{e.new_version}" for e in main_branch.history().entries]
    print(f"{main_branch.ref} head history: {moves}")
    return {
        "verdicts": verdicts,
        "winner": winner,
        "roles": roles,
        "refunded": refunded,
        "branches": left,
        "moves": moves,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=None)
    args = parser.parse_args()
    if args.store:
        main(args.store)
    else:
        with tempfile.TemporaryDirectory() as tmp_dir:
            main(Path(tmp_dir) / "store")
