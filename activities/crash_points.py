"""Fault hooks for proving exactly-once: kill this worker at a named instant of a tool
call, once per idempotency key, when AGENT_CRASH_AT names that instant.

The instants: `before_provider`, `after_provider` (the provider acted; our ledger has
not recorded it), `after_ledger` (recorded; Temporal has not heard back). Optionally
narrowed to one tool: `after_provider:refund_order`. And in workflow code, around a
sub-agent's start (workflows/faults.py): `before_child_start`, `after_child_start`,
`after_child_answer`.
"""

from __future__ import annotations

import hashlib
import os
import signal
from collections.abc import Callable
from pathlib import Path

from durable_agents.workflows.faults import WORKFLOW_INSTANTS

INSTANTS = ("before_provider", "after_provider", "after_ledger", *WORKFLOW_INSTANTS)


class CrashPoints:
    def __init__(self, spec: str | None, data_dir: Path) -> None:
        self.instant, _, self.tool = (spec or "").partition(":")
        if self.instant and self.instant not in INSTANTS:
            raise ValueError(f"AGENT_CRASH_AT: unknown instant {self.instant!r}; use {INSTANTS}")
        self.marks = data_dir / "crash-marks"

    def workflow_hook(self) -> Callable[[str, str], None] | None:
        """The hook workflow code calls at its instants, when one of them is named."""
        if self.instant not in WORKFLOW_INSTANTS:
            return None
        return lambda instant, key: self.reached(instant, "", key)

    def reached(self, instant: str, tool: str, key: str) -> None:
        if instant != self.instant or (self.tool and tool != self.tool):
            return
        mark = self.marks / hashlib.sha256(f"{instant}:{key}".encode()).hexdigest()
        if mark.exists():
            return  # crash once per key: the retry after the restart must get through
        self.marks.mkdir(parents=True, exist_ok=True)
        with mark.open("w") as handle:
            handle.write(f"{instant} {tool} {key}\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.kill(os.getpid(), signal.SIGKILL)
