"""The modules a worker and a replay share with the sandbox are named as strings (runtime/
may not import workflows/): each name is the module it means."""

from durable_agents.runtime import sandbox
from durable_agents.workflows import faults, timeline
from durable_agents.workflows.agent import AgentWorkflow


def test_the_shared_names_are_the_modules_they_mean():
    assert AgentWorkflow.__module__ == sandbox.AGENT_WORKFLOW
    assert timeline.__name__ == sandbox.TIMELINE
    assert faults.__name__ == sandbox.FAULT_HOOKS
    assert sandbox.TIMELINE in sandbox.shared_modules(timeline=True)
    assert sandbox.AGENT_WORKFLOW not in sandbox.shared_modules(timeline=True)
