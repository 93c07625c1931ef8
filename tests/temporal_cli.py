"""The real `temporal` CLI as the tests call it: with its own deadlines, no standard input,
none of the machine's TEMPORAL_* settings or profile file, and run in a thread whose
timeout the OS enforces, so neither a server that never answers nor a busy event loop
(the test's worker shares it) can leave a call hanging. A call that still overstays is
killed with SIGQUIT, which makes Go print every goroutine: the failure says where it hung.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from dataclasses import dataclass

from temporalio.client import Client

from infra.binaries import temporal_cli

# The CLI's own deadline for one call; the thread's is this plus a margin.
CALL_SECONDS = 60
CONNECT_SECONDS = 15


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str


def command(address: str, namespace: str, *args: str) -> list[str]:
    return [
        str(temporal_cli()), *args, "--address", address, "--namespace", namespace,
        "--command-timeout", f"{CALL_SECONDS}s",
        "--client-connect-timeout", f"{CONNECT_SECONDS}s",
        "--disable-config-file", "--disable-config-env",
    ]  # fmt: skip


def run(address: str, namespace: str, *args: str) -> Outcome:
    argv = command(address, namespace, *args)
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    began = time.monotonic()
    try:
        out, err = process.communicate(timeout=CALL_SECONDS + 30)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGQUIT)  # Go: every goroutine's stack, then exit
        out, err = process.communicate(timeout=15)
        raise AssertionError(
            f"temporal {' '.join(args)}: no answer after {time.monotonic() - began:.0f} s; "
            f"its stacks:\n{err[-8000:]}"
        ) from None
    return Outcome(process.returncode, out, err)


async def temporal(client: Client, *args: str) -> Outcome:
    """`temporal ARGS` against the client's server, awaited without holding the loop."""
    address = client.service_client.config.target_host
    return await asyncio.to_thread(run, address, client.namespace, *args)
