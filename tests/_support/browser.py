"""A real headless Chromium (the system's ``chromium``) driven by Playwright over CDP.

``async with chromium() as browser`` starts ``chromium --headless=new
--remote-debugging-port=0`` with a fresh profile, reads the DevTools address it prints,
connects Playwright to it (``connect_over_cdp``: no browser download), and stops it after.
No chromium on this machine is a test failure naming the fix, never a skip.
``screenshot_dir()`` is where pages are saved: ``LLAMON_TEST_ARTIFACTS`` or
``test-artifacts/console`` at the repository root.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright

__all__ = ["chromium", "chromium_executable", "screenshot_dir"]

ROOT = Path(__file__).resolve().parents[2]
_DEVTOOLS = re.compile(r"DevTools listening on (ws://\S+)")


def screenshot_dir() -> Path:
    """Where the browser tests save their screenshots (created)."""
    configured = os.environ.get("LLAMON_TEST_ARTIFACTS", "").strip()
    folder = Path(configured) / "console" if configured else ROOT / "test-artifacts" / "console"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def chromium_executable(name: str = "chromium", fallback: Path = Path("/usr/bin/chromium")) -> str:
    """The Chromium to start: ``name`` on the PATH, else ``fallback``; a failed test
    naming ``apt-get install chromium`` when neither exists."""
    found = shutil.which(name) or (str(fallback) if fallback.exists() else None)
    if found is None:
        pytest.fail(
            "the browser tests need Chromium: apt-get install chromium "
            "(Debian's package; Playwright's own browser download is not used)"
        )
    return found


async def _devtools_url(stderr: asyncio.StreamReader) -> str:
    while True:
        line = await stderr.readline()
        if not line:
            raise RuntimeError("chromium exited before it listened for DevTools")
        found = _DEVTOOLS.search(line.decode(errors="replace"))
        if found:
            return found.group(1)


async def _drain(stderr: asyncio.StreamReader) -> None:
    while await stderr.readline():
        pass


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A connected headless Chromium; stopped (and its profile removed) afterwards."""
    executable = chromium_executable()
    profile = tempfile.mkdtemp(prefix="llamon-chromium-")
    process = await asyncio.create_subprocess_exec(
        executable,
        "--headless=new",
        "--remote-debugging-port=0",
        f"--user-data-dir={profile}",
        "--no-sandbox",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "about:blank",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    drain: asyncio.Task[None] | None = None
    try:
        url = await asyncio.wait_for(_devtools_url(process.stderr), timeout=60)
        drain = asyncio.create_task(_drain(process.stderr))  # a full pipe would stall it
        async with async_playwright() as playwright:
            browser = await playwright.chromium.connect_over_cdp(url)
            try:
                yield browser
            finally:
                await browser.close()
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), timeout=10)
            except TimeoutError:
                process.kill()
                await process.wait()
        if drain is not None:
            drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drain
        shutil.rmtree(profile, ignore_errors=True)
