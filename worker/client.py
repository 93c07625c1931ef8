"""The one way to reach Temporal: the address and namespace from settings, pydantic payloads."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from worker.settings import Settings


async def connect(settings: Settings) -> Client:
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.namespace,
        data_converter=pydantic_data_converter,
    )
