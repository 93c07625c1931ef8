"""The run page's panel shows a run's typed answer (Agent(output_type=...)) beside its
text, escaped like every other value."""

from __future__ import annotations

from datetime import UTC, datetime

from durable_agents.console.web import templates
from durable_agents.workflows.agent_records import AgentRecord, OutputRecord
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.state import RunState
from tests.conftest import arrange


def panel(state: RunState) -> str:
    return templates.get_template("panel.html").render(state=state, me="finance", csrf="t")


def test_the_typed_answer_is_shown_with_its_type():
    state = RunState.start("r1", RunRequest(goal="Decide", agent="triage"), datetime.now(UTC))
    arrange(
        state,
        agent=AgentRecord(
            name="triage",
            instructions_digest="d",
            tools=[],
            output=OutputRecord(name="TriageDecision", schema_digest="s", attempts=3),
        ),
    )
    state.lifecycle.complete('{"refund": true}', datetime.now(UTC))
    arrange(state, output={"refund": True, "reason": "<b>charged twice</b>"})
    shown = panel(state)
    assert "Typed answer (TriageDecision)" in shown and 'id="typed-answer"' in shown
    assert "\\u003cb\\u003echarged twice" in shown and "<b>charged" not in shown
    arrange(state, output=None)
    assert "typed-answer" not in panel(state)
