from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agents.runtime.settings import Settings
from tests.console.browser import launched
from tests.console.live import LiveConsole, live_console


@pytest.fixture
async def console(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Worker
) -> AsyncIterator[LiveConsole]:
    async with live_console(settings, dev_env.client) as served:
        yield served


@pytest.fixture(scope="session")
async def chromium() -> AsyncIterator[Browser]:
    async for launched_browser in launched():
        yield launched_browser


@pytest.fixture
async def browser(chromium: Browser) -> AsyncIterator[Browser]:
    """The session's Chromium; the contexts (pages, live streams) a test opened are closed
    after it, so none keeps polling on the event loop the later tests share."""
    yield chromium
    for context in list(chromium.contexts):
        await context.close()
