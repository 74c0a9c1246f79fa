"""The web console in a real headless Chromium, against a real served agent that fails.

Each test drives the pages as an operator would (sign in, filter, open a task, watch the
live table), saves a screenshot of what it saw (``tests/_support/browser.screenshot_dir``),
checks the browser reported no error (a Content-Security-Policy violation included), and
ends by asserting the agent still answers the next A2A request.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, expect

from llamon_agent.a2a.console import ConsoleOptions
from tests._support.a2a_server import running_server
from tests._support.browser import chromium, screenshot_dir
from tests._support.console import (
    KEY,
    PARTIAL_TEXT,
    RATE_ACTION,
    TIMEOUT_ACTION,
    ConsoleTestAgent,
    ask,
    console_app,
    still_answers,
)

WAIT = 15_000  # ms: the longest any expectation waits
expect.set_options(timeout=WAIT)


@dataclass
class Served:
    url: str
    agent: ConsoleTestAgent
    errors: list[str] = field(default_factory=list)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as started:
        yield started


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    agent = ConsoleTestAgent()
    app = console_app(agent, console=ConsoleOptions(refresh_seconds=1))
    async with running_server(app) as url:
        yield Served(url, agent)


@pytest.fixture
async def page(browser: Browser, served: Served) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    opened = await context.new_page()
    opened.set_default_timeout(WAIT)

    def note(message: ConsoleMessage) -> None:
        if message.type == "error":
            served.errors.append(f"{message.text} at {message.location.get('url')}")

    opened.on("console", note)
    try:
        yield opened
    finally:
        await context.close()


async def _sign_in(page: Page, url: str, then: str = "/console") -> None:
    await page.goto(url + then)
    await expect(page).to_have_url(f"{url}/console/login?next={then.replace('/', '%2F')}")
    await page.fill("#credential", KEY)
    await page.click("#sign-in")
    await expect(page).to_have_url(url + then)


async def _shot(page: Page, name: str) -> None:
    await page.screenshot(path=str(screenshot_dir() / f"{name}.png"), full_page=True)


async def test_a_browser_must_sign_in_and_a_wrong_key_is_refused(
    page: Page, served: Served
) -> None:
    await page.goto(served.url + "/console/failures")
    await expect(page).to_have_url(served.url + "/console/login?next=%2Fconsole%2Ffailures")
    await page.fill("#credential", "not-the-key")
    await page.click("#sign-in")
    await expect(page.locator("#login-refused")).to_have_text("That key or token was not accepted.")
    await expect(page.locator("#credential")).to_have_value("")
    await _shot(page, "login-refused")
    await page.fill("#credential", KEY)
    await page.click("#sign-in")
    await expect(page).to_have_url(served.url + "/console/failures")
    await expect(page.locator("h1")).to_have_text("Failures")
    await page.click("form.logout button")
    await expect(page).to_have_url(served.url + "/console/login")
    await page.goto(served.url + "/console")
    await expect(page).to_have_url(served.url + "/console/login?next=%2Fconsole")
    refused = f"status of 401 (Unauthorized) at {served.url}/console/login"
    assert [error for error in served.errors if not error.endswith(refused)] == []
    await still_answers(served.url)


async def test_the_failures_page_shows_a_real_failure_and_its_action(
    page: Page, served: Served
) -> None:
    failed = await ask(served.url, "partial")
    await ask(served.url, "quota")
    await _sign_in(page, served.url, "/console/failures")
    timeout_row = page.locator('#failure-groups tr[data-code="UPSTREAM_TIMEOUT"]')
    await expect(timeout_row).to_have_count(1)
    await expect(timeout_row.locator("td")).to_have_text(
        ["UPSTREAM_TIMEOUT (1)", "timeout", "1", TIMEOUT_ACTION]
    )
    rate_row = page.locator('#failure-groups tr[data-code="RATE_LIMITED"]')
    await expect(rate_row.locator("td")).to_have_text(
        ["RATE_LIMITED (1)", "rate_limited", "1", RATE_ACTION]
    )
    recent = page.locator(f'#recent-failures tr[data-task-id="{failed.id}"]')
    await expect(recent.locator("td").nth(3)).to_have_text("UPSTREAM_TIMEOUT")
    await expect(recent.locator("td").nth(4)).to_have_text("timeout")
    await expect(recent.locator("td").nth(8)).to_have_text(TIMEOUT_ACTION)
    await expect(page.locator("#failure-chart rect.bar")).to_have_count(2)
    await _shot(page, "failures")
    assert served.errors == []
    await still_answers(served.url)


async def test_filtering_by_error_code_swaps_in_only_that_code(page: Page, served: Served) -> None:
    await ask(served.url, "partial")
    await ask(served.url, "quota")
    await _sign_in(page, served.url, "/console/failures")
    await expect(page.locator("#recent-failures tr[data-code]")).to_have_count(2)
    await page.evaluate("window.llamonMarker = 'same page'")  # gone after a full load
    await page.select_option("#code", "RATE_LIMITED")
    await page.click("#apply")
    await expect(page.locator('#failures-body[data-code="RATE_LIMITED"]')).to_have_count(1)
    await expect(page.locator("#recent-failures tr[data-code]")).to_have_count(1)
    await expect(page.locator('#recent-failures tr[data-code="RATE_LIMITED"]')).to_have_count(1)
    await expect(page.locator("#failure-groups tr[data-code]")).to_have_count(1)
    bars = page.locator("#failure-chart rect.bar")
    await expect(bars).to_have_count(1)
    await expect(bars).to_have_attribute("data-code", "RATE_LIMITED")
    await expect(page).to_have_url(served.url + "/console/failures?code=RATE_LIMITED&since=24h")
    assert await page.evaluate("window.llamonMarker") == "same page"  # swapped by htmx
    await _shot(page, "failures-filtered")
    assert served.errors == []
    await still_answers(served.url)


async def test_the_task_page_shows_the_partial_artifact_error_data_and_record(
    page: Page, served: Served
) -> None:
    failed = await ask(served.url, "partial")
    await _sign_in(page, served.url, "/console/failures")
    await page.click(f'#recent-failures a[href="/console/tasks/{failed.id}"]')
    await expect(page).to_have_url(f"{served.url}/console/tasks/{failed.id}")
    await expect(page.locator("#task-state")).to_have_text("failed")
    await expect(page.locator("#artifacts pre.part-text")).to_have_text(PARTIAL_TEXT)
    await expect(page.locator('#error-data tr[data-key="errorCode"] td')).to_have_text(
        "UPSTREAM_TIMEOUT"
    )
    await expect(page.locator('#error-data tr[data-key="errorReason"] td')).to_have_text("timeout")
    await expect(page.locator('#error-data tr[data-key="retriable"] td')).to_have_text("true")
    record = page.locator("#failure-record")
    await expect(record).to_contain_text("The invoice search timed out.")
    await expect(record).to_contain_text(TIMEOUT_ACTION)
    await expect(page.locator('#event-timeline tr[data-type="task.failed"]')).to_have_count(1)
    # a trace id when an OpenTelemetry SDK records in this process (another test may set
    # one), else "-"
    await expect(page.locator("#trace-id")).to_have_text(re.compile(r"^(-|[0-9a-f]{32})$"))
    await _shot(page, "task")
    assert served.errors == []
    await still_answers(served.url)


async def test_the_live_table_shows_a_running_task_until_it_ends(
    page: Page, served: Served
) -> None:
    await _sign_in(page, served.url)
    rows = page.locator("#live-rows tr[data-task-id]")
    await expect(rows).to_have_count(0)
    await expect(page.locator("#live-rows tr.empty")).to_have_text("No task is running.")
    running = asyncio.create_task(ask(served.url, "block"))
    try:
        await asyncio.wait_for(served.agent.started.wait(), timeout=WAIT / 1000)
        await expect(rows).to_have_count(1)  # brought in by the table's own polling
        # the store holds it as submitted: this agent sends no update while it waits
        await expect(rows.locator("td").nth(1)).to_have_text("submitted")
        await _shot(page, "live")
    finally:
        served.agent.release.set()
    task = await asyncio.wait_for(running, timeout=WAIT / 1000)
    assert task.status.state.value == "completed"
    await expect(rows).to_have_count(0)
    assert served.errors == []
    await still_answers(served.url)
