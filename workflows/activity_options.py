"""Every activity the agent workflow calls, by name, with its timeouts and retry policy:
one table, so a timeout is changed in one place and read in one place.

The names are the activities' registered names (activities/ defines them; the workflow
imports none of that code). Where a figure comes from the run itself (its limits, a
tool's or a rule's declaration), the row is a function of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows.contracts import RunLimits

CALL_MODEL = "call_model"
RUN_TOOL = "run_tool"
CALL_MCP_TOOL = "call_mcp_tool"
EVALUATE_CALL = "evaluate_call"
RESOLVE_AGENT = "resolve_agent"  # a local activity
LIST_MCP_TOOLS = "list_mcp_tools"
COPY_TRANSCRIPT = "copy_transcript"
# Waits for a sub-agent's run that a reset of its parent found already started.
AWAIT_RUN = "await_run"
# Asks a fork's parent for its identity and policy.
FORK_ORIGIN = "fork_origin"
# Rebuilds a fork's parent's state at the fork's moment from the parent's history.
PARENT_STATE_AT = "parent_state_at"
# Asks a Schedule whether it started this run (a subject granted to a Schedule's runs).
SCHEDULED_RUN = "scheduled_run"
# How a run came about, from Temporal's record (the admission, workflows/admission.py).
RUN_ORIGIN = "run_origin"
# Takes a grant's nonce for the run it starts, in the stores.
CLAIM_SIGNATURE = "claim_signature"
# A running sub-agent's spend, asked of its own run after it reports (a local activity).
CHILD_SPEND = "child_spend"

# The activities that read or write the run's past in our stores (its transcript, model
# memo, ledger, tool lists, memories): once the run knows the queue of the worker whose
# store holds it, they go there (workflows/phases/activity_call.py).
STORE_BOUND = frozenset(
    {CALL_MODEL, RUN_TOOL, CALL_MCP_TOOL, LIST_MCP_TOOLS, COPY_TRANSCRIPT, CLAIM_SIGNATURE}
)

# A call a worker's store refused (activity_io.STORE_MISSING) is never a failure of the
# run: once its retries are spent, the run waits (these, one after another, the last
# repeated) and calls it again, until a worker whose store holds the run takes it.
STORE_WAITS = (
    timedelta(seconds=30),
    timedelta(minutes=1),
    timedelta(minutes=2),
    timedelta(minutes=5),
)

# Activities heartbeat every second (activities/heartbeat.py): a dead worker's activity
# is retried after a few seconds, not after its whole start-to-close timeout.
HEARTBEAT_TIMEOUT = timedelta(seconds=5)
# Asking another service (an MCP server, another run) that may be down for a while.
ASKING_ANOTHER = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=10)
# A tool that declares no retry policy of its own.
TOOL_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=20)


@dataclass(frozen=True)
class Options:
    """How one activity is called. `waits_for_cancellation`: a cancelled run waits for
    the activity to stop (it heartbeats), so nothing it does lands after the run ended."""

    start_to_close: timedelta
    retry: RetryPolicy | None = None
    heartbeat: timedelta | None = None
    waits_for_cancellation: bool = False

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of `workflow.execute_activity` (and the local kind)."""
        given: dict[str, Any] = {"start_to_close_timeout": self.start_to_close}
        if self.retry is not None:
            given["retry_policy"] = self.retry
        if self.heartbeat is not None:
            given["heartbeat_timeout"] = self.heartbeat
        if self.waits_for_cancellation:
            wait = workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
            given["cancellation_type"] = wait
        return given


# The activities whose options do not depend on the run.
FIXED: dict[str, Options] = {
    RESOLVE_AGENT: Options(timedelta(seconds=10)),
    LIST_MCP_TOOLS: Options(timedelta(minutes=2), ASKING_ANOTHER),
    FORK_ORIGIN: Options(timedelta(minutes=1), ASKING_ANOTHER),
    RUN_ORIGIN: Options(timedelta(minutes=1), ASKING_ANOTHER),
    COPY_TRANSCRIPT: Options(timedelta(minutes=5)),
    PARENT_STATE_AT: Options(timedelta(minutes=5), ASKING_ANOTHER),
    CLAIM_SIGNATURE: Options(timedelta(seconds=30)),
    # A query of a run on our own workers: a read that fails waits for the next report.
    CHILD_SPEND: Options(
        timedelta(seconds=10),
        RetryPolicy(maximum_interval=timedelta(seconds=2), maximum_attempts=3),
    ),
    # The Schedule records a run it started just after starting it: asked again a few times.
    SCHEDULED_RUN: Options(
        timedelta(seconds=30),
        RetryPolicy(
            initial_interval=timedelta(milliseconds=200),
            maximum_interval=timedelta(seconds=1),
            maximum_attempts=6,
        ),
    ),
    AWAIT_RUN: Options(timedelta(days=365), heartbeat=HEARTBEAT_TIMEOUT),
}


def model_call(limits: RunLimits) -> Options:
    """CALL_MODEL: the run's model timeout and attempts."""
    retry = RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=limits.model_max_attempts,
    )
    timeout = timedelta(seconds=limits.model_timeout_seconds)
    return Options(timeout, retry, HEARTBEAT_TIMEOUT, waits_for_cancellation=True)


def tool_call(limits: RunLimits, timeout: timedelta | None, retry: RetryPolicy | None) -> Options:
    """RUN_TOOL and CALL_MCP_TOOL: the tool's own timeout and retry policy, else the run's
    tool timeout and TOOL_RETRY."""
    start_to_close = timeout or timedelta(seconds=limits.tool_timeout_seconds)
    return Options(
        start_to_close, retry or TOOL_RETRY, HEARTBEAT_TIMEOUT, waits_for_cancellation=True
    )


def evaluation(timeout: timedelta) -> Options:
    """EVALUATE_CALL: the evaluator's declared timeout, five attempts."""
    return Options(timeout, RetryPolicy(maximum_attempts=5))
