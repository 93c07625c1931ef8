"""The real `temporal` CLI as the tests call it: with its own deadlines, no standard input,
none of the machine's TEMPORAL_* settings or profile file, and run in a thread whose
timeout the OS enforces, so neither a server that never answers nor a busy event loop
(the test's worker shares it) can leave a call hanging.

Why a call could hang at all: `temporal workflow signal -w` is one SignalWorkflowExecution
RPC, not retried, with no deadline unless `--command-timeout` gives one; the gRPC keepalive
ends it when the server stops answering pings. A call that waited past 180 s (twice, in
full runs) was a live dev server that never finished the handler. The tests that walk the
CLI therefore get a dev server of their own (`own_dev_server`), not the one 40 other files
load for ten minutes; and a call that still overstays is answered with SIGQUIT to the CLI
and to the dev server behind it, which makes Go print every goroutine: the failure says
where each side waited (the server's stacks land in the test's captured stderr).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agents.infra.binaries import temporal_cli

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
        servers = quit_dev_servers(address.rpartition(":")[2])
        raise AssertionError(
            f"temporal {' '.join(args)}: no answer after {time.monotonic() - began:.0f} s; "
            f"dev server pids {servers} sent SIGQUIT (stacks in captured stderr); "
            f"the CLI's stacks:\n{err[-8000:]}"
        ) from None
    return Outcome(process.returncode, out, err)


async def temporal(client: Client, *args: str) -> Outcome:
    """`temporal ARGS` against the client's server, awaited without holding the loop."""
    address = client.service_client.config.target_host
    return await asyncio.to_thread(run, address, client.namespace, *args)


def quit_dev_servers(port: str) -> list[int]:
    """SIGQUIT to the dev server on this port: its goroutine stacks go to its stderr."""
    hit = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"start-dev" in argv and argv[argv.index(b"--port") + 1] == port.encode():
                os.kill(int(proc.name), signal.SIGQUIT)
                hit.append(int(proc.name))
    return hit


@contextlib.asynccontextmanager
async def own_dev_server() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server for one test module that walks the CLI (see the module docstring)."""
    from tests.conftest import start_dev_server

    env = await start_dev_server()
    try:
        yield env
    finally:
        await env.shutdown()
