"""The ways a run begins, one module each; workflows/admission.py's table (`ADMISSION`)
gives each `Beginning` the check that admits it, and `AgentWorkflow.run` calls that one.

    start.py      what every beginning is handed (`Start`, a part of the run) and the
                  opening all but a continuation share: held to its queue, its identity
    adopting.py   a new run's agent recorded: its policy, figures, MCP tools and memory
    fresh.py      a fresh start; a cron run, a retry run, a shadow and a Schedule's run
                  are admitted as one
    continued.py  a continue-as-new: the chain's previous run shows it
    child.py      a sub-agent and a `run_agent` child: its parent shows it
    fork.py       a fork: its state, decided in __init__, and its parent's record
    shadow.py     what holds a what-if shadow (and nothing else) to a what-if queue
    scheduled.py  what shows a Schedule started the run its grant names

Here only what the admission and the run context both need, so this package's own
modules and workflows/phases/ can import it without an import circle."""

from __future__ import annotations

from enum import StrEnum

from temporalio import workflow

from durable_agents.workflows.records import IDENTITY_SEPARATOR

AGENT_WORKFLOW = "AgentWorkflow"
# Temporal's retention removed what a run needs shown: what an operator does about it.
RETENTION_ADVICE = (
    "if Temporal's retention removed it, fork this run from its last moment "
    "(agentctl fork) and raise the namespace's retention above the longest a run waits"
)


class Beginning(StrEnum):
    """The ways a run of ours comes about."""

    FRESH = "fresh start"
    CONTINUED = "continue-as-new"
    CRON = "cron run"
    RETRY = "retry run"
    CHILD = "sub-agent"
    RUN_AGENT = "run_agent"
    FORK = "fork"
    SHADOW = "what-if shadow"
    SCHEDULED = "Schedule's run"


def own_identity(info: workflow.Info) -> str:
    """Who owns a run's stored data: the workflow id with the first execution's run id,
    which continue-as-new and reset keep and a reused workflow id does not (invariant 9)."""
    return f"{info.workflow_id}{IDENTITY_SEPARATOR}{info.first_execution_run_id}"
