"""The recipes of docs/recipes run as their pages show them: pass^k over forks of one seed,
and the Claude Code hook that checkpoints before each tool call and undoes them."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

import scion
from conftest import load_example, scion_bin

REPO = Path(__file__).resolve().parents[3]


def test_pass_k_runs_every_trial_on_its_own_fork_and_scores_it_from_the_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pass_k = load_example(REPO / "examples" / "python" / "pass_k.py")
    results = pass_k.main(tmp_path / "store", trials=6)
    printed = capsys.readouterr().out
    # What each trial did is the stand-in's seeded choice; a right move passes and a wrong
    # one fails, caught either by the task's rows or by the diff touching more than asked.
    for task in pass_k.TASKS:
        chose_right = [random.Random(f"{task.name}/{t}").random() < task.skill for t in range(6)]
        assert results[task.name] == chose_right, task.name
    assert "changed 5 rows of bookings" in printed, printed
    assert "the task's rows are not as asked" in printed, printed
    assert pass_k.pass_hat_k([True, True, False], 1) == pytest.approx(2 / 3)
    assert pass_k.pass_hat_k([True, True, False], 2) == pytest.approx(1 / 3)
    assert pass_k.pass_hat_k([True, True, False], 3) == 0
    mean = sum(pass_k.pass_hat_k(p, 2) for p in results.values()) / len(results)
    assert f"{mean:>9.3f}" in printed.splitlines()[-1], printed
    # Every trial's fork is gone, and the seed is as it was made.
    store = scion.open_store(tmp_path / "store")
    assert [b.branch for b in store.branches("airline")] == ["airline@main"]
    assert store.diff("airline@main@init", "airline@main").empty


@pytest.fixture
def hooked(tmp_path: Path) -> Dict[str, Any]:
    store_dir = tmp_path / "store"
    env = {**os.environ, "SCION_BIN": scion_bin(), "SCION_STORE": str(store_dir), "SCION_HOOK_BRANCH": "notes@agent"}
    seed = tmp_path / "notes.db"
    conn = sqlite3.connect(seed)
    conn.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes(body) VALUES ('first')")
    conn.commit()
    conn.close()
    store = scion.open_store(store_dir, create=True)
    agent = store.create("notes", source=seed).fork("agent")
    return {"env": env, "store": store, "checkout": agent.checkout(), "branch": agent}


def hook(env: Dict[str, str], *args: str, event: Any = None) -> subprocess.CompletedProcess[str]:
    script = REPO / "examples" / "claude_hooks" / "scion_hook.py"
    return subprocess.run(
        [sys.executable, str(script), *args],
        input=json.dumps(event) if event is not None else "",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def pre_tool_use(tool: str, n: int) -> Dict[str, Any]:
    """The JSON Claude Code gives a PreToolUse hook on stdin."""
    return {
        "session_id": "8c35adc1-5b1e-4e0b-9a57-3f1c2d9e0a11",
        "transcript_path": "/home/me/.claude/projects/p/8c35adc1.jsonl",
        "cwd": "/home/me/p",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": {"command": "sqlite3 notes.db 'INSERT ...'", "description": "add a note"},
        "tool_use_id": f"toolu_01ABC{n}",
    }


def bodies(path: Path) -> List[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT body FROM notes ORDER BY id")]
    finally:
        conn.close()


def write(path: Path, body: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO notes(body) VALUES (?)", (body,))
    conn.commit()
    conn.close()


def test_the_claude_hook_checkpoints_before_each_tool_call_and_undo_takes_calls_back(hooked: Dict[str, Any]) -> None:
    env, path, branch = hooked["env"], hooked["checkout"], hooked["branch"]
    for n, (tool, body) in enumerate([("Bash", "second"), ("mcp__notes__write", "third"), ("Edit", "fourth")]):
        done = hook(env, event=pre_tool_use(tool, n))
        assert done.returncode == 0 and done.stdout == "", done.stderr
        write(path, body)
    cps = [c for c in branch.checkpoints() if c.name.startswith("cc-")]
    assert [c.name for c in cps] == ["cc-1-bash", "cc-2-mcp__notes__write", "cc-3-edit"]
    assert cps[1].meta == {
        "tool": "mcp__notes__write",
        "tool_use_id": "toolu_01ABC1",
        "session": "8c35adc1-5b1e-4e0b-9a57-3f1c2d9e0a11",
    }
    listed = hook(env, "list")
    assert listed.returncode == 0 and listed.stdout.count("cc-") == 3, listed

    # The last call is taken back, the checkout's uncommitted write with it; then two more.
    undone = hook(env, "undo")
    assert undone.returncode == 0, undone.stderr
    assert "cc-3-edit" in undone.stdout
    assert bodies(path) == ["first", "second", "third"]
    undone = hook(env, "undo", "--steps", "2")
    assert undone.returncode == 0, undone.stderr
    assert bodies(path) == ["first"]
    assert [c.name for c in branch.checkpoints() if c.name.startswith("cc-")] == []
    # Each undo is a head move: `scion undo` would take it back.
    log = subprocess.run(
        [env["SCION_BIN"], "--json", "log", "notes@agent"], capture_output=True, text=True, env=env, check=True
    )
    assert [e["op"] for e in json.loads(log.stdout)["entries"]][:2] == ["rollback", "rollback"], log.stdout

    # Nothing left to undo is said, not done.
    nothing = hook(env, "undo")
    assert nothing.returncode == 1 and "0 tool call(s) to undo" in nothing.stderr


def test_a_hook_that_cannot_checkpoint_says_why_and_blocks_only_when_strict(hooked: Dict[str, Any]) -> None:
    env = {k: v for k, v in hooked["env"].items() if k != "SCION_HOOK_BRANCH"}
    lenient = hook(env, event=pre_tool_use("Bash", 0))
    assert lenient.returncode == 1 and "SCION_HOOK_BRANCH" in lenient.stderr
    strict = hook({**env, "SCION_HOOK_STRICT": "1"}, event=pre_tool_use("Bash", 0))
    assert strict.returncode == 2
    gone = hook({**hooked["env"], "SCION_HOOK_BRANCH": "notes@nobody"}, event=pre_tool_use("Bash", 0))
    assert gone.returncode == 1 and "notes@nobody" in gone.stderr, gone.stderr


def test_the_settings_the_recipe_page_shows_run_the_hook(hooked: Dict[str, Any], tmp_path: Path) -> None:
    page = (REPO / "docs" / "recipes" / "claude-code-hooks.md").read_text()
    settings = json.loads(page.split("```json\n", 1)[1].split("```", 1)[0])
    (entry,) = settings["hooks"]["PreToolUse"]
    command = entry["hooks"][0]["command"].replace("shop@agent", "notes@agent")
    project = tmp_path / "project"
    (project / ".claude" / "hooks").mkdir(parents=True)
    (project / ".claude" / "hooks" / "scion_hook.py").write_text(
        (REPO / "examples" / "claude_hooks" / "scion_hook.py").read_text()
    )
    env = {k: v for k, v in hooked["env"].items() if k != "SCION_HOOK_BRANCH"}
    env["CLAUDE_PROJECT_DIR"] = str(project)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # Claude Code runs a command hook with the shell, the event JSON on stdin.
    done = subprocess.run(
        ["bash", "-c", command], input=json.dumps(pre_tool_use("Write", 9)), capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert [c.name for c in hooked["branch"].checkpoints() if c.name.startswith("cc-")] == ["cc-1-write"]
