"""Every field of the run's state (`RunState`), in the order recorded histories hold them:
the one flat JSON that queries answer, continue-as-new carries and forks copy. A new field
goes last, with a default, and into its record's OWNS (tests/workflows/test_state_records.py).
The records are typed by these fields alone: they never import the state composing them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import AliasChoices, BaseModel, Field

from durable_agents.workflows.activity_io import ChatMessage
from durable_agents.workflows.agent_records import AgentRecord
from durable_agents.workflows.contracts import (
    DelegatedBy,
    EffectsReport,
    RunBudget,
    RunLimits,
    RunPolicy,
    Spend,
)
from durable_agents.workflows.conversation_records import ConversationFields
from durable_agents.workflows.people_inputs import SignedDecision
from durable_agents.workflows.records import (
    ApprovalRequest,
    AuditEntry,
    Delegation,
    ForkOrigin,
    PlanStep,
    Question,
    RunEvent,
    RunStatus,
    SignedUse,
    ToolResultRecord,
    Usage,
)
from durable_agents.workflows.whatif import ShadowSpec


class StateFields(BaseModel):
    run_id: str  # the workflow id: what people name the run by
    # The run's identity across its chain, under which its transcript, model memo and ledger
    # rows are stored. None in runs from before it: their data stays under the workflow id.
    identity: str | None = None
    goal: str
    # The run's free label (contracts.RunRequest.label); `scenario` in earlier versions.
    label: str | None = Field(default=None, validation_alias=AliasChoices("label", "scenario"))
    # The agent resolved when the run started (None in runs from before agents existed).
    agent: AgentRecord | None = None
    policy: RunPolicy = Field(default_factory=RunPolicy)
    limits: RunLimits = Field(default_factory=RunLimits)
    status: RunStatus = RunStatus.PLANNING
    plan: list[PlanStep] = Field(default_factory=list)
    current_step: int | None = None
    context: list[str] = Field(default_factory=list)
    results: list[ToolResultRecord] = Field(default_factory=list)
    results_total: int = 0
    approvals: list[ApprovalRequest] = Field(default_factory=list)
    questions: list[Question] = Field(default_factory=list)
    pause_requested: bool = False
    cancel_requested_by: str | None = None
    audit: list[AuditEntry] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    errors: list[str] = Field(default_factory=list)
    final_answer: str | None = None
    # The final answer as the agent's declared type's JSON (None: free text, or not yet).
    output: dict[str, Any] | None = None
    # The side effects this run performed, as the effect ledger recorded them.
    effects: EffectsReport = Field(default_factory=EffectsReport)
    next_seq: int = 0
    outbox: list[ChatMessage] = Field(default_factory=list)
    # How many transcript rows the run wrote to its store: each call that acts on the run's
    # past carries it, and a worker whose store holds fewer refuses the call
    # (activities/store_holds.py). None: a run from before the count, or a fork before its copy.
    transcript_rows: int | None = None
    # The task queue of the worker whose store holds the run (activities/store_queue.py),
    # learned from the first store-bound activity: the later ones go there. None: the main
    # queue. A fork keeps its parent's: the copy of the parent's past is made in that store.
    store_queue: str | None = None
    # Things people did (edits) that the model must hear about on its next turn.
    notes_for_model: list[str] = Field(default_factory=list)
    # Numbered points of the run's timeline (workflows/timeline.py); the last one reached.
    moment: int = 0
    # The latest moments, for the event protocol (at most EVENTS_KEPT).
    events: list[RunEvent] = Field(default_factory=list)
    # Where the current phase (plan, a step, the final answer) began in the transcript.
    phase_start_seq: int = 0
    parent: ForkOrigin | None = None
    chain: int = 1  # runs in the continue-as-new chain so far, this one included
    # What the run (with its sub-agents) may spend; None: no limit.
    budget: RunBudget | None = None
    tool_calls: int = 0  # tool calls this run made (its delegations included)
    # What the latest model call cost (shown to the person raising a budget).
    last_call: Spend | None = None
    delegations: list[Delegation] = Field(default_factory=list)
    delegated_by: DelegatedBy | None = None
    # The signature version this run takes (workflows/signing.py; 1 in runs from before the
    # `every-change-signed` patch), and the nonces it counted within signing.FRESH_FOR.
    signature_version: int = 1
    signed_nonces: list[SignedUse] = Field(default_factory=list)
    # Which rules people's inputs are checked by (patches.PEOPLE_CHECKED): 2, this release's;
    # 1, a run recorded before them (replayed as it ran).
    people_checks: int = 1
    # Trusted keys revoked since (or before) the run began: their signatures count no more.
    revoked_keys: list[str] = Field(default_factory=list)
    # A conversation's queue and the thread's tail; None for a run of one goal.
    conversation: ConversationFields | None = None
    # What the run is about, who said it may be (workflows/subject_grants.py; handed on to
    # its sub-agents, which check it for their own memory), and the memory namespace its
    # memory tools use, resolved when it started (None: no memory).
    subject: dict[str, str] | None = None
    subject_grant: SignedDecision | None = None
    memory_namespace: str | None = None
    # A what-if shadow's recording and what it took of it (workflows/whatif.py).
    shadow: ShadowSpec | None = None
    created_at: datetime
    updated_at: datetime
