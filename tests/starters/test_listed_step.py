"""`agentctl list` reads the step from a search attribute set on changes of status: exact
for a waiting or closed run, a lower bound for a running one, and it says so. A running
run held up by the replica holding its store being gone says that where a waiting run
says what it waits for."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from durable_agents.control.runs import RunListing
from durable_agents.starters.render import listed_step, runs_table


def listing(status: str, step: int | None) -> RunListing:
    return RunListing(
        run_id="r",
        status=status,
        step=step,
        waiting_for="",
        temporal_status="running",
        started_at="2026-12-04T00:00:00+00:00",
    )


def test_a_running_run_reads_from_its_step_on_and_others_exactly():
    assert listed_step(listing("running", 3)) == "3+"
    assert listed_step(listing("awaiting_approval", 3)) == "3"
    assert listed_step(listing("completed", 7)) == "7"
    assert listed_step(listing("planning", 0)) == ""
    assert listed_step(listing("running", None)) == ""


def test_a_run_held_up_by_a_replica_that_is_gone_says_so_in_the_table():
    held = "waiting: the replica holding its store (queue q@0123456789ab) is not polling"
    gone = dataclasses.replace(listing("running", 2), held_up=held)
    console = Console(width=300, record=True)
    console.print(runs_table([gone]))
    assert held in console.export_text()
