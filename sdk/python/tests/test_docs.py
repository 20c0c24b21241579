"""The docs' Python blocks run as written. Every page of README.md and docs/ that shows a
Python block is followed in order, from a fresh directory, as a user would in one shell and
one Python session: the README's quickstart first (other pages build on it), then each block
of the page — shell blocks with bash, `background` ones as a second terminal running
`scion serve`, Python blocks in one interpreter whose names carry over from block to block
(top-level `await` allowed, as in `python -m asyncio`). Each Python block says how in the
comment right above it (`<!-- doc-test: run -->` or `<!-- doc-test: skip: <reason> -->`); a
block shown under `<!-- recipe: PATH -->` is that file, which its own test runs. Shell blocks marked
`<!-- doc-test: run-python -->` need this package (pytest with the plugin) and run only
here; the other shell blocks of every page also run in `crates/scion-cli/tests/docs.rs`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from conftest import REPO, scion_bin

pytestmark = pytest.mark.engine

LANGS = {"sh": "sh", "bash": "sh", "shell": "sh", "console": "sh", "python": "python"}


@dataclass
class Block:
    at: str
    lang: str  # "sh" or "python"
    how: str  # "run", "background", "skip: ...", "recipe"
    code: str
    quickstart: bool = False


def blocks(page: Path) -> List[Block]:
    lines = page.read_text().splitlines()
    name = str(page.relative_to(REPO))
    out: List[Block] = []
    i = 0
    while i < len(lines):
        fence = lines[i].strip()
        lang = LANGS.get(fence[3:].strip()) if fence.startswith("```") else None
        if lang is None:
            i += 1
            continue
        before = [line.strip() for line in lines[:i] if line.strip()]
        marker = next((line for line in reversed(before) if not line.startswith("<!-- quickstart:")), "")
        quickstart = any(line.startswith("<!-- quickstart:start") for line in before[-3:])
        if marker.startswith("<!-- recipe:"):
            how = "recipe"
        elif marker.startswith("<!-- doc-test:") and marker.endswith("-->"):
            how = marker[len("<!-- doc-test:") : -3].strip()
        else:
            raise AssertionError(f"{name}:{i + 1}: a {lang} block without a doc-test marker (found {marker!r})")
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith("```"):
            end += 1
        out.append(Block(f"{name}:{i + 1}", lang, how, "\n".join(lines[i + 1 : end]) + "\n", quickstart))
        i = end + 1
    return out


def pages() -> List[Path]:
    found = [
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "docs" / "recipes").glob("*.md")),
    ]
    return [
        p for p in found if any((b.lang == "python" and b.how != "recipe") or b.how == "run-python" for b in blocks(p))
    ]


# The interpreter a page's Python blocks share: reads one JSON-encoded block a line, runs
# it in one namespace, answers "ok" or the traceback.
KERNEL = textwrap.dedent(
    """
    import ast, asyncio, inspect, json, sys, traceback
    ns = {"__name__": "__main__"}
    for line in sys.stdin:
        name, code = json.loads(line)
        try:
            compiled = compile(code, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(compiled, ns)
            if inspect.iscoroutine(result):
                asyncio.run(result)
            answer = "ok"
        except BaseException:
            answer = traceback.format_exc()
        sys.stdout.flush()
        print("\\x00" + json.dumps(answer), flush=True)
    """
)


def environment(work: Path) -> Dict[str, str]:
    # A user's shell: none of this run's store, socket or pytest (xdist) settings.
    dropped = ("SCION_STORE", "SCION_SOCKET", "XDG_RUNTIME_DIR", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "SCION_TOKENS")
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("PYTEST_")}
    # scion, and this environment's python and pytest, first.
    env["PATH"] = f"{Path(scion_bin()).parent}:{Path(sys.executable).parent}:{env['PATH']}"
    env["HOME"] = str(work / "home")
    return env


def follow(page: Path, work: Path) -> Tuple[int, int, List[str]]:
    """Follow `page` in `work`: (blocks run, Python blocks run, skips with their reasons)."""
    todo = blocks(page)
    if page.name != "README.md" or page.parent != REPO:
        todo = [b for b in blocks(REPO / "README.md") if b.quickstart] + todo
    env = environment(work)
    (work / "home").mkdir()
    # As in a clone: pages name the examples by their paths in the repository.
    shutil.copytree(REPO / "examples", work / "examples", ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    kernel = subprocess.Popen(
        [sys.executable, "-c", KERNEL], cwd=work, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    background: List[subprocess.Popen[bytes]] = []
    ran = python_ran = 0
    skipped: List[str] = []
    try:
        for b in todo:
            if b.how.startswith("skip:"):
                skipped.append(f"{b.at}: {b.how[5:].strip()}")
                continue
            if b.how in ("run-s3", "run-azure"):
                skipped.append(f"{b.at}: crates/scion-cli/tests/docs.rs runs it against the test servers")
                continue
            if b.how == "recipe":
                skipped.append(f"{b.at}: the recipe's own test runs this file")
                continue
            if b.how == "background":
                background.append(
                    subprocess.Popen(
                        ["bash", "-euo", "pipefail", "-c", b.code],
                        cwd=work,
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )
                deadline = time.monotonic() + 30
                while (
                    subprocess.run(["scion", "session", "list"], cwd=work, env=env, capture_output=True).returncode != 0
                ):
                    assert time.monotonic() < deadline, f"{b.at}: the daemon never answered"
                    time.sleep(0.1)
                continue
            assert b.how in ("run", "run-python"), f"{b.at}: unknown doc-test marker {b.how!r}"
            if b.lang == "sh":
                r = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", b.code],
                    cwd=work,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                assert r.returncode == 0, (
                    f"{b.at} exited {r.returncode}:\n{b.code}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
                )
            else:
                assert kernel.stdin is not None and kernel.stdout is not None
                kernel.stdin.write(json.dumps([b.at, b.code]) + "\n")
                kernel.stdin.flush()
                answer: Optional[str] = None
                printed = []
                for line in kernel.stdout:
                    if line.startswith("\x00"):
                        answer = json.loads(line[1:])
                        break
                    printed.append(line)
                assert answer == "ok", f"{b.at} raised:\n{b.code}\n--- printed\n{''.join(printed)}\n--- {answer}"
                python_ran += 1
            ran += 1
    finally:
        if kernel.stdin is not None:
            kernel.stdin.close()
        kernel.wait(timeout=30)
        for p in background:
            os.killpg(p.pid, 15)
            p.wait(timeout=30)
    return ran, python_ran, skipped


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_python_block_of_the_page_runs_as_written(page: Path) -> None:
    # A short directory: the daemon's default socket lives under it, and a unix socket's
    # path has room for about 100 bytes.
    work = Path(tempfile.mkdtemp(prefix="scion-doc-"))
    try:
        ran, python_ran, skipped = follow(page, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{page.relative_to(REPO)}: {ran} blocks run ({python_ran} Python), {len(skipped)} skipped")
    for s in skipped:
        print(f"  skipped {s}")
    assert ran > 0
