"""Every recorded history in tests/histories replays against the current workflow code.
A change to the workflow that is not safe for runs in flight fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from starters.timeline import replay_files, replayer
from workflows import timeline

HISTORIES = Path(__file__).parent.parent / "histories"
MANIFEST = json.loads((HISTORIES / "manifest.json").read_text())


def test_every_behaviour_has_a_fixture():
    behaviours = {"happy-path", "rejected-approval", "question-answered", "edited"}
    behaviours |= {"paused-and-resumed", "retried-model-errors", "cancelled", "failed", "forked"}
    behaviours |= {"continued-as-new"}
    assert set(MANIFEST) == behaviours
    assert {p.stem for p in HISTORIES.glob("*.json")} - {"manifest"} == behaviours


@pytest.mark.parametrize("name", sorted(MANIFEST))
async def test_recorded_history_replays(name):
    path = HISTORIES / f"{name}.json"
    [outcome] = await replay_files([path])
    assert outcome.ok, outcome.message
    history = WorkflowHistory.from_json(name, json.loads(path.read_text()))
    with timeline.recording(name) as moments:
        await replayer().replay_workflow(history)
    last = moments[max(moments)]
    assert last.state.status.value == MANIFEST[name]
