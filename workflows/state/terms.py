"""Terms: what the run works on and under (its goal and label, its recorded agent, policy
and limits, its subject and the memory namespace resolved from it)."""

from __future__ import annotations

from durable_agents.workflows.agent_records import AgentRecord, ToolRecord
from durable_agents.workflows.contracts import RunLimits, RunPolicy
from durable_agents.workflows.people_inputs import SignedDecision
from durable_agents.workflows.state.record import Read, Record


class Terms(Record):
    OWNS = frozenset(
        {"goal", "label", "agent", "policy", "limits", "subject", "subject_grant"}
        | {"memory_namespace"}
    )
    goal = Read[str]()
    label = Read[str | None]()
    policy = Read[RunPolicy]()
    limits = Read[RunLimits]()
    subject = Read[dict[str, str] | None]()
    subject_grant = Read[SignedDecision | None]()
    memory_namespace = Read[str | None]()

    def record_agent(self, agent: AgentRecord) -> None:
        self._set(agent=agent)

    def add_tool(self, tool: ToolRecord) -> None:
        """A tool the run's agent has besides its declared ones (an MCP server's)."""
        assert self._s.agent is not None, "a tool is added to a recorded agent"
        self._s.agent.tools.append(tool)

    def adopt(self, *, policy: RunPolicy | None = None, limits: RunLimits | None = None) -> None:
        """The policy or limits the run works under, as its beginning settled them."""
        if policy is not None:
            self._set(policy=policy)
        if limits is not None:
            self._set(limits=limits)

    def take_tool_approvers(self, approvers: dict[str, list[str]]) -> None:
        self._s.policy.take_tool_approvers(approvers)

    def take_memory(self, namespace: str | None) -> None:
        """The memory namespace the run's tools use (its subject's, or its parent's)."""
        self._set(memory_namespace=namespace)

    def take_parents(
        self, policy: RunPolicy, namespace: str | None, subject: dict[str, str] | None
    ) -> None:
        """A fork's policy and memory are its parent's as Temporal has them, never what its
        request carried: its subject too, none where the parent has none."""
        self._set(policy=policy, memory_namespace=namespace, subject=subject)

    def set_goal(self, goal: str) -> None:
        self._set(goal=goal)
