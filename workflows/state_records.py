"""Records of the run's state that its beginning settles and people's inputs touch: where
the run comes from (Origin), what it works under (Terms), which signatures count
(Signatures), its numbered moments (Moments), its audit log (AuditLog) and a
conversation's thread (Thread). Each writes only its own fields (state_write.write)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from durable_agents.workflows.agent_records import AgentRecord, ToolRecord
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import RunLimits, RunPolicy
from durable_agents.workflows.conversation_records import (
    ConversationFields,
    QueuedMessage,
    TurnRecord,
)
from durable_agents.workflows.people_inputs import Actor, KeyRevocation
from durable_agents.workflows.records import (
    EVENTS_KEPT,
    AuditEntry,
    ForkOrigin,
    RunEvent,
    SignedUse,
)
from durable_agents.workflows.state_shape import (
    AuditFields,
    MomentsFields,
    OriginFields,
    SignaturesFields,
    StateShape,
    TermsFields,
    ThreadFields,
    fields_of,
)
from durable_agents.workflows.state_write import write
from durable_agents.workflows.whatif import RecordedAnswer, RecordedDecision, ShadowSpec


class Origin:
    """Who the run is and where it comes from: its ids, its chain, the run it was forked
    from or delegated by, a what-if shadow's recording, when it began."""

    OWNS: ClassVar[frozenset[str]] = fields_of(OriginFields)

    def __init__(self, state: StateShape) -> None:
        self._s = state

    def continued(self) -> None:
        """A continue-as-new carried the state: one more run in the chain."""
        write(self._s, self, chain=self._s.chain + 1)

    # A what-if's recording, taken in order: each recorded decision, answer and delegation
    # is used once (the shadow keeps which, and a continue-as-new carries that).
    def take_recorded_decision(
        self, tool: str, arguments: dict[str, Any]
    ) -> RecordedDecision | None:
        return self._recording().take_decision(tool, arguments)

    def take_recorded_answer(self, question: str) -> RecordedAnswer | None:
        return self._recording().take_answer(question)

    def child_shadow(self, tool: str, task: str) -> ShadowSpec | None:
        """A what-if's sub-agent is a what-if of the recorded run's child for the same task
        (None: this run is no what-if)."""
        shadow = self._s.shadow
        return shadow.take_delegation(tool, task) if shadow is not None else None

    def _recording(self) -> ShadowSpec:
        shadow = self._s.shadow
        assert shadow is not None, "recorded decisions are a what-if run's"
        return shadow

    def take_identity(self, identity: str) -> None:
        write(self._s, self, identity=identity)

    def forked(self, run_id: str, parent_run_id: str, moment: int, now: datetime) -> None:
        """A fork is a run of its own: its id (its identity is set when it starts), its
        parent, no run above it awaiting its spend."""
        write(
            self._s,
            self,
            run_id=run_id,
            identity=None,
            parent=ForkOrigin(run_id=parent_run_id, moment=moment),
            delegated_by=None,
            created_at=now,
        )


class Terms:
    """What the run works on and under: its goal and label, its recorded agent, policy and
    limits, and what it is about (its subject, and the memory namespace resolved from it)."""

    OWNS: ClassVar[frozenset[str]] = fields_of(TermsFields)

    def __init__(self, state: StateShape) -> None:
        self._s = state

    def record_agent(self, agent: AgentRecord) -> None:
        write(self._s, self, agent=agent)

    def add_tool(self, tool: ToolRecord) -> None:
        """A tool the run's agent has besides its declared ones (an MCP server's)."""
        assert self._s.agent is not None, "a tool is added to a recorded agent"
        self._s.agent.tools.append(tool)

    def adopt(self, *, policy: RunPolicy | None = None, limits: RunLimits | None = None) -> None:
        """The policy or limits the run works under, as its beginning settled them."""
        if policy is not None:
            write(self._s, self, policy=policy)
        if limits is not None:
            write(self._s, self, limits=limits)

    def take_tool_approvers(self, approvers: dict[str, list[str]]) -> None:
        self._s.policy.take_tool_approvers(approvers)

    def take_memory(self, namespace: str | None) -> None:
        """The memory namespace the run's tools use (its subject's, or its parent's)."""
        write(self._s, self, memory_namespace=namespace)

    def take_parents(
        self, policy: RunPolicy, namespace: str | None, subject: dict[str, str] | None
    ) -> None:
        """A fork's policy and memory are its parent's as Temporal has them, never what its
        request carried: its subject too, none where the parent has none."""
        write(self._s, self, policy=policy, memory_namespace=namespace, subject=subject)

    def set_goal(self, goal: str) -> None:
        write(self._s, self, goal=goal)


