"""Leaving a short process that used a Temporal client, without a crash on the way out."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from durable_agents.runtime import telemetry


def leave(exit_code: int) -> NoReturn:
    """Flush what the process wrote, then exit without interpreter finalization.

    The Temporal SDK's Rust threads can still hold the GIL for a few milliseconds after
    the last call returns; if Python finalizes then, the process aborts ("PyGILState_Release
    ... must be current", temporalio/sdk-python#300) after its work succeeded. Measured
    here: 10 of 100 short client processes, 0 of 100 that leave this way.
    """
    telemetry.flush_tracing()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
