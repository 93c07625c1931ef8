"""What a run records of its agent when it starts: the tools it may call (name, risk,
argument-schema digest, MCP server), the instructions' digest, its rules' names and
defaults. A replay on changed code reads it back from the history. (Data models: the
Terms record of the state, workflows/state/terms.py, holds the agent recorded.)"""

from __future__ import annotations

from pydantic import Field

from durable_agents.workflows.contract_base import CompactModel
from durable_agents.workflows.contracts import RunBudget, RunLimits, RunPolicy, SubjectKey
from durable_agents.workflows.tools import (
    Tool,
    ToolRisk,
)


class ToolRecord(CompactModel):
    name: str
    risk: ToolRisk
    amount_field: str | None = None
    schema_digest: str
    # A delegate: the agent it hands tasks to.
    delegate: str | None = None
    # An MCP tool: its server, and its name there (the model may see it prefixed).
    mcp: str | None = None
    mcp_name: str | None = None

    @classmethod
    def of(cls, spec: Tool) -> ToolRecord:
        return cls(
            name=spec.name,
            risk=spec.risk,
            amount_field=spec.amount_field,
            schema_digest=spec.schema_digest,
            delegate=spec.delegate_to,
        )


class MCPToolSpec(CompactModel):
    """One tool an MCP server listed when a run started, as the run recorded it."""

    name: str  # as the model sees it (prefixed)
    mcp_name: str  # as the server names it
    risk: ToolRisk
    schema_digest: str


class MCPListing(CompactModel):
    """The `list_mcp_tools` activity's answer, recorded in the history: what the server
    offered then, whatever it offers later."""

    server: str
    tools: list[MCPToolSpec] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)  # names we cannot offer, and why
    # The queue of the worker whose store holds the run, where stores are per replica
    # (workflows/phases/activity_call.py): an MCP agent's first store-bound call.
    store_queue: str | None = None


class MCPListRequest(CompactModel):
    run_id: str  # the run's store key: the full schemas are kept under it
    agent: str
    server: str


class MemoryDeclaration(CompactModel):
    """An agent's memory as a run recorded it (workflows/memory.py: Memory): a change of
    the declaration in code reaches new runs, never runs already going."""

    namespace: str
    optional: bool = False
    shared_with_sub_agents: bool = False


class OutputRecord(CompactModel):
    """An agent's declared answer type as a run recorded it: the final answer must
    validate against it, and the model is asked again at most `attempts` times."""

    name: str  # the pydantic model's name, for people
    schema_digest: str  # of its JSON schema: a worker with another schema waits
    attempts: int


class AgentRecord(CompactModel):
    """The agent a run resolved when it started: changing the agent's code later does not
    change what this run may call."""

    name: str
    planning: bool = True
    instructions_digest: str
    tools: list[ToolRecord]
    rules: list[str] = Field(default_factory=list)
    memory: MemoryDeclaration | None = None
    # The answer's declared type (None: free text).
    output: OutputRecord | None = None

    def tool(self, name: str) -> ToolRecord | None:
        return next((t for t in self.tools if t.name == name), None)


class AdoptedAgent(CompactModel):
    """What a run takes from its agent's code when it starts, recorded in its history
    (the `resolve_agent` local activity): a replay, on any version of the code, reads the
    same record back."""

    record: AgentRecord
    policy: RunPolicy | None = None
    limits: RunLimits | None = None
    budget: RunBudget | None = None
    # Who may decide on each tool's calls when the run's policy names nobody for it.
    tool_approvers: dict[str, list[str]] = Field(default_factory=dict)
    mcp_servers: list[str] = Field(default_factory=list)
    # Trusted keys this deployment revoked (AGENT_REVOKED_KEYS): they sign for no run.
    revoked_keys: list[str] = Field(default_factory=list)
    # Keys that grant subjects (AGENT_SUBJECT_KEYS); empty: a subject is taken as given.
    subject_keys: dict[str, SubjectKey] = Field(default_factory=dict)
