"""docs/recipes/openai-agents.md runs as its page shows it: the Agents SDK's SQLiteSession
and the app's tables on one branch, each attempt at a turn on its own fork."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

import scion
from conftest import load_example

REPO = Path(__file__).resolve().parents[3]


def message_rows(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as db:
        return [r[0] for r in db.execute("SELECT message_data FROM agent_messages ORDER BY id")]


def test_each_attempt_at_a_turn_forks_the_session_and_the_app_tables_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = load_example(REPO / "examples" / "python" / "agents_session.py")
    result = recipe.main(tmp_path / "store")
    printed = capsys.readouterr().out
    assert result["verdicts"] == {
        "double": "refunds [(7, 5500, 2750)], not order 7 in full",
        "wrong-order": "refunds [(8, 3000, 3000)], not order 7 in full",
        "right": "passed",
    }
    assert result["winner"] == "right"
    # main holds the first turn and the winning attempt's turn: its messages and its refund,
    # and nothing of the attempts that were thrown away.
    assert result["roles"] == ["user", "assistant", "user", "function_call", "function_call_output", "assistant"]
    assert result["refunded"] == [(7, 2750)]
    store = scion.open_store(tmp_path / "store")
    main = store.branch("support@main")
    rows = message_rows(main.checkout())
    assert any("call-right" in r for r in rows), rows
    assert not any("call-double" in r or "call-wrong-order" in r for r in rows), rows
    assert result["branches"] == ["support@main"]
    assert result["moves"] == ["promote v2 -> v3", "commit v1 -> v2"]
    assert "support@main after promoting attempt 'right'" in printed, printed

    # The promote is a head move like any other: undo takes the turn back, messages and
    # refund together.
    main.undo(force=True)
    rows = message_rows(main.checkout())
    assert len(rows) == 2 and not any("call-right" in r for r in rows), rows
    with closing(sqlite3.connect(main.checkout())) as db:
        assert db.execute("SELECT count(*) FROM orders WHERE refunded_cents > 0").fetchone() == (0,)
