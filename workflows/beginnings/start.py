"""What every way of beginning is handed, and what several share: `Start`, the run's part
its beginning works on (wired in `AgentWorkflow._wire`, from the context and the records
a beginning sets), `ForkStart` (a fork's state, decided in __init__),
`Begun` (how Temporal's record says the run began), a refusal, an
asked record, and the opening every beginning but a continuation makes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows import patches, signed_changes
    from durable_agents.workflows.activity_io import RunOrigin
    from durable_agents.workflows.contracts import RunRequest, SubjectKey
    from durable_agents.workflows.state import RunState
    from durable_agents.workflows.state.audit_log import AuditLog
    from durable_agents.workflows.state.budget_book import BudgetBook
    from durable_agents.workflows.state.transcript import Transcript

from durable_agents.workflows.beginnings import Beginning, own_identity
from durable_agents.workflows.beginnings.shadow import misplaced
from durable_agents.workflows.phases.activity_call import call_activity
from durable_agents.workflows.phases.context import Phase, RunContext, failure_reason

Asked = TypeVar("Asked")


@dataclass(frozen=True)
class ForkStart:
    """A fork's start, decided before the run's context exists (fork.py, `fork_start`):
    the fork's own state (None where its starting state was refused, `error`), the state
    as its request carried it (checked against the parent's record) and its parent's
    store key."""

    state: RunState | None = None
    carried: RunState | None = None
    parent_store_key: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Begun:
    """How the run began: its request, its row of the admission, and Temporal's record of
    its beginning where the admission asked it (`RUN_ORIGIN`; None: not asked)."""

    request: RunRequest
    beginning: Beginning
    record: RunOrigin | None


class Start(Phase):
    """The run as its beginning sets it up: the signed-change check's records (origin,
    terms, signatures), the audit log, the budget book, the transcript; a fork's start,
    decided in __init__; whether an agent is recorded yet (asked of the state)."""

    def __init__(
        self,
        ctx: RunContext,
        fork: ForkStart | None,
        agent_recorded: Callable[[], bool],
        *,
        signing: signed_changes.Signing,
        audit_log: AuditLog,
        book: BudgetBook,
        transcript: Transcript,
    ) -> None:
        super().__init__(ctx)
        self.signing, self.origin, self.terms = signing, signing.origin, signing.terms
        self.signatures = signing.signatures
        self.audit_log, self.book, self.transcript = audit_log, book, transcript
        self.fork = fork
        self.agent_recorded = agent_recorded
        # Keys that grant subjects, as the agent record brought them (AGENT_SUBJECT_KEYS).
        self.subject_keys: dict[str, SubjectKey] = {}

    def held_to_its_queue(self) -> None:
        """A what-if shadow runs only on a what-if queue, and a what-if queue only shadows."""
        if (refused := misplaced(self.origin.shadow, workflow.info().task_queue)) is not None:
            refuse(refused)

    def opened(self) -> None:
        """The opening of a run that carries no state: held to its queue, then its identity
        taken (the chain's, invariant 9) and its signatures settled."""
        self.held_to_its_queue()
        if self.ctx.opening_patched(patches.RUN_IDENTITY):
            self.origin.take_identity(own_identity(workflow.info()))
        self.ctx.settle_signatures()


# The check a row of the admission gives its beginning (workflows/admission.py).
Check = Callable[[Start, Begun], Awaitable[None]]


def refuse(why: str) -> NoReturn:
    """The run refused at its start, in one line."""
    raise ApplicationError(why, type="StartRefused", non_retryable=True)


async def asked(name: str, arg: Any, result: type[Asked], summary: str) -> Asked:
    """What an activity of the admission shows; one that cannot show it refuses the run
    in its own words (never "checked back then")."""
    try:
        answer: Asked = await call_activity(name, arg, result=result, summary=summary)
    except ActivityError as err:
        why = failure_reason(err)
        if not why.startswith("refused:"):
            why = f"refused: {why}"
        raise ApplicationError(why, type="StartRefused", non_retryable=True) from None
    return answer
