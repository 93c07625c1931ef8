"""Payloads a worker refuses to read: undecryptable, or not sealed when sealing is required.

The worker's codec (runtime/encryption.py) turns such a payload into a marker instead of
failing the activation. This converter turns the marker into a non-retryable
ApplicationError, which the SDK treats per input: a signal is dropped, an update refused,
a query answered with the error, a start fails the workflow before any of its code runs,
an activity input fails that activity. Anything else in the same activation goes on.
"""

from __future__ import annotations

from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import EncodingPayloadConverter
from temporalio.exceptions import ApplicationError

from durable_agents.runtime.encryption import REFUSED_ENCODINGS

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


class SealedPayloadConverter(PydanticPayloadConverter):
    """Pydantic payloads, plus a refusal for every marker a worker's codec hands on."""

    def __init__(self) -> None:
        super().__init__()
        self._set_converters(
            *self.converters.values(), *(_Refusing(encoding) for encoding in REFUSED_ENCODINGS)
        )
