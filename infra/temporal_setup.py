"""Namespace set-up a real cluster (or the time-skipping test server) needs before runs:
our search attributes. The dev server registers them itself from start-dev flags."""

from __future__ import annotations

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from workflows import search_attributes as sa

_TYPES = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
}


async def register_search_attributes(client: Client) -> None:
    wanted = {key.name: _TYPES[key._metadata_type] for key in sa.ALL}
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=wanted)
        )
    except RPCError as err:
        if err.status != RPCStatusCode.ALREADY_EXISTS:
            raise