class Signatures:
    """Which signatures the run takes and what it counted of them: the version, the nonces
    used, the rules people's inputs are checked by, the keys revoked."""

    OWNS: ClassVar[frozenset[str]] = fields_of(SignaturesFields)

    def __init__(self, state: StateShape) -> None:
        self._s = state

    def settle_version(self, version: int) -> None:
        write(self._s, self, signature_version=version)

    def check_people(self, rules: int) -> None:
        write(self._s, self, people_checks=rules)

    def remember_nonces(self, nonces: list[SignedUse]) -> None:
        write(self._s, self, signed_nonces=nonces)

    def take_revoked(self, key_ids: list[str]) -> None:
        """Keys the deployment revoked when the run began (kept once each, in order)."""
        write(self._s, self, revoked_keys=[*dict.fromkeys([*self._s.revoked_keys, *key_ids])])

    def revoke(self, revoked: KeyRevocation, now: datetime) -> bool:
        """Keys whose signatures count no more here; False when all were revoked already."""
        # Only keys this run trusts: a flood of made-up ids cannot grow the state.
        trusted = self._s.policy.trusted_keys
        known = self._s.revoked_keys
        fresh = [k for k in revoked.key_ids if k in trusted and k not in known]
        if not fresh:
            return False
        write(self._s, self, revoked_keys=[*known, *fresh])
        detail = f"{', '.join(fresh)} {revoked.reason}".strip()
        AuditLog(self._s).log(now, revoked.by, "keys_revoked", detail)
        return True

    def forked(self) -> None:
        """Nonces were signed for the parent's identity, not the fork's."""
        write(self._s, self, signed_nonces=[])


class Moments:
    """The run's numbered points (workflows/timeline.py) and the latest ones kept for the
    event protocol (at most EVENTS_KEPT)."""

    OWNS: ClassVar[frozenset[str]] = fields_of(MomentsFields)

    def __init__(self, state: StateShape) -> None:
        self._s = state

    def reach(self, kind: str, detail: str, now: datetime, seq: int | None) -> None:
        """The next moment, kept for the event protocol."""
        moment = self._s.moment + 1
        event = RunEvent(
            offset=moment,
            at=now,
            kind=kind,
            detail=detail,
            status=self._s.status,
            step=self._s.current_step,
            seq=seq,
        )
        write(self._s, self, moment=moment, events=[*self._s.events[-(EVENTS_KEPT - 1) :], event])

    def rewind_error(self, moment: int) -> str | None:
        if moment > self._s.moment:
            return f"the run has no moment {moment} yet (it is at {self._s.moment})"
        return None

    def forked(self) -> None:
        """A fork's events are its own (its moments go on from the parent's number)."""
        write(self._s, self, events=[])


class AuditLog:
    """Every change and who made it (and when the state last changed)."""

    OWNS: ClassVar[frozenset[str]] = fields_of(AuditFields)

    def __init__(self, state: StateShape) -> None:
        self._s = state

    def log(self, now: datetime, actor: str, action: str, detail: str = "") -> None:
        self._s.audit.append(AuditEntry(at=now, actor=actor, action=action, detail=detail))
        self.touch(now)

    def touch(self, now: datetime) -> None:
        write(self._s, self, updated_at=now)

    def refused(self, by: str, error: str, now: datetime) -> None:
        """A change that did not count, and why (the audit keeps every attempt)."""
        self.log(now, "policy", "decision_refused", preview(f"{by}: {error}", 500))

    def trim(self, kept: int) -> None:
        write(self._s, self, audit=self._s.audit[-kept:])


class Thread:
    """A conversation's queue and the tail of its turns (None for a run of one goal)."""

    OWNS: ClassVar[frozenset[str]] = fields_of(ThreadFields)

    def __init__(self, state: StateShape) -> None:
        self._s = state

    @property
    def conversation_fields(self) -> ConversationFields:
        convo = self._s.conversation
        assert convo is not None, "only a conversation has a thread"
        return convo

    def take_message(self, message: QueuedMessage, remembered: int) -> bool:
        """Queue a message once per id (the latest `remembered` ids are known); False for
        an id seen before."""
        convo = self.conversation_fields
        if convo.knows(message.message_id):
            return False
        convo.seen_ids = [*convo.seen_ids, message.message_id][-remembered:]
        convo.queue.append(message)
        return True

    def finish_turn(self, record: TurnRecord, kept: int) -> None:
        """The message at the queue's head is answered (or failed): its turn is kept (the
        latest `kept` turns stay) and counted."""
        convo = self.conversation_fields
        convo.queue.pop(0)
        convo.turns = [*convo.turns, record][-kept:]
        convo.turns_total += 1
        convo.turns_this_run += 1

    def close(self, actor: Actor, now: datetime) -> None:
        """No more messages: the queued ones are answered, then the run completes."""
        convo = self.conversation_fields
        convo.closed, convo.closed_by = True, actor.by
        AuditLog(self._s).log(now, actor.by, "conversation_closed", actor.reason)

    def new_run(self) -> None:
        """The conversation continues as new: this run of the chain has answered none."""
        self.conversation_fields.turns_this_run = 0

    def call_key(self, call_id: str) -> str:
        """A tool call's part of its idempotency key: the model's call id, and in a
        conversation the message the turn answers too, so a turn number used again (after
        a rewind) with a model that numbers its calls never finds another turn's effect."""
        convo = self._s.conversation
        if convo is None or not convo.queue or self._s.current_step is None:
            return call_id
        return f"{convo.queue[0].message_id}/{call_id}"
