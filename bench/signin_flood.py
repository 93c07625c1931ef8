"""The console under a flood of sign-ins (docs/console.md): 200 attempts in flight at
once, while a person's page polls /health and watches a run's live stream. The password
check runs off the event loop, a few at a time, so both keep answering.

    python -m bench.signin_flood [--attempts 200]

Everything is real and local: a dev server, our worker, the console served by uvicorn.
The per-address throttle is raised for the measure (every attempt comes from 127.0.0.1 and
would otherwise be refused at once, which proves nothing about the event loop); the
throttled figure is printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx
from temporalio.client import Client

from bench.console_latency import PASSWORD, sign_in
from bench.harness import Bench, bench_stack
from durable_agents.console import users
from durable_agents.console.app import create_app
from durable_agents.console.serving import serving
from durable_agents.control import runs
from durable_agents.starters.demo import DEMO_GOAL
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor


async def flood(url: str, attempts: int) -> list[int]:
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        page = (await http.get("/login")).text
        token = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]

        async def attempt(n: int) -> int:
            form = {"csrf": token, "name": f"guesser-{n}", "password": "not-a-password"}
            return (await http.post("/login", data=form)).status_code

        return await asyncio.gather(*(attempt(n) for n in range(attempts)))


async def health_times(url: str, until: asyncio.Event) -> list[float]:
    times = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        while not until.is_set():
            began = time.perf_counter()
            assert (await http.get("/health")).status_code == 200
            times.append(time.perf_counter() - began)
            await asyncio.sleep(0.05)
    return times


async def stream_delay(url: str, rid: str, client: Client, started: asyncio.Event) -> float:
    """From a pause sent mid-flood to its moment arriving on an open live stream."""
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        await sign_in(http)
        async with http.stream("GET", f"/runs/{rid}/events") as stream:
            lines = stream.aiter_lines()
            async for line in lines:  # the stream is open once it says anything
                if line.startswith("data:"):
                    break
            await started.wait()
            await asyncio.sleep(0.2)
            began = time.perf_counter()
            await runs.pause(client, rid, Actor(by="bench"))
            async for line in lines:
                if "pause requested" in line:
                    return time.perf_counter() - began
    raise RuntimeError("the stream closed before the pause arrived")


async def measure(bench: Bench, attempts: int, per_address: int) -> None:
    settings = bench.settings.model_copy(
        update={"console_signin_per_address_per_minute": per_address}
    )
    rid = f"flood-{per_address}"
    request = RunRequest(goal=DEMO_GOAL, agent="invoice", label="pay-invoice")
    await runs.start_run(bench.client, bench.settings, request, rid)
    async with serving(create_app(settings, bench.client)) as url:
        done, started = asyncio.Event(), asyncio.Event()
        health = asyncio.create_task(health_times(url, done))
        watching = asyncio.create_task(stream_delay(url, rid, bench.client, started))
        await asyncio.sleep(1.0)
        began = time.perf_counter()
        started.set()
        codes = await flood(url, attempts)
        took = time.perf_counter() - began
        delay = await watching
        done.set()
        times = await health
    refused = codes.count(429)
    label = "throttle raised" if per_address >= attempts else f"throttle {per_address}/min"
    print(
        f"{label}: {attempts} sign-ins in {took:.1f} s ({codes.count(401)} checked, "
        f"{refused} throttled); /health median {statistics.median(times) * 1000:.0f} ms, "
        f"max {max(times) * 1000:.0f} ms over {len(times)} calls; live stream: the pause "
        f"arrived {delay * 1000:.0f} ms after it was sent"
    )
    await runs.cancel(bench.client, rid, Actor(by="bench"))


async def main(attempts: int) -> None:
    async with bench_stack() as bench:
        users.add_user(bench.settings.console_users_path, "bench", PASSWORD)
        await measure(bench, attempts, per_address=attempts * 10)
        await measure(bench, attempts, per_address=30)


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--attempts", type=positive, default=200)
    asyncio.run(main(parser.parse_args().attempts))
