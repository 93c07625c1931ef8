"""Two rebuilds of one run at once (two forks of one parent, a client and a worker in one
process) each keep their moments: one ending does not end the other's recording."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import WorkflowHistory

from durable_agents.control.timeline import replayer
from durable_agents.workflows import timeline

HAPPY_PATH = Path(__file__).parent.parent / "histories" / "happy-path.json"


async def test_a_recording_goes_on_when_another_of_the_same_run_ends() -> None:
    history = WorkflowHistory.from_json("happy-path", json.loads(HAPPY_PATH.read_text()))
    with timeline.recording("happy-path") as first:
        with timeline.recording("happy-path", states={2}) as second:
            pass  # the other rebuild ended before this one replayed anything
        assert await replayer().replay_workflow(history)
    assert second == {}
    assert len(first) > 3 and all(m.state_json for m in first.values())
    with timeline.recording("happy-path") as alone, timeline.recording("happy-path") as twin:
        await replayer().replay_workflow(history)
    assert alone.keys() == twin.keys() == first.keys()
