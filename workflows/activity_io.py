"""What crosses the activity boundary: the inputs and results of the model call, a tool
call, an evaluator, a transcript copy, pruning, and a fork's question to its parent.

They carry references (run id, sequence number) and short previews, never the
conversation: the conversation lives in the transcript store. That is what keeps history
per step constant (docs/architecture.md, invariant 3).
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from durable_agents.workflows.contract_base import (
    CUT_SHORT_REASONS,
    PREVIEW_CHARS,
    CompactModel,
    StepPayload,
    StrictModel,
)
from durable_agents.workflows.contracts import RunPolicy

# The type of the retryable error an activity raises on a worker whose store does not
# hold the run's records (activities/store_holds.py); the workflow waits it out
# (workflows/phases/activity_call.py).
STORE_MISSING = "StoreMissingRecords"
# The field of a store-bound activity's result that names the task queue of the worker
# whose store holds the run (activities/store_queue.py): the run sends its later
# store-bound activities there (workflows/phases/activity_call.py).
STORE_QUEUE_FIELD = "store_queue"


class OtherRun(CompactModel):
    """Another run as Temporal's own record has it (the `run_origin` activity)."""

    found: bool
    workflow_type: str = ""
    task_queue: str = ""
    # On the queue of the run that asks (decided by the activity: a replay's own task
    # queue is not the run's, so workflow code never compares queues itself).
    on_this_queue: bool = False


class RunOrigin(CompactModel):
    """How this run came about, from Temporal's record of it, never from its input: what
    started it (its start event's initiator), the chain's previous run and whether that
    run's own continue-as-new named this run with this very input, and its parent."""

    # "start", "continue_as_new", "cron", "retry", "unknown": the start event's initiator.
    initiator: str
    previous: OtherRun | None = None
    # The previous run closed by continuing as new into this run, carrying this input.
    continued_into_this: bool = False
    parent: OtherRun | None = None


class ParentFacts(CompactModel):
    """What Temporal says of a fork's parent (the `fork_origin` activity asks the parent
    itself): the identity its data is under, its policy, and its memory's namespace and
    subject. A fork's carried state must say the same, or the fork is refused; the memory
    ones are taken from here, whatever the fork request says."""

    store_key: str
    policy: RunPolicy
    memory_namespace: str | None = None
    subject: dict[str, str] | None = None


class ParentMoment(StrictModel):
    """Which moment of which run a fork starts from (the `parent_state_at` activity
    rebuilds the parent's state there from its own history: never the caller's)."""

    parent_run_id: str = Field(min_length=1, max_length=200)
    moment: int = Field(ge=0)


class ScheduledRun(StrictModel):
    """A run that says a Schedule started it (the `scheduled_run` activity asks the
    Schedule itself: the search attribute that says so can be set by any starter)."""

    schedule_id: str = Field(min_length=1, max_length=300)
    workflow_id: str = Field(min_length=1, max_length=300)
    first_run_id: str = Field(min_length=1, max_length=100)


class SignatureClaim(StrictModel):
    """A signature's nonce, taken for the run it starts (the `claim_signature` activity)."""

    nonce: str = Field(min_length=1, max_length=200)
    run_id: str = Field(min_length=1, max_length=300)  # the run's identity
    what: str = Field(max_length=100)  # what the signature is, said in a refusal


class ChatMessage(StepPayload):
    """A small message the workflow itself writes into the transcript."""

    seq: int = Field(ge=0)
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_call_id: str | None = None
    # Who wrote a person's message in a conversation (kept in the transcript, the thread's
    # record; not sent to the model). Left out otherwise.
    speaker: str | None = None


# A step's input names the run whose stored rows it acts on: whole where that is not the
# calling run's own identity, and on the first model call of each Temporal run (where a
# what-if reads it back from a history file of any name); else by its tag (`run_tag`, 13
# characters where the identity takes 60), which the worker's caller check compares with
# the caller's identity from Temporal's own record and then fills in (worker/callers.py).
# A sealed input copied into another run's task so names a run that is not the caller.
# OWN_RUN (no name at all) is what runs recorded before the tags sent.
OWN_RUN = ""
RUN_TAG = "#"


def run_tag(identity: str) -> str:
    """A run's identity, short: 48 bits of its digest. A copied input matches another run
    only if that run's identity (its first run id is Temporal's to choose) hits the tag."""
    return RUN_TAG + hashlib.sha256(identity.encode()).hexdigest()[:12]


class ModelCallInput(StepPayload):
    run_id: str = OWN_RUN
    # Messages the workflow appends first (instructions, errors, in-workflow tool
    # results); the reply is stored at reply_seq.
    append: list[ChatMessage] = Field(default_factory=list)
    reply_seq: int = Field(ge=0)
    tools: list[str] = Field(default_factory=list)
    force_tool: str | None = None
    agent: str | None = None
    run_label: str | None = Field(
        default=None, validation_alias=AliasChoices("run_label", "scenario")
    )
    label: str = "model"
    preview_chars: int = Field(default=PREVIEW_CHARS, ge=1, le=8000)
    # When the reply calls no tool (a plain loop's answer), its preview may be this long.
    answer_chars: int | None = Field(default=None, ge=1, le=8000)
    # A reply a person waits on (a conversation's turn): streamed to the live log when
    # the model client can (activities/stream.py). Left out (None) otherwise.
    stream: bool | None = None
    # With a "step" context: the model sees the goal (seq 0) and messages from here on.
    context_from_seq: int | None = None
    # What is left of the run's budget: a call whose input alone would pass it is not made
    # (the turn comes back `over_budget`); otherwise its reply is capped to what is left.
    budget_usd: float | None = None
    budget_tokens: int | None = None
    # A what-if shadow's call: the recorded run whose memo may answer it unchanged.
    shadow_of: str | None = Field(default=None, max_length=300)
    # How many transcript rows the run wrote before this call: a worker whose store holds
    # fewer refuses it (activities/store_holds.py). None: a run that kept no count.
    rows_written: int | None = Field(default=None, ge=0)


