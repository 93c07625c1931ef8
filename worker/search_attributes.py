"""Our search attributes in a namespace: registered by `agentctl setup` (and a test's own
server), checked by every worker with our plugin before it polls (a run's first upsert
of an attribute the namespace lacks fails its workflow task over and over)."""

from __future__ import annotations

from google.protobuf.empty_pb2 import Empty
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.workflows import search_attributes as sa

_TYPES = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
}


class SearchAttributesMissing(RuntimeError):
    """The namespace lacks search attributes our runs write, or will not show them to the
    worker: a run (ours, or a team's workflow calling an agent) would fail its workflow
    task on each try, stuck, with the reason only in the worker's WARN lines. Said at
    once instead, in one line."""


def _wanted() -> dict[str, IndexedValueType.ValueType]:
    return {key.name: _TYPES[key._metadata_type] for key in sa.ALL}


async def register_search_attributes(client: Client) -> None:
    """Register our search attributes in the client's namespace (those there already are
    left as they are). `agentctl setup` calls it; so may a test, on its own server."""
    wanted = _wanted()
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
        wanted = {k: v for k, v in wanted.items() if k not in listed.custom_attributes}
    except RPCError as err:  # the time-skipping test server lists none: add them all
        if err.status != RPCStatusCode.UNIMPLEMENTED:
            raise
    if not wanted:
        return
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=wanted)
        )
    except RPCError as err:
        if err.status != RPCStatusCode.ALREADY_EXISTS:
            raise


async def missing_search_attributes(client: Client) -> list[str]:
    """Our search attributes the client's namespace lacks, or has with another type
    ("AgentStep (Keyword, not Int)"); empty when all are there. Raises RPCError
    UNIMPLEMENTED on Temporal's time-skipping test server, which cannot list them."""
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    have = dict(listed.custom_attributes)
    missing = []
    for name, kind in _wanted().items():
        if name not in have:
            missing.append(name)
        elif have[name] != kind:
            missing.append(f"{name} ({_type_name(have[name])}, not {_type_name(kind)})")
    return missing


def _type_name(kind: IndexedValueType.ValueType) -> str:
    return IndexedValueType.Name(kind).removeprefix("INDEXED_VALUE_TYPE_").title()


def advice(namespace: str, missing: list[str]) -> str:
    """What to do, in one line: setup registers what is missing; an attribute of another
    type is a name a team (or an older setup) took, which setup cannot change."""
    mistyped = [m.split(" ")[0] for m in missing if " (" in m]
    if mistyped:
        names = " ".join(f"--name {name}" for name in mistyped)
        return (
            f"namespace {namespace!r} has the search attributes {', '.join(missing)}: remove "
            f"them (`temporal operator search-attribute remove {names}`), then run "
            "`agentctl setup`"
        )
    return (
        f"namespace {namespace!r} lacks the search attributes {', '.join(missing)}: run "
        "`agentctl setup` once for it (in a test: await "
        "durable_agents.testing.register_search_attributes(client))"
    )


async def _is_test_server(client: Client) -> bool:
    """Temporal's time-skipping test server (its own service answers), where a test's
    attributes may be registered by the worker: nowhere else does a worker register."""
    try:
        await client.test_service.get_current_time(Empty())
    except RPCError:
        return False
    return True


async def require_search_attributes(client: Client) -> None:
    """Refuse, in one line naming what to do, a namespace that lacks our search
    attributes. Temporal's time-skipping test server cannot list them: there, and only
    there, they are registered (a test's own server, where registering harms nothing). Any
    other server that will not list them is refused too: a worker that cannot see them
    cannot say they are there, and registering them is `agentctl setup`'s, an operator's
    act on a namespace, never a worker's."""
    try:
        missing = await missing_search_attributes(client)
    except RPCError as err:
        if err.status == RPCStatusCode.UNIMPLEMENTED and await _is_test_server(client):
            await register_search_attributes(client)
            return
        if err.status in (RPCStatusCode.UNIMPLEMENTED, RPCStatusCode.PERMISSION_DENIED):
            raise SearchAttributesMissing(unlisted(client.namespace, err.status.name)) from None
        raise
    if missing:
        raise SearchAttributesMissing(advice(client.namespace, missing))


def unlisted(namespace: str, status: str) -> str:
    """What to do when the server will not list the namespace's search attributes to this
    worker, in one line: register them with an operator's credentials, and let the
    worker's own list them (setup alone leaves it as blind as before)."""
    return (
        f"cannot check the search attributes of namespace {namespace!r} ({status}): a "
        "worker starts only where it can see ours; run `agentctl setup` once for it with an "
        "operator's credentials, and give this worker's credentials leave to list search "
        "attributes"
    )
