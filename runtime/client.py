"""The one way to reach Temporal: the address and namespace from settings, pydantic payloads,
encrypted when keys are set, traced when tracing is on."""

from __future__ import annotations

import dataclasses
import re
from functools import cache

from temporalio.client import Client, Interceptor
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverterWithEncodedAttributes
from temporalio.runtime import Runtime

from durable_agents.runtime import telemetry
from durable_agents.runtime.connection import Connection, connection
from durable_agents.runtime.encryption import EncryptionCodec, Keyring, key_text
from durable_agents.runtime.refused_payloads import SealedPayloadConverter
from durable_agents.runtime.settings import Settings


async def connect(
    settings: Settings, *, runtime: Runtime | None = None, for_worker: bool = False
) -> Client:
    """A client, over TLS, mTLS or with an API key as configured (runtime/connection.py);
    `for_worker` makes its codec tolerant of payloads it cannot decrypt
    (runtime/encryption.py), which only a worker wants. ConnectionSettingsError when the
    settings cannot be used, RuntimeError when Temporal cannot be reached."""
    interceptors: list[Interceptor] = []
    if telemetry.tracing_installed():
        interceptors.append(TracingInterceptor(telemetry.tracer()))
    target = connection(settings)
    try:
        return await Client.connect(
            target.address,
            namespace=target.namespace,
            api_key=target.api_key,
            tls=target.tls,
            rpc_metadata=target.rpc_metadata,
            data_converter=data_converter(settings, for_worker=for_worker),
            interceptors=interceptors,
            runtime=runtime,
        )
    except RuntimeError as err:
        raise TemporalUnreachable(target, connect_failure(str(err))) from None


class TemporalUnreachable(RuntimeError):
    """Temporal could not be reached, said in one line: where, how, and the likely cause."""

    def __init__(self, target: Connection, reason: str) -> None:
        self.address, self.reason = target.address, explain(reason, target)
        # Refused credentials or certificates: retrying will not mend them.
        self.permanent = self.reason != reason and "TEMPORAL_TLS=true" not in self.reason
        super().__init__(
            f"cannot reach Temporal at {target.address} ({target.transport}): {self.reason}"
        )


def explain(reason: str, target: Connection) -> str:
    """The SDK's reason, with what a person would check for the common ones."""
    low = reason.lower()
    if "status: 401" in low or "unauthenticated" in low:
        return "the server refused the credentials (a missing or wrong API key)"
    if "status: 403" in low or "permission" in low:
        return "the server refused this client (forbidden: check the namespace and key)"
    if "status: 400" in low and target.tls is not False:
        return "the server refused the request (a TLS front door that wants a client certificate?)"
    if "unknownissuer" in low or "invalidcertificate" in low:
        return (
            "the server's certificate is not signed by a CA this client trusts: set the CA "
            "that signed it (AGENT_TEMPORAL_TLS_CA_FILE or TEMPORAL_TLS_SERVER_CA_CERT_PATH)"
        )
    if "certificate" in low or "handshake" in low or "alert" in low:
        return f"the TLS handshake failed ({reason}): check the certificates"
    plain_to_tls = ("canceled", "reset", "broken pipe", "protocol error")
    if target.tls is False and any(word in low for word in plain_to_tls):
        return f"{reason}; if the server speaks TLS, set TEMPORAL_TLS=true"
    return reason


# A poller Temporal saw this recently counts as polling (a stopped worker is said gone
# this long after): `agentctl up`'s readiness, a replica's store queue in show and list.
POLLER_SEEN_SECONDS = 90.0

# Without keys: pydantic payloads, read through our payload converter all the same (a start
# input it cannot read fails its run in one line: runtime/refused_payloads.py).
PLAIN_CONVERTER = dataclasses.replace(
    pydantic_data_converter, payload_converter_class=SealedPayloadConverter
)


def data_converter(settings: Settings, *, for_worker: bool = False) -> DataConverter:
    """Pydantic payloads; with keys, every payload encrypted and failure messages and stack
    traces moved into an encrypted payload, so the server holds no plaintext. A worker's
    converter refuses payloads it cannot open, and with AGENT_REQUIRE_SEALED_INPUTS
    unsealed ones (runtime/refused_payloads.py)."""
    keys = key_text(settings)
    if keys is None:
        return PLAIN_CONVERTER
    return _encrypted_converter(keys, for_worker, settings.require_sealed_inputs)


@cache
def _encrypted_converter(keys: str, tolerant: bool, require_sealed: bool) -> DataConverter:
    codec = EncryptionCodec(Keyring.parse(keys), tolerant=tolerant, require_sealed=require_sealed)
    return dataclasses.replace(
        pydantic_data_converter,
        payload_converter_class=SealedPayloadConverter,
        payload_codec=codec,
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )


def as_worker_reads(converter: DataConverter) -> DataConverter:
    """A client's converter made to read as a worker does, for a replay: what the worker
    refused (an unsealed or undecryptable input) must be refused again, not read."""
    codec = converter.payload_codec
    if not isinstance(codec, EncryptionCodec) or codec.tolerant:
        return converter
    return dataclasses.replace(converter, payload_codec=codec.as_worker())


def connect_failure(text: str) -> str:
    """The reason inside the SDK's long connection error: "connection refused", say (the
    reason itself for an error of ours that says it already)."""
    if text.startswith("cannot reach Temporal at "):
        return text.partition("): ")[2] or text
    found = re.search(r'message: "([^"]+)"', text)
    if found:
        return found.group(1).lower()
    return " ".join(text.split(":", 1)[-1].split())[:160]