class ToolCall(StepPayload):
    id: str
    name: str
    arguments: str  # raw JSON text as the model wrote it; the workflow validates it
    oversized: int | None = None  # set (to their length) when arguments were too large to carry


class TokenUsage(StrictModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class ModelTurn(StepPayload):
    seq: int
    content_preview: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    # Written only when the reply was cut short (CUT_SHORT_REASONS), the one case the
    # workflow reads it; the activity's span and metrics see every reason.
    finish_reason: str | None = None
    # The model that answered: for the activity's span and metrics, never written into
    # the history (no workflow reads it).
    model: str = Field(default="", exclude=True)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    memoized: bool = False
    # Set when the call was not made: it would have passed the budget (why, with figures).
    over_budget: str | None = None
    # The queue of the worker whose store holds the run (STORE_QUEUE_FIELD), stamped by a
    # worker with a store of its own on a call that reached it through the main queue.
    store_queue: str | None = None

    def _left_out(self, name: str, value: Any) -> bool:
        if name == "finish_reason" and value not in CUT_SHORT_REASONS:
            return True
        return super()._left_out(name, value)


def idempotency_key(run_id: str, step: int, tool_call_id: str) -> str:
    """Stable across retries, crashes and replays: made only of durable identifiers."""
    return f"{run_id}/step-{step}/{tool_call_id}"


class ToolCallInput(StepPayload):
    run_id: str = OWN_RUN  # as a model call's (OWN_RUN)
    step: int
    tool_call_id: str
    name: str
    arguments: dict[str, Any]
    result_seq: int
    # A side effect's key: sent whole by earlier versions; now `side_effect` says the
    # activity derives it (the same formula), which keeps the key out of every step's
    # history a second time.
    idempotency_key: str | None = None
    side_effect: bool | None = None
    # A memory tool (workflows/memory.py): the run's namespace, never the model's choice.
    namespace: str | None = None
    # An MCP tool or a memory tool: the run's agent; an MCP tool: the server and the
    # tool's name there.
    agent: str | None = None
    mcp: str | None = None
    mcp_name: str | None = None
    # A what-if shadow's call (workflows/whatif.py): never made; answered from the record
    # of `shadow_of` or simulated. A production worker refuses it.
    shadow: bool | None = None
    shadow_of: str | None = Field(default=None, max_length=300)
    # As a model call's: the transcript rows the run wrote before this call. A worker whose
    # store holds fewer runs no tool (its ledger would not know the run's effects either).
    rows_written: int | None = Field(default=None, ge=0)

    @property
    def key(self) -> str | None:
        if self.idempotency_key is not None:
            return self.idempotency_key
        if self.side_effect:
            return idempotency_key(self.run_id, self.step, self.tool_call_id)
        return None


class TranscriptCopy(StrictModel):
    """A fork starts with its parent's conversation up to where it restarts."""

    from_run_id: str
    to_run_id: str
    before_seq: int = Field(ge=0)
    # A signed fork's nonce, taken for this fork in the stores before anything is copied.
    signed_nonce: str | None = Field(default=None, max_length=200)
    # How many transcript rows the parent had written by the fork's moment: a worker whose
    # store holds fewer of the parent's copies nothing (activities/store_holds.py).
    rows_written: int | None = Field(default=None, ge=0)


class ToolOutcome(StepPayload):
    ok: bool
    summary: str
    result_seq: int
    replayed_from_ledger: bool = False
    # As a model turn's.
    store_queue: str | None = None


class CallVerdict(StrictModel):
    """An approval rule's verdict on one tool call, as the workflow records it."""

    rule: str
    decision: Literal["approve", "deny", "ask"]
    reason: str = Field(max_length=2000)


class EvaluationInput(StrictModel):
    """The `evaluate_call` activity's input: which agent's rule, on which call."""

    agent: str
    rule: str
    call: dict[str, Any]


class PruneRequest(StrictModel):
    """Remove our stored data (transcripts, model memo, ledger rows) of runs closed longer
    ago than `older_than_seconds`. Open runs are never touched."""

    older_than_seconds: float = Field(ge=0)
    dry_run: bool = False


class PruneReport(StrictModel):
    pruned: list[str] = Field(default_factory=list)
    kept_open: int = 0
    kept_recent: int = 0
    rows_deleted: int = 0
    dry_run: bool = False
    # Agents' memories older than AGENT_MEMORY_RETENTION_DAYS, removed (or found, dry).
    memories_deleted: int = 0
    # What-if reports older than the age, removed (or found, dry).
    whatif_reports_deleted: int = 0
    # Why nothing was deleted: an age below the worker's own retention (AGENT_RETENTION_DAYS).
    refused: str | None = None

    @model_serializer(mode="wrap")
    def _memories_only_when_some(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Without memories or reports deleted, the report a prune of an earlier build
        reads."""
        data = handler(self)
        if isinstance(data, dict):
            for name in ("memories_deleted", "whatif_reports_deleted", "refused"):
                if not data.get(name):
                    data.pop(name, None)
        return data
