"""Fault hooks in workflow code, for proving that a worker killed around a child
workflow's start leaves exactly one child (docs/architecture.md, "Delegation").

The worker installs a hook only when AGENT_CRASH_AT names one of WORKFLOW_INSTANTS; the
workflow calls `reached` at those instants, never while replaying, so the hook cannot
change what a replay does. Without a hook, `reached` does nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

# A parent is about to start its child; has seen it start; has its answer, unrecorded.
WORKFLOW_INSTANTS = ("before_child_start", "after_child_start", "after_child_answer")

_hook: list[Callable[[str, str], None]] = []


def install(hook: Callable[[str, str], None] | None) -> None:
    _hook[:] = [hook] if hook is not None else []


def reached(instant: str, key: str) -> None:
    if not _hook or workflow.unsafe.is_replaying():
        return
    with workflow.unsafe.sandbox_unrestricted():
        _hook[0](instant, key)
