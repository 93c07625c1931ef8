"""Two builds of the workers side by side on the dev server, as a deploy meets them: runs
stay on the build that started them, a release is gated by replaying real histories on
the new code, and a run moves only when its history replays where it goes."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_agents.control import release, runs
from durable_agents.control.doctor import diagnose
from durable_agents.control.release import ReleaseError, ReleaseRefused
from durable_agents.infra.stack import polling_builds, worker_polling
from durable_agents.runtime import versioning
from durable_agents.runtime.settings import Settings
from durable_agents.worker.main import build_worker
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from tests.conftest import eventually, wait_for_approval
from tests.release.builds import WAIT, PatchedStart, UnpatchedStart

PAY = RunRequest(goal="pay the invoice", agent="invoice", label="pay-invoice")


def of_build(settings: Settings, deployment: str, build: str) -> Settings:
    return settings.model_copy(update={"deployment": deployment, "build_id": build})


async def pinned_to(client: Client, rid: str) -> str:
    described = await client.get_workflow_handle(rid).describe()
    info = described.raw_description.workflow_execution_info
    override = info.versioning_info.versioning_override.pinned.version.build_id
    return override or info.versioning_info.deployment_version.build_id


async def first_command(client: Client, rid: str) -> int:
    """The event of a run's first command: the one after its first completed workflow
    task (a task that timed out on a loaded machine comes before it)."""
    history = await client.get_workflow_handle(rid).fetch_history()
    done = next(
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    )
    return done + 1


async def start_waiting(client: Client, settings: Settings, prefix: str) -> str:
    rid = f"{prefix}-{uuid.uuid4().hex[:8]}"
    await runs.start_run(client, settings, PAY, rid)
    await wait_for_approval(client, rid)
    return rid


async def finish(client: Client, rid: str) -> None:
    """Approve and wait: the run completes, and never failed a workflow task on the way
    (a nondeterminism error is a failed workflow task)."""
    await runs.approve(client, rid, Decision(by="alice"))
    result = await runs.wait_result(client, rid)
    assert result.status == "completed", result
    history = await client.get_workflow_handle(rid).fetch_history()
    failed = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    assert failed == [], failed


def settle_timers(history) -> int:
    """The timers only the changed build starts (an approval's deadline is a timer too)."""
    return sum(
        1
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        and e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta() == WAIT
    )


async def polled(client: Client, settings: Settings, build: str) -> None:
    """Temporal has seen the build's workers poll (it learns of a build that way)."""

    async def seen() -> bool:
        return build in {b.build for b in (await release.status(client, settings)).builds}

    await eventually(seen)


async def listed(client: Client, settings: Settings, running: int, closed: int) -> None:
    """Visibility has caught up with the runs a check will list."""
    base = f"WorkflowType = 'AgentWorkflow' AND TaskQueue = '{settings.task_queue}' AND "

    async def counts() -> bool:
        open_now = await client.count_workflows(base + "ExecutionStatus = 'Running'")
        closed_now = await client.count_workflows(base + "ExecutionStatus != 'Running'")
        return (open_now.count, closed_now.count) == (running, closed)

    await eventually(counts)


async def test_an_unpatched_build_is_refused_and_forced_it_leaves_old_runs_on_theirs(
    dev_env, settings
):
    client = dev_env.client
    deployment = f"rel-{uuid.uuid4().hex[:8]}"
    a, b = of_build(settings, deployment, "a"), of_build(settings, deployment, "b")
    async with build_worker(client, a, workflows=[AgentWorkflow]):
        assert await versioning.current_build(client, deployment) == "a"  # the first build
        done = await start_waiting(client, a, "done")
        await finish(client, done)
        waiting = await start_waiting(client, a, "waiting")
        stays = await start_waiting(client, a, "stays")
        assert await pinned_to(client, waiting) == "a"
        await listed(client, a, running=2, closed=1)

        async with build_worker(client, b, workflows=[UnpatchedStart]):
            report = await release.check_runs(client, b, workflows=[UnpatchedStart])
            assert report.build == "b"
            assert {r.run_id for r in report.runs} == {done, waiting, stays}
            assert {r.run_id for r in report.diverging} == {done, waiting, stays}
            for run in report.diverging:
                # Build a's first command records a marker (the opening's patch); b's is
                # its timer.
                assert run.verdict.event_id == await first_command(client, run.run_id)
                assert run.verdict.event_type == "MarkerRecorded", run
                assert run.build == "a" and run.agent == "invoice"
                assert "Nondeterminism" in run.verdict.message or "nondeterminism" in (
                    run.verdict.message
                )
            assert run.where == f"event {await first_command(client, run.run_id)} (MarkerRecorded)"

            with pytest.raises(ReleaseRefused) as refused:
                await release.promote(client, b, "b", workflows=[UnpatchedStart])
            assert "3 runs would diverge on build b" in str(refused.value)
            assert await versioning.current_build(client, deployment) == "a"
            # Nor may a run move there.
            with pytest.raises(ReleaseError, match="would diverge on build b at event"):
                await release.move(client, b, stays, "b", workflows=[UnpatchedStart])
            assert await pinned_to(client, stays) == "a"

            # Forced: new runs go to b, the runs of a finish on a.
            assert await release.promote(client, b, "b", force=True) is None
            assert await versioning.current_build(client, deployment) == "b"
            new = await start_waiting(client, b, "new")
            assert await pinned_to(client, new) == "b"
            for rid in (waiting, stays, new):
                await finish(client, rid)
            old_history = await client.get_workflow_handle(waiting).fetch_history()
            new_history = await client.get_workflow_handle(new).fetch_history()
            assert settle_timers(old_history) == 0 and settle_timers(new_history) == 1
            assert await pinned_to(client, waiting) == "a"

            status = await release.status(client, b)
            builds = {s.build: s for s in status.builds}
            assert status.current == "b" and list(builds) == ["a", "b"]
            assert builds["a"].open_runs == 0 and builds["a"].retirable
            assert builds["b"].state == "current" and not builds["b"].retirable
            assert builds["b"].here and not builds["a"].here


async def test_a_patched_build_passes_is_promoted_and_runs_move_to_it(dev_env, settings):
    client = dev_env.client
    deployment = f"rel-{uuid.uuid4().hex[:8]}"
    a, c = of_build(settings, deployment, "a"), of_build(settings, deployment, "c")
    async with build_worker(client, a, workflows=[AgentWorkflow]):
        done = await start_waiting(client, a, "done")
        await finish(client, done)
        stays = await start_waiting(client, a, "stays")
        moves = await start_waiting(client, a, "moves")
        await listed(client, a, running=2, closed=1)

        async with build_worker(client, c, workflows=[PatchedStart]):
            await polled(client, c, "c")
            # Promoting from where another build's code is installed is refused.
            with pytest.raises(ReleaseError, match="the code installed here is build a"):
                await release.promote(client, a.model_copy(update={"build_id": "a"}), "c")
            with pytest.raises(ReleaseError, match="no worker of build z has polled"):
                await release.promote(client, c, "z")

            seen: list[str] = []
            report = await release.promote(
                client,
                c,
                "c",
                workflows=[PatchedStart],
                progress=lambda r, n: seen.append(r.run_id),
            )
            assert report is not None and report.ok and len(report.runs) == 3
            assert sorted(seen) == sorted([done, stays, moves])
            assert await versioning.current_build(client, deployment) == "c"
            with pytest.raises(ReleaseError, match="already current"):
                await release.promote(client, c, "c", workflows=[PatchedStart])

            new = await start_waiting(client, c, "new")
            assert await pinned_to(client, new) == "c"

            moved = await release.move(client, c, moves, "c", workflows=[PatchedStart])
            assert moved.verdict.ok and moved.build == "a"
            assert await pinned_to(client, moves) == "c"
            for refused_move, says in (
                ((done, "c"), "is completed: only an open run can move"),
                ((moves, "c"), "already on build c"),
                ((stays, "nowhere"), "no worker of build nowhere"),
                (("nobody-ran-this", "c"), "no run with id nobody-ran-this"),
            ):
                with pytest.raises(ReleaseError, match=says):
                    await release.move(client, c, *refused_move, workflows=[PatchedStart])

            for rid in (stays, moves, new):
                await finish(client, rid)
            assert await pinned_to(client, stays) == "a"
            # The moved run's rest ran on c's code: a patched path replays an old history
            # as it was, so no timer; the new run took the patched path.
            moved_history = await client.get_workflow_handle(moves).fetch_history()
            new_history = await client.get_workflow_handle(new).fetch_history()
            assert settle_timers(moved_history) == 0 and settle_timers(new_history) == 1

            await listed(client, c, running=0, closed=4)
            status = await release.status(client, c)
            builds = {s.build: s for s in status.builds}
            assert builds["a"].retirable and builds["a"].state != "current"
            assert not builds["c"].retirable


async def test_the_local_stack_releases_its_new_build_and_moves_runs_that_replay(dev_env, settings):
    """`agentctl up` after a code change: one worker, of the new code; the old build's
    runs move to it when their histories replay there, else nothing changes."""
    client = dev_env.client
    for old_code, releases in ((AgentWorkflow, True), (UnpatchedStart, False)):
        deployment = f"local-{uuid.uuid4().hex[:8]}"
        own = settings.model_copy(update={"task_queue": deployment})
        old = of_build(own, deployment, "old")
        here = own.model_copy(update={"deployment": deployment})
        async with build_worker(client, old, workflows=[old_code]):
            waiting = await start_waiting(client, old, "waiting")
        said: list[str] = []
        async with build_worker(client, here):
            new_build = versioning.build_id(here)
            await polled(client, here, new_build)
            await listed(client, here, running=1, closed=0)
            await release.adopt_local_build(client, here, said.append)
            [line] = said
            current = await versioning.current_build(client, deployment)
            if releases:
                assert line.startswith(f"worker: build {new_build} released (was old)"), line
                assert "moved 1 open runs" in line
                assert current == new_build and await pinned_to(client, waiting) == new_build
                [finding] = await diagnose(here, only={"worker"})
                assert finding.ok and f"new runs start on {new_build}" in finding.says
                await finish(client, waiting)
            else:
                assert line.startswith(f"worker: build {new_build} NOT released"), line
                history = await client.get_workflow_handle(waiting).fetch_history()
                timer = next(
                    e.event_id
                    for e in history.events
                    if e.HasField("timer_started_event_attributes")
                )
                assert f"{waiting} at event {timer} (TimerStarted)" in line  # the old code's timer
                assert current == "old" and await pinned_to(client, waiting) == "old"
                await client.get_workflow_handle(waiting).terminate("test over")


async def test_up_waits_for_its_new_workers_first_poll_before_it_releases(dev_env, settings):
    """The upgrade race: runs left waiting by the previous release, its worker stopped, and
    `agentctl up` of this release asks to release before its new worker has polled. It
    waits (bounded) for that first poll, then releases and moves the runs: one `up` is
    enough. With no new worker within the bound it releases nothing and says so."""
    client = dev_env.client
    deployment = f"race-{uuid.uuid4().hex[:8]}"
    own = settings.model_copy(update={"task_queue": deployment})
    old = of_build(own, deployment, "old")
    here = own.model_copy(update={"deployment": deployment})
    async with build_worker(client, old):
        waiting = await start_waiting(client, old, "race")
    await listed(client, here, running=1, closed=0)
    new_build = versioning.build_id(here)
    # The old build's stopped worker is still listed as polling: not a worker of ours.
    assert "old" in await polling_builds(here)
    assert not await worker_polling(here)
    said: list[str] = []
    await release.adopt_local_build(client, here, said.append, first_poll_within=0.5)
    assert said[-1].startswith(f"worker: build {new_build} NOT released: no worker of it")
    assert await versioning.current_build(client, deployment) == "old"

    said.clear()
    asked_to_wait = asyncio.Event()

    def say(line: str) -> None:
        said.append(line)
        if "first poll" in line:
            asked_to_wait.set()

    adopting = asyncio.create_task(release.adopt_local_build(client, here, say))
    # Made to happen, not hoped for: the release is waiting before the worker starts.
    await asyncio.wait_for(asked_to_wait.wait(), 60)
    async with build_worker(client, here):
        await asyncio.wait_for(adopting, 120)
        assert said[0] == f"worker: waiting for build {new_build}'s first poll (at most 60 s)"
        assert said[-1].startswith(f"worker: build {new_build} released (was old)"), said
        assert "moved 1 open runs" in said[-1]
        assert await pinned_to(client, waiting) == new_build
        await finish(client, waiting)


async def test_doctor_names_a_current_build_that_no_worker_serves(dev_env, settings):
    """A deployment whose current build has no worker (its pods were replaced by a rolling
    update, say): new runs would wait forever, and the doctor says so."""
    client = dev_env.client
    deployment = f"ghost-{uuid.uuid4().hex[:8]}"
    own = settings.model_copy(update={"task_queue": deployment, "deployment": deployment})
    await versioning.set_current(client, deployment, "gone", by="test")  # no worker, ever
    async with build_worker(client, of_build(own, deployment, "live")):
        await polled(client, own, "live")

        async def listed_as_polling() -> bool:  # the task queue's own view, the doctor's
            return "live" in await polling_builds(own)

        await eventually(listed_as_polling)
        [finding] = await diagnose(own, only={"worker"})
    assert not finding.ok
    assert finding.says.startswith("new runs start on build gone, which no worker polls")
    assert "(workers poll: live)" in finding.says and "start workers of gone" in finding.fix
