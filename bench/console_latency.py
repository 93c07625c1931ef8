"""The console's two figures (docs/console.md): the inbox's response time with 200 runs
waiting, and the delay from an approval click to the run page showing the next moment.

    python -m bench.console_latency [--runs 200] [--clicks 5]

Everything is real and local: a dev server, the offline model over HTTP, our worker, the
console served by uvicorn, and (for the clicks) Debian's Chromium driven by Playwright.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from bench.harness import Bench, bench_stack
from durable_agents.console import users
from durable_agents.console.app import create_app
from durable_agents.console.serving import serving
from durable_agents.control import runs
from durable_agents.starters.demo import DEMO_GOAL
from durable_agents.workflows.contracts import RunRequest

PASSWORD = "bench-password"


@asynccontextmanager
async def served_console(bench: Bench) -> AsyncIterator[str]:
    users.add_user(bench.settings.console_users_path, "bench", PASSWORD)
    async with serving(create_app(bench.settings, bench.client)) as url:
        yield url


async def start_waiting_runs(bench: Bench, count: int) -> list[str]:
    gate = asyncio.Semaphore(20)
    ids = [f"inbox-{i:04d}" for i in range(count)]

    async def start(rid: str) -> None:
        async with gate:
            request = RunRequest(goal=DEMO_GOAL, agent="invoice", label="pay-invoice")
            await runs.start_run(bench.client, bench.settings, request, rid)

    await asyncio.gather(*(start(rid) for rid in ids))
    waiting = runs.list_waiting
    while len(await waiting(bench.client, ("approval",), limit=count + 10)) < count:  # noqa: ASYNC110
        await asyncio.sleep(0.5)  # visibility is polled: it pushes nothing
    return ids


async def sign_in(http: httpx.AsyncClient) -> None:
    page = (await http.get("/login")).text
    token = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    form = {"csrf": token, "name": "bench", "password": PASSWORD}
    assert (await http.post("/login", data=form)).status_code == 303


async def inbox_times(url: str, count: int, repeats: int = 5) -> tuple[float, list[float]]:
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        await sign_in(http)
        times = []
        for _ in range(repeats + 1):
            began = time.perf_counter()
            page = await http.get("/")
            times.append(time.perf_counter() - began)
            shown = page.text.count('class="card item"')
            assert shown >= count, f"the inbox shows {shown} approvals, not {count}"
        return times[0], times[1:]


async def click_delays(url: str, run_ids: list[str]) -> list[float] | None:
    chromium = shutil.which("chromium")
    if chromium is None:
        return None
    from playwright.async_api import async_playwright, expect

    delays = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium, args=["--no-sandbox", "--disable-gpu"]
        )
        page = await browser.new_page(base_url=url)
        await page.goto("/login")
        await page.get_by_label("Name").fill("bench")
        await page.get_by_label("Password").fill(PASSWORD)
        await page.get_by_role("button", name="Sign in").click()
        await page.wait_for_url(f"{url}/")
        for rid in run_ids:
            await page.goto(f"/runs/{rid}")
            await expect(page.locator("#timeline")).to_contain_text("approval requested")
            approved = page.locator("#timeline li.k-approved")
            began = time.perf_counter()
            await page.get_by_role("button", name="Approve").click()
            await expect(approved).to_have_count(1, timeout=30_000)
            delays.append(time.perf_counter() - began)
        await browser.close()
    return delays


async def main(count: int, clicks: int) -> None:
    async with bench_stack() as bench, served_console(bench) as url:
        print(f"starting {count} pay-invoice runs and waiting for their approvals …", flush=True)
        began = time.perf_counter()
        ids = await start_waiting_runs(bench, count)
        print(f"  {count} runs waiting after {time.perf_counter() - began:.1f} s")
        cold, warm = await inbox_times(url, count)
        print(f"inbox, {count} runs waiting: first load {cold * 1000:.0f} ms (a query per run)")
        print(
            f"inbox, {count} runs waiting: then median {statistics.median(warm) * 1000:.0f} ms, "
            f"max {max(warm) * 1000:.0f} ms over {len(warm)} loads"
        )
        delays = await click_delays(url, ids[:clicks])
        if delays is None:
            print("click to update: skipped (no chromium; apt-get install chromium)")
            return
        print(
            f"click to update (Approve → the 'approved' moment on the page), {len(delays)} "
            f"clicks: median {statistics.median(delays) * 1000:.0f} ms, "
            f"max {max(delays) * 1000:.0f} ms"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--clicks", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.clicks))
