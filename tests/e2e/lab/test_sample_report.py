"""The sample report the docs ship: a real lab run of the bookshop sample cases, plus three
cases that show what a failure looks like, against the bookshop example agent -- rendered
in headless Chromium.

With ``LLAMON_WRITE_DOC_SCREENSHOT=1`` the run rewrites ``docs/lab-report-sample.html`` and
the docs' figure ``docs/img/quality-lab-report.png`` (the top of the page).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, FloatRect, expect

from llamon_agent.examples.bookshop_agent import agent, card
from llamon_agent.lab import Case, LabReport, load_cases
from llamon_agent.lab.reports import fault_chart, write_reports
from llamon_agent.lab.runner import Lab
from tests._support.browser import chromium, screenshot_dir

DOCS = Path(__file__).resolve().parents[3] / "docs"
SAMPLE = DOCS / "lab-report-sample.html"
FIGURE = DOCS / "img" / "quality-lab-report.png"
WAIT = 15_000

FAILING: list[dict[str, Any]] = [
    {  # the model looks the title up first: a wrong expectation fails, saying so
        "name": "bookshop-price-lookup-expects-a-search",
        "mode": "execute",
        "query": 'How much is "Dune"?',
        "assertions": {"selected_target": "search_books", "final_state": "completed"},
        "tags": ["bookshop", "sample-failure"],
    },
    {  # an order without cleanup: refused before the order is placed
        "name": "bookshop-order-without-cleanup",
        "mode": "execute",
        "query": "Order one copy of Dune.",
        "tags": ["bookshop", "sample-failure"],
    },
    {  # the lookup crashes on the server: an unmapped error never passes silently
        "name": "bookshop-lookup-crashes",
        "mode": "execute",
        "query": "Tell me about Dune.",
        "faults": [{"kind": "tool_raises", "tool": "get_book"}],
        "tags": ["bookshop", "sample-failure"],
    },
]


async def sample_run() -> LabReport:
    cases = load_cases(DOCS / "lab-cases" / "bookshop.yaml")
    cases += [Case.model_validate(fields) for fields in FAILING]
    async with Lab(agent, card=card, name="llamon_agent.examples.bookshop_agent:agent") as lab:
        return await lab.run(cases)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as started:
        yield started


async def test_the_sample_report_of_a_real_run(browser: Browser, tmp_path: Path) -> None:
    report = await sample_run()
    outcomes = {result.case: (result.outcome, result.reason_shown) for result in report.results}
    assert outcomes["bookshop-price-lookup-expects-a-search"] == (
        "failed",
        "assertion: selected_target",
    )
    assert outcomes["bookshop-order-without-cleanup"] == ("refused", "cleanup_not_configured")
    assert outcomes["bookshop-lookup-crashes"][0] == "failed"
    assert report.counts() == {"passed": 6, "failed": 2, "refused": 1, "error": 0}

    path = write_reports(report, html=tmp_path / "report.html")["html"]
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(WAIT)
    try:
        await page.goto(path.as_uri())
        await expect(page.locator("#verdict")).to_have_text("FAILED")
        await expect(page.locator("section.case")).to_have_count(9)
        kinds = [row.label for row in fault_chart(report).rows]
        await expect(page.locator("#chart-faults g.row")).to_have_count(len(kinds))
        assert {"mcp_connection_drop", "tool_slow", "model_rate_limited", "tool_raises"} <= set(
            kinds
        )
        folder = screenshot_dir().parent / "lab"
        folder.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(folder / "sample-report.png"), full_page=True)
        if os.environ.get("LLAMON_WRITE_DOC_SCREENSHOT") == "1":
            SAMPLE.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
            top: FloatRect = {"x": 0, "y": 0, "width": 1280, "height": 1100}
            await page.screenshot(path=str(FIGURE), full_page=True, clip=top)
    finally:
        await context.close()


def test_the_shipped_sample_report_is_of_the_sample_cases() -> None:
    text = SAMPLE.read_text(encoding="utf-8")
    names = [case.label for case in load_cases(DOCS / "lab-cases" / "bookshop.yaml")]
    names += [str(fields["name"]) for fields in FAILING]
    for name in names:
        assert f">{name}<" in text, name
    assert "<script" not in text
