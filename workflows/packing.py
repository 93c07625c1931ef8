"""The packed form of the state a continue-as-new carries, and the bounds the next run's
admission holds it to. The state itself reads it back (state.unpack_state)."""

from __future__ import annotations

import base64
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the state re-exports this module's names: no import back at load time
    from durable_agents.workflows.state.run_state import RunState

# Between the packing run's id and the packed state: never a base64 character.
PACKER_SEPARATOR = "."
# A carried state inflates to at most this (a state that large is far past what a run
# keeps: its lists are capped), and its packed form is at most this long: a start input
# that inflates without bound never takes the worker's memory (the admission refuses it).
MAX_STATE_BYTES = 32 * 1024 * 1024
MAX_PACKED_STATE_CHARS = 4 * 1024 * 1024


class StateTooLarge(ValueError):
    """A carried state that would inflate past MAX_STATE_BYTES."""


def pack_state(state: RunState, by_run: str | None = None) -> str:
    """The state a continue-as-new carries, compressed: it is written twice (the
    continue-as-new event and the next run's start), and a long plan of step titles and
    results shrinks several times over. `by_run`: the Temporal run that packs it, named
    in front (the next run checks it is the one it continues: workflows/admission.py)."""
    packed = base64.b64encode(zlib.compress(state.model_dump_json().encode(), 6)).decode()
    return packed if by_run is None else f"{by_run}{PACKER_SEPARATOR}{packed}"


def packed_by(packed: str) -> str | None:
    """The run that packed a carried state (None: packed before runs named themselves)."""
    packer, sep, _ = packed.partition(PACKER_SEPARATOR)
    return packer if sep else None


def inflate(packed: str) -> bytes:
    """A packed state's JSON, inflated only up to MAX_STATE_BYTES."""
    inflater = zlib.decompressobj()
    packed = packed.rpartition(PACKER_SEPARATOR)[2]
    raw = inflater.decompress(base64.b64decode(packed, validate=True), MAX_STATE_BYTES)
    if inflater.unconsumed_tail:
        raise StateTooLarge(f"the carried state inflates past {MAX_STATE_BYTES} bytes")
    if not inflater.eof:
        raise ValueError("the carried state is cut short")
    return raw
