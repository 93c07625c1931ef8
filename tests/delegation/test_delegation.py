"""Sub-agents as child workflows, on the time-skipping server with a scripted model."""

from __future__ import annotations

from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from tests.delegation.agents import triage


def model_for_triage() -> ScriptedModel:
    return ScriptedModel(
        [call("ask_research", task="What is the answer?"), say("Triaged: the answer is 42.")],
        agents={"research": [call("look_up", topic="answer"), say("The answer is 42.")]},
    )


async def test_a_delegate_runs_as_a_child_and_its_answer_goes_to_the_model(time_env):
    model = model_for_triage()
    async with AgentTestbed(triage, model=model, env=time_env) as bed:
        run = await bed.start("triage", "Ticket 7: what is the answer?")
        result = await run.result()
        state = await run.state()
        [delegation] = state.delegations
        child = bed.client.run(delegation.child_id)
        child_state = await child.state()
    assert result.status == "completed", result
    assert delegation.status == "completed" and delegation.answer == "The answer is 42."
    assert delegation.child_id.startswith(f"{run.run_id}.1.call_0_0.")
    assert child_state.delegated_by is not None
    assert child_state.delegated_by.run_id == run.run_id
    assert child_state.goal == "What is the answer?"
    # the model of the parent read the child's answer as the tool's result
    assert model.requests[-1].messages[-1]["content"] == "The answer is 42."
