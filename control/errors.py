"""A failure a person caused, said in one line: the CLI prints it, the console shows it."""

from __future__ import annotations

from pydantic import ValidationError
from temporalio.service import RPCError

from durable_agents.infra.processes import StackError
from durable_agents.runtime.client import TemporalUnreachable, connect_failure


def one_line(err: BaseException) -> str:
    if isinstance(err, ValidationError):
        parts = [
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
            for e in err.errors(include_url=False)
        ]
        return "invalid input: " + "; ".join(parts)
    if isinstance(err, RPCError):
        return f"Temporal refused: {err.message}"
    text = str(err)
    if isinstance(err, TemporalUnreachable):
        if "refused" in err.reason and "connection refused" in err.reason:
            return f"{text}; is the stack up? run `agentctl up`"
        return text
    if text.startswith("Failed client connect"):
        return (
            f"cannot reach Temporal ({connect_failure(text)}); is the stack up? run `agentctl up`"
        )
    # StackError messages may carry a log tail after the first line: run_async keeps it.
    return text if isinstance(err, StackError) else " ".join(text.split())
