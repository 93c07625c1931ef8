"""Both sides of every patch are replayed by a fixture: a run recorded with the patch's
marker (the new path) and one recorded without it that reaches the same question (the old
path, as a build from before the patch made it). Code that moves is then checked by replay
on both paths, not only on the one today's runs take."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory

from durable_agents.control.timeline import replayer
from durable_agents.workflows import patches

HISTORIES = Path(__file__).parent.parent / "histories"


@pytest.fixture(scope="module")
async def answers() -> dict[str, set[bool]]:
    """What each patch question was answered, over every fixture's replay."""
    seen: dict[str, set[bool]] = defaultdict(set)
    asked = workflow.patched

    def spy(patch_id: str) -> bool:
        answer = asked(patch_id)
        seen[patch_id].add(answer)
        return answer

    workflow.patched = spy  # type: ignore[assignment]  # replayed unsandboxed: seen here
    try:
        for path in sorted(HISTORIES.glob("*.json")):
            if path.stem == "manifest":
                continue
            history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
            await replayer(sandboxed=False).replay_workflow(history)
    finally:
        workflow.patched = asked
    return seen


@pytest.mark.parametrize("patch_id", patches.ALL)
def test_a_fixture_replays_each_side_of_the_patch(answers, patch_id):
    assert answers[patch_id] == {True, False}, f"sides replayed: {answers[patch_id]}"


def test_every_patch_the_workflow_asks_is_listed():
    """A patch id written inline in workflow code, outside patches.py, has no fixtures."""
    workflow_code = Path(__file__).parent.parent.parent / "workflows"
    for path in workflow_code.rglob("*.py"):
        if path.name != "patches.py":
            assert 'workflow.patched("' not in path.read_text(), path
