"""Our data converter laid over the one a client already has, in whatever order plugins come.

Agents need three things of a client's converter: payloads that carry pydantic models,
and, with AGENT_ENCRYPTION_KEYS, our codec (every payload sealed) and a payload converter
that refuses the markers the worker's codec hands on (runtime/refused_payloads.py), and
failures whose messages travel encrypted. Nothing more: so the payload converter a team
or a peer's plugin chose is kept whenever it carries pydantic models (pydantic-ai's
`PydanticAIPayloadConverter`, the OpenAI Agents SDK's `OpenAIPayloadConverter`), with our
refusals mixed into a subclass of it, which those plugins still recognise as theirs.

Plugins configure a client one after the other, and a plugin after ours may insist on
its own converter (the OpenAI Agents SDK's refuses any other). So before laying ours, we
ask the plugins after us what they would make of the client's converter (`their_converter`)
and lay ours over that; when their turn comes they find their own converter and keep it.
A team's codec or converter is never silently dropped, nor our sealing by a plugin after
ours that sets a converter outright: what cannot go together is refused in one line.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import Any

from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultPayloadConverter,
)
from temporalio.plugin import SimplePlugin

from durable_agents.runtime.encryption import EncryptionCodec
from durable_agents.runtime.refused_payloads import (
    RefusesMarkers,
    speaks_pydantic,
    with_refusals,
)


class PluginError(ValueError):
    """The worker or client cannot carry agents as configured; the message says why."""


def their_converter(existing: DataConverter, later: Sequence[Any]) -> DataConverter:
    """What the plugins after ours would make of `existing` (those built on the SDK's
    SimplePlugin, the way every integration is); a plugin that refuses it says so itself
    on its real turn."""
    try:
        return _through(existing, later)
    except Exception:
        return existing


def accepted(converter: DataConverter, later: Sequence[Any]) -> bool:
    """Whether the plugins after ours take `converter` as it is."""
    try:
        _through(converter, later)
    except Exception:
        return False
    return True


def _through(converter: DataConverter, later: Sequence[Any]) -> DataConverter:
    for plugin in later:
        make = plugin.data_converter if isinstance(plugin, SimplePlugin) else None
        if isinstance(make, DataConverter):
            converter = make
        elif callable(make):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # it warns on its real turn, once
                converter = make(converter)
    return converter


def ours_before(
    existing: DataConverter, later: Sequence[Any], ours: DataConverter
) -> DataConverter:
    """Ours, for a client whose plugins after ours (`later`) are still to come: laid over
    what they will make, so they find their own payload converter and keep it. A plugin
    that takes no payload converter but the SDK's default, to replace it with its own
    (the OpenAI Agents SDK's: its check never sees its own class through the SDK's
    wrapper), gets the client's class back to replace; with keys set it could not take
    our refusals, and that is said now, with the order that works."""
    made = lay_over(their_converter(existing, later), ours)
    if not later or accepted(made, later):
        _check_sealing_kept(made, later, ours)
        return made
    left = dataclasses.replace(made, payload_converter_class=existing.payload_converter_class)
    if not accepted(left, later):
        return made  # they refuse the client's own converter too: their error says why
    if ours.payload_codec is not None:
        names = ", ".join(type(p).__name__ for p in later)
        raise PluginError(
            f"{names} takes no payload converter but its own, and with AGENT_ENCRYPTION_KEYS "
            "set ours must refuse what it cannot open: list DurableAgentsPlugin after it "
            "in plugins=[...]"
        )
    return left


def _check_sealing_kept(made: DataConverter, later: Sequence[Any], ours: DataConverter) -> None:
    """A plugin after ours that sets a data converter outright drops our codec: a client
    that only starts runs (no worker to check it) would send goals in plaintext."""
    sealing = ours.payload_codec
    if sealing is None:
        return
    converter = made
    for plugin in later:
        converter = _through(converter, [plugin])
        if not _same_keys(converter.payload_codec, sealing):
            name = plugin.name() if callable(getattr(plugin, "name", None)) else None
            raise PluginError(
                f"{name or type(plugin).__name__} replaces the client's data converter, "
                "dropping AGENT_ENCRYPTION_KEYS' sealing: list DurableAgentsPlugin after it"
            )


def lay_over(existing: DataConverter | None, ours: DataConverter) -> DataConverter:
    """`ours` (runtime/client.data_converter) over the client's `existing` converter."""
    if existing is None:
        return ours
    payload = existing.payload_converter_class
    if payload is DefaultPayloadConverter:
        payload = PydanticPayloadConverter
    elif not speaks_pydantic(payload):
        raise PluginError(
            f"the client has a payload converter of its own ({payload.__name__}) that does "
            "not carry pydantic models: agents need pydantic payloads (temporalio.contrib."
            "pydantic, or a converter built on it), which read dataclasses and plain JSON too"
        )
    sealing = ours.payload_codec
    if sealing is None:
        return dataclasses.replace(existing, payload_converter_class=with_refusals(payload))
    codec = existing.payload_codec
    if codec is not None and not _same_keys(codec, sealing):
        raise PluginError(
            "the client has a payload codec of its own and AGENT_ENCRYPTION_KEYS are set: "
            "use one of the two"
        )
    failures = existing.failure_converter_class
    if failures is DefaultFailureConverter:
        failures = ours.failure_converter_class  # messages and stack traces sealed too
    elif failures is not ours.failure_converter_class:
        raise PluginError(
            f"the client has a failure converter of its own ({failures.__name__}) and "
            "AGENT_ENCRYPTION_KEYS are set: failure messages would reach the server in "
            "plaintext; use DefaultFailureConverterWithEncodedAttributes or no keys"
        )
    return dataclasses.replace(
        existing,
        payload_converter_class=with_refusals(payload),
        payload_codec=sealing,
        failure_converter_class=failures,
    )


def _same_keys(codec: object, sealing: object) -> bool:
    """The client's codec is ours already (a client from runtime/client.connect): the
    worker's tolerant one replaces it."""
    return (
        isinstance(codec, EncryptionCodec)
        and isinstance(sealing, EncryptionCodec)
        and codec.keyring == sealing.keyring
    )


def check_carries_agents(converter: DataConverter, ours: DataConverter) -> None:
    """A worker's client must speak our payloads, and with keys seal them: a plugin after
    ours that replaced the converter outright is refused here, not found out on the wire."""
    if not speaks_pydantic(converter.payload_converter_class):
        raise PluginError(
            "the worker's client does not speak our payloads: pass DurableAgentsPlugin to "
            "Client.connect(..., plugins=[plugin]) (its worker inherits it)"
        )
    codec = converter.payload_codec
    if ours.payload_codec is not None and not _same_keys(codec, ours.payload_codec):
        raise PluginError(
            "the worker's client does not seal payloads with AGENT_ENCRYPTION_KEYS: a plugin "
            "after DurableAgentsPlugin replaced its data converter; put ours after it"
        )
    if (
        isinstance(codec, EncryptionCodec)
        and codec.tolerant
        and not issubclass(converter.payload_converter_class, RefusesMarkers)
    ):
        raise PluginError(
            "the worker's client reads payloads it cannot open as markers but its payload "
            "converter does not refuse them: a plugin after DurableAgentsPlugin replaced it"
        )
