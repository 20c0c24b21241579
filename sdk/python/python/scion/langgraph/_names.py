"""What the saver and the companion share: how a thread's id becomes a branch name."""

from __future__ import annotations

import hashlib
import re
from typing import Optional

from langchain_core.runnables import RunnableConfig

from .. import _errors

# A LangGraph checkpoint's recorded app state is the scion checkpoint of this name + its id.
RECORDING_PREFIX = "lg-"


class NoRecordedState(_errors.NotFound):
    """The app database's state at a LangGraph checkpoint was never recorded (the
    checkpoint predates the companion, or was copied without it)."""


def thread_branch_name(prefix: str, thread_id: str) -> str:
    """The branch a thread lives on: ``prefix`` + a readable slug of the id + 8 hex digits
    of its SHA-256 (so ids differing only in case or punctuation never collide)."""
    slug = re.sub(r"[^a-z0-9]+", "-", thread_id.lower()).strip("-")[:40].strip("-")
    digest = hashlib.sha256(thread_id.encode()).hexdigest()[:8]
    return f"{prefix}{slug}-{digest}" if slug else f"{prefix}{digest}"


def thread_id_of(config: Optional[RunnableConfig]) -> Optional[str]:
    if not config:
        return None
    value = config.get("configurable", {}).get("thread_id")
    return None if value is None else str(value)
