"""A shadow run: a recorded run played again by a changed agent, with the world held still
(docs/architecture.md, "What if").

The workflow is the same; what differs is written here. A shadow run carries a
`ShadowSpec` from its start: which recorded run it shadows, how that run's people decided
each approval and answered each question, and the sub-agents it delegated to (each with a
spec of its own, so a delegation re-runs the child as a shadow too). The workflow decides
approvals from it, never waiting for anyone; the what-if worker answers the tools from the
recording (activities/shadow.py). A shadow runs only on a what-if task queue, and a
what-if queue runs only shadows: a spec sent to a production worker is refused before
anything happens, as is a plain run sent to a what-if worker.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field

from durable_agents.workflows.contract_base import StrictModel

# Every what-if worker polls a task queue named so; no production worker ever does.
WHATIF_QUEUE_PREFIX = "whatif-"

# What a shadow does with an approval or a question its recorded run never had.
Unmatched = Literal["approve", "reject", "stop"]


class RecordedDecision(StrictModel):
    """How a person decided one approval of the recorded run."""

    tool: str = Field(min_length=1, max_length=100)
    arguments: dict[str, Any]
    approved: bool
    by: str = Field(default="?", max_length=100)
    comment: str = Field(default="", max_length=2000)


class RecordedAnswer(StrictModel):
    """A question the recorded run asked a person, and the answer it got (None: none)."""

    question: str = Field(max_length=4000)
    answer: str | None = Field(default=None, max_length=4000)
    by: str | None = Field(default=None, max_length=100)


class RecordedDelegation(StrictModel):
    """A task the recorded run handed to a sub-agent, and that child's own recording."""

    tool: str = Field(min_length=1, max_length=100)
    task: str = Field(max_length=4000)
    child: ShadowSpec


class ShadowSpec(StrictModel):
    """What a shadow run knows of the run it shadows (None of it reaches that run)."""

    # The recorded run's workflow id and its store key (whose memo answers unchanged turns).
    of: str | None = Field(default=None, max_length=200)
    store_of: str | None = Field(default=None, max_length=300)
    decisions: list[RecordedDecision] = Field(default_factory=list, max_length=1000)
    answers: list[RecordedAnswer] = Field(default_factory=list, max_length=1000)
    delegations: list[RecordedDelegation] = Field(default_factory=list, max_length=200)
    # An approval or question the recording does not hold: approved, rejected, or the
    # shadow stops there (reported as stopped).
    unmatched: Unmatched = "approve"
    # Which recorded entries were taken already: the n-th matching call takes the n-th.
    used_decisions: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    used_answers: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    used_delegations: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)

    def take_decision(self, tool: str, arguments: dict[str, Any]) -> RecordedDecision | None:
        """The first decision not yet taken on this very call (tool and arguments)."""
        wanted = same_call_key(tool, arguments)
        for index, found in enumerate(self.decisions):
            if index in self.used_decisions:
                continue
            if same_call_key(found.tool, found.arguments) == wanted:
                self.used_decisions.append(index)
                return found
        return None

    def take_answer(self, question: str) -> RecordedAnswer | None:
        for index, found in enumerate(self.answers):
            if index not in self.used_answers and found.question == question:
                self.used_answers.append(index)
                return found
        return None

    def take_delegation(self, tool: str, task: str) -> ShadowSpec:
        """The recorded child for this task (the first not yet taken), or a spec with no
        recording: a child the recorded run never started is simulated throughout."""
        for index, found in enumerate(self.delegations):
            if index in self.used_delegations or found.tool != tool or found.task != task:
                continue
            self.used_delegations.append(index)
            return found.child.model_copy(update={"unmatched": self.unmatched})
        return ShadowSpec(unmatched=self.unmatched)


RecordedDelegation.model_rebuild()


def same_call_key(tool: str, arguments: dict[str, Any]) -> str:
    """One call, as matching sees it: the tool and its validated arguments, key order
    aside (the arguments are the JSON the workflow sends the tool, not the model's text)."""
    return json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"), default=str)


def whatif_queue(task_queue: str) -> bool:
    return task_queue.startswith(WHATIF_QUEUE_PREFIX)


# Who the state names for a decision the shadow took from its recording or its policy.
def recorded_actor(by: str) -> str:
    return f"what-if (as {by})"[:100]


POLICY_ACTOR = "what-if policy"
# Who stops a what-if at its budget (a what-if raises none).
WHATIF_ACTOR = "what-if"


# How a what-if makes the calls a run makes: asked by the phases for every run (None: a
# run that is no what-if), so they carry no what-if branches of their own.


def model_call_inputs(shadow: ShadowSpec | None, stream: bool | None) -> dict[str, Any]:
    """A what-if's model replies come from its recorded run's memo (or are simulated),
    read from its report, never streamed."""
    if shadow is None:
        return {"stream": stream}
    return {"stream": None, "shadow_of": shadow.store_of}


def tool_call_inputs(shadow: ShadowSpec | None) -> dict[str, Any]:
    """A what-if's tool call is never made: answered from the record, or simulated."""
    if shadow is None:
        return {}
    return {"shadow": True, "shadow_of": shadow.store_of}
