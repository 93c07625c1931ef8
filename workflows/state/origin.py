"""Origin: who the run is and where it comes from (its ids, its chain, the run it was
forked from or delegated by, a what-if's recording, when it began)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from durable_agents.workflows.contracts import DelegatedBy
from durable_agents.workflows.records import ForkOrigin
from durable_agents.workflows.state.record import Read, Record
from durable_agents.workflows.whatif import RecordedAnswer, RecordedDecision, ShadowSpec


class Origin(Record):
    OWNS = frozenset(
        {"run_id", "identity", "parent", "chain", "delegated_by", "shadow", "created_at"}
    )
    run_id = Read[str]()
    identity = Read[str | None]()
    parent = Read[ForkOrigin | None]()
    chain = Read[int]()
    delegated_by = Read[DelegatedBy | None]()
    shadow = Read[ShadowSpec | None]()

    @property
    def store_key(self) -> str:
        """The key of this run's rows in our stores, and the root of its idempotency keys."""
        return self._s.identity or self._s.run_id

    def continued(self) -> None:
        """A continue-as-new carried the state: one more run in the chain."""
        self._set(chain=self._s.chain + 1)

    def take_identity(self, identity: str) -> None:
        self._set(identity=identity)

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
        assert self._s.shadow is not None, "recorded decisions are a what-if run's"
        return self._s.shadow

    def forked(self, run_id: str, parent_run_id: str, moment: int, now: datetime) -> None:
        """A fork is a run of its own: its id (its identity is set when it starts), its
        parent, no run above it awaiting its spend."""
        self._set(
            run_id=run_id,
            identity=None,
            parent=ForkOrigin(run_id=parent_run_id, moment=moment),
            delegated_by=None,
            created_at=now,
        )
