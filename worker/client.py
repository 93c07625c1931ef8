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

from worker import telemetry
from worker.encryption import EncryptionCodec, Keyring, key_text
from worker.settings import Settings


async def connect(
    settings: Settings, *, runtime: Runtime | None = None, for_worker: bool = False
) -> Client:
    """A client; `for_worker` makes its codec tolerant of payloads it cannot decrypt
    (worker/encryption.py), which only a worker wants."""
    interceptors: list[Interceptor] = []
    if telemetry.tracing_installed():
        interceptors.append(TracingInterceptor(telemetry.tracer()))
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.namespace,
        data_converter=data_converter(settings, for_worker=for_worker),
        interceptors=interceptors,
        runtime=runtime,
    )


def data_converter(settings: Settings, *, for_worker: bool = False) -> DataConverter:
    """Pydantic payloads; with keys, every payload encrypted and failure messages and stack
    traces moved into an encrypted payload, so the server holds no plaintext."""
    keys = key_text(settings)
    if keys is None:
        return pydantic_data_converter
    return _encrypted_converter(keys, for_worker)


@cache
def _encrypted_converter(keys: str, tolerant: bool) -> DataConverter:
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=EncryptionCodec(Keyring.parse(keys), tolerant=tolerant),
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )


def connect_failure(text: str) -> str:
    """The reason inside the SDK's long connection error: "connection refused", say."""
    found = re.search(r'message: "([^"]+)"', text)
    if found:
        return found.group(1).lower()
    return " ".join(text.split(":", 1)[-1].split())[:160]
