#!/usr/bin/env python3
"""A scion checkpoint before each tool call of Claude Code (or the Claude Agent SDK), and undo.

As a PreToolUse hook it reads the JSON the hook receives on stdin and names the state of
the branch `SCION_HOOK_BRANCH` (db@branch) as a checkpoint `cc-<n>-<tool>` before the tool
runs; what an agent committed to the branch's checkout since the last call is kept in it.
`undo` takes back the last tool call (`--steps N`: the last N): the branch returns to the
checkpoint taken before it, and what the call wrote is gone, checkout included. `list` shows
the checkpoints. Standard library only; it runs the `scion` CLI (`SCION_BIN`, or `scion` on
PATH).

    SCION_HOOK_BRANCH=shop@agent python3 scion_hook.py < hook-input.json
    SCION_HOOK_BRANCH=shop@agent python3 scion_hook.py undo [--steps N]
    SCION_HOOK_BRANCH=shop@agent python3 scion_hook.py list

A hook that fails prints why on stderr and exits 1, which Claude Code shows and lets the
tool run anyway; set SCION_HOOK_STRICT=1 to exit 2 instead, which blocks the tool call.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from typing import Any, Dict, List, Optional

PREFIX = "cc-"


class HookError(Exception):
    """What the hook could not do, said for a person."""


def scion(*args: str) -> Any:
    """Run the scion CLI with --json; its answer, or a HookError with scion's own message."""
    binary = os.environ.get("SCION_BIN", "scion")
    try:
        done = subprocess.run([binary, "--json", *args], capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise HookError(f"no scion CLI at {binary!r} (set SCION_BIN or put scion on PATH)") from None
    if done.returncode != 0:
        try:
            error = json.loads(done.stderr.strip().splitlines()[-1])["error"]
            said = error["message"] + (f" ({error['hint']})" if error.get("hint") else "")
        except (IndexError, KeyError, ValueError):
            said = done.stderr.strip() or f"exit {done.returncode}"
        raise HookError(f"scion {' '.join(args)}: {said}")
    return json.loads(done.stdout) if done.stdout.strip() else None


def branch() -> str:
    target = os.environ.get("SCION_HOOK_BRANCH", "")
    if "@" not in target:
        raise HookError("set SCION_HOOK_BRANCH to the branch the agent works on, as db@branch")
    return target


def hook_checkpoints(target: str) -> List[Dict[str, Any]]:
    """This hook's checkpoints of `target`, oldest first."""
    listed = scion("checkpoints", target)["checkpoints"]
    ours = [c for c in listed if re.fullmatch(rf"{PREFIX}\d+-.*", c["name"])]
    return sorted(ours, key=lambda c: int(c["name"][len(PREFIX) :].split("-", 1)[0]))


def on_pre_tool_use(event: Dict[str, Any]) -> str:
    target = branch()
    tool = str(event.get("tool_name") or "tool")
    existing = hook_checkpoints(target)
    n = int(existing[-1]["name"][len(PREFIX) :].split("-", 1)[0]) + 1 if existing else 1
    slug = re.sub(r"[^a-z0-9_.-]+", "-", tool.lower()).strip("-.")[:40] or "tool"
    name = f"{PREFIX}{n}-{slug}"
    meta = {
        "tool": tool,
        "tool_use_id": str(event.get("tool_use_id", "")),
        "session": str(event.get("session_id", "")),
    }
    args = ["checkpoint", target, name]
    for key, value in meta.items():
        if value:
            args += ["--meta", f"{key}={value}"]
    scion(*args)
    return name


def undo(steps: int) -> str:
    target = branch()
    ours = hook_checkpoints(target)
    if steps < 1:
        raise HookError("--steps takes a count of tool calls, 1 or more")
    if len(ours) < steps:
        raise HookError(f"{target} has {len(ours)} tool call(s) to undo, not {steps}")
    back_to = ours[-steps]
    # --force: what the undone calls wrote to the checkout is what undo throws away.
    scion("rollback", target, "--to", back_to["name"], "--force", "--no-backup")
    for c in ours[-steps:]:
        scion("checkpoint", "delete", target, c["name"])
    return str(back_to["name"])


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    step = sub.add_parser("undo", help="take back the last tool call (or the last N)")
    step.add_argument("--steps", type=int, default=1)
    sub.add_parser("list", help="the checkpoints taken before tool calls, oldest first")
    args = parser.parse_args(argv)
    try:
        if args.command == "undo":
            name = undo(args.steps)
            print(f"{branch()} is back where it was before the tool call of checkpoint {name}")
        elif args.command == "list":
            for c in hook_checkpoints(branch()):
                meta = c.get("meta") or {}
                print(f"{c['name']}  version {c['version']}  {meta.get('tool_use_id', '')}")
        else:
            event = json.load(sys.stdin)
            if event.get("hook_event_name", "PreToolUse") == "PreToolUse":
                on_pre_tool_use(event)
        return 0
    except (HookError, ValueError) as e:
        print(f"scion hook: {e}", file=sys.stderr)
        return 2 if os.environ.get("SCION_HOOK_STRICT") == "1" else 1


if __name__ == "__main__":
    sys.exit(main())
