"""Chromium for the console's browser tests: Debian's package, driven by Playwright (its
driver comes in the wheel; no browser is ever downloaded). Without Chromium the tests
skip with a clear message, unless CI is set: CI installs it (.ci/run) and must run them."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "docs" / "screenshots"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
# What a sandboxed CI machine needs: no sandbox as root, and no calls home (this network
# refuses them, many at a time).
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_or_skip() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("CI is set but no chromium is installed: .ci/run installs Debian's chromium")
    pytest.skip("no Chromium here (apt-get install chromium); browser tests run in CI")


async def launched() -> AsyncIterator[Browser]:
    path = chromium_or_skip()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=path, args=FLAGS)
        try:
            yield browser
        finally:
            await browser.close()


async def shoot(page: Page, name: str, tmp: Path) -> Path:
    """A full-page screenshot: into docs/screenshots with UPDATE_SCREENSHOTS=1 (how the
    README's pictures are made), else beside the test."""
    folder = SCREENSHOTS if os.environ.get("UPDATE_SCREENSHOTS") else tmp
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path
