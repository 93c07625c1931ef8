"""Both sides of every patch are replayed by a fixture: a run recorded with the patch's
marker (the new path) and one recorded without it that reaches the same question (the old
path, as a build from before the patch made it). Code that moves is then checked by replay
on both paths, not only on the one today's runs take."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from temporalio import workflow

from durable_agents.control.agents import local_agents
from durable_agents.control.timeline import (
    agent_history,
    replayer,
    replaying_with,
    under_its_own_id,
)
from durable_agents.workflows import patches
from tests.histories.rule_agent import FIXTURE_AGENT_MODULES

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

    agents = local_agents(FIXTURE_AGENT_MODULES)
    workflow.patched = spy  # type: ignore[assignment]  # replayed unsandboxed: seen here
    try:
        for path in sorted(HISTORIES.glob("*.json")):
            if path.stem == "manifest":
                continue
            history = await under_its_own_id(agent_history(path))
            with replaying_with(agents):
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
