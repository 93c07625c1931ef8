"""Payloads a worker refuses to read: undecryptable, or not sealed when sealing is required.

The worker's codec (runtime/encryption.py) turns such a payload into a marker instead of
failing the activation. This converter turns the marker into a non-retryable
ApplicationError, which the SDK treats per input: a signal is dropped, an update refused,
a query answered with the error, a start fails the workflow before any of its code runs,
an activity input fails that activity; an activity's or a sub-agent's result fails the
run reading it (the SDK fails a run on a refusal met while applying a job).

The refusals are mixed into whichever payload converter the client has (ours, or a peer
plugin's: `with_refusals`), so a team's pydantic-ai or OpenAI Agents plugin and ours share
one client in either order (worker/converter.py).

Two more things only this converter can do, because only it sees a payload as it came:
- a value that asks for it (`take_seal`) learns whether the codec opened it with one of
  the deployment's keys (encryption.SEALED_WITH): a run's start input, so the run can
  refuse what only the deployment may hand it (workflows/admission.py);
- a type that says an unreadable payload fails the run (`UNREADABLE_FAILS_THE_RUN`, the
  start input) turns a decode error into a one-line non-retryable refusal naming the
  field: the SDK then fails the run at once, where a plain error fails its first workflow
  task over and over and the run sits "running" for good.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, Self

from pydantic import ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter, PydanticPayloadConverter
from temporalio.converter import (
    ActivitySerializationContext,
    CompositePayloadConverter,
    EncodingPayloadConverter,
    PayloadConverter,
    SerializationContext,
)
from temporalio.exceptions import ApplicationError

from durable_agents.runtime.encryption import IN_THE_CLEAR, REFUSED_ENCODINGS, SEALED_WITH

REFUSED_TYPE = "InputRefused"


class _Refusing(EncodingPayloadConverter):
    def __init__(self, encoding: bytes) -> None:
        self._encoding = encoding.decode()

    @property
    def encoding(self) -> str:
        return self._encoding

    def to_payload(self, value: Any) -> Payload | None:
        return None  # never writes: the marker only comes from a codec

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        reason = payload.metadata.get("reason", b"").decode("utf-8", errors="replace")
        raise ApplicationError(f"refused: {reason}", type=REFUSED_TYPE, non_retryable=True)


# The one workflow type whose activities only the deployment's processes may feed.
AGENT_WORKFLOW = "AgentWorkflow"


class RefusesMarkers(CompositePayloadConverter):
    """Mixed in before a payload converter: its converters, plus a refusal for every marker
    a worker's codec hands on. Any converter that can be built with no arguments takes it,
    ours or the one a peer's plugin set (pydantic-ai's, the OpenAI Agents SDK's), so
    sealing does not decide which converter a client has (`with_refusals`)."""

    def __init__(self) -> None:
        super().__init__()  # the converter mixed into: it builds its own converters
        self._context: SerializationContext | None = None
        self._set_converters(
            *self.converters.values(), *(_Refusing(encoding) for encoding in REFUSED_ENCODINGS)
        )

    def from_payloads(
        self, payloads: Sequence[Payload], type_hints: list[type] | None = None
    ) -> list[Any]:
        hints: list[Any] = list(type_hints or [])
        hints += [None] * (len(payloads) - len(hints))
        values = []
        for payload, hint in zip(payloads, hints, strict=False):
            try:
                [value] = super().from_payloads([payload], [hint] if hint is not None else None)
            except ApplicationError:
                raise
            except Exception as err:
                if not getattr(hint, "UNREADABLE_FAILS_THE_RUN", False):
                    raise
                raise ApplicationError(
                    f"refused: the start input cannot be read: {unreadable(err)}",
                    type=REFUSED_TYPE,
                    non_retryable=True,
                ) from None
            seal = payload.metadata.get(SEALED_WITH)
            only_ours = self._deployment_only() or getattr(hint, "DEPLOYMENT_ONLY", False)
            if seal == IN_THE_CLEAR and only_ours:
                raise ApplicationError(
                    f"refused: {self._what(hint)} is not sealed with the deployment's key",
                    type=REFUSED_TYPE,
                    non_retryable=True,
                )
            take_seal = getattr(value, "take_seal", None)
            if callable(take_seal):
                take_seal(seal.decode("utf-8", errors="replace") if seal else None)
            values.append(value)
        return values

    def with_context(self, context: SerializationContext) -> Self:
        made = super().with_context(context)
        if made is self:
            made = type(self)()  # nullary, as the SDK builds it: its own converters again
        made._context = context
        return made

    def _deployment_only(self) -> bool:
        """Whether what is read here only the deployment's own processes write: an agent
        run's activity inputs and results (local ones' markers too). Whoever may start a
        workflow may poll our queues, take a run's task or an activity's, and write either;
        only a process holding a key seals them. A start, signal or update may come from
        outside, in the clear, and the run checks it as such."""
        context = self._context
        return (
            isinstance(context, ActivitySerializationContext)
            and context.workflow_type == AGENT_WORKFLOW
        )

    def _what(self, hint: Any) -> str:
        context = self._context
        if isinstance(context, ActivitySerializationContext):
            return (
                f"{context.activity_type} of run {context.workflow_id} "
                "(an activity's input or result)"
            )
        return f"a {getattr(hint, '__name__', 'value')} (a run's result, state or summary)"


def unreadable(err: Exception, limit: int = 300) -> str:
    """Why a payload cannot be read, in one line that names the field."""
    cause = err.__cause__ if isinstance(err, RuntimeError) and err.__cause__ else err
    if isinstance(cause, ValidationError):
        said = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
            for e in cause.errors(include_url=False)
        )
    else:
        said = f"{type(cause).__name__}: {cause}"
    said = " ".join(said.split())
    return said if len(said) <= limit else said[: limit - 3] + "..."


class SealedPayloadConverter(RefusesMarkers, PydanticPayloadConverter):
    """Pydantic payloads, plus a refusal for every marker a worker's codec hands on."""


def with_refusals(base: type[PayloadConverter]) -> type[PayloadConverter]:
    """`base` with the refusals mixed in: a subclass, so a plugin that checks for its own
    converter (isinstance, issubclass) still finds it. One class per base: two clients
    built the same way get the same class."""
    if issubclass(base, RefusesMarkers):
        return base
    if base is PydanticPayloadConverter:
        return SealedPayloadConverter
    if not issubclass(base, CompositePayloadConverter):
        raise TypeError(f"{base.__name__} is not a CompositePayloadConverter: no marker refusals")
    return _mixed(base)


@cache
def _mixed(base: type[CompositePayloadConverter]) -> type[PayloadConverter]:
    return type(f"Sealed{base.__name__}", (RefusesMarkers, base), {"__module__": __name__})


def speaks_pydantic(converter_class: type[PayloadConverter]) -> bool:
    """Whether a payload converter writes and reads pydantic models: temporalio's pydantic
    converter or a subclass (pydantic-ai's), or a composite whose JSON converter is
    temporalio's pydantic one (the OpenAI Agents SDK's)."""
    if issubclass(converter_class, PydanticPayloadConverter):
        return True
    if not issubclass(converter_class, CompositePayloadConverter):
        return False
    try:
        converter = converter_class()
    except Exception:  # a converter that needs arguments is none a DataConverter can build
        return False
    return isinstance(converter.converters.get(b"json/plain"), PydanticJSONPlainPayloadConverter)
