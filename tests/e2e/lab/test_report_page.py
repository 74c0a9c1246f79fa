"""The Quality Lab HTML report in a real headless Chromium, opened from a file as a user
would: it loads nothing but itself, runs no script, breaks no policy, and draws the chart
bars and one section per result that the report holds.

The page is saved as ``test-artifacts/lab/report.png`` (beside the console's screenshots:
``LLAMON_TEST_ARTIFACTS`` moves both) and, with ``LLAMON_WRITE_DOC_SCREENSHOT=1``, as the
docs' figure ``docs/img/quality-lab-report.png``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, ConsoleMessage, FloatRect, Page, Request, expect

from llamon_agent.lab.reports import case_chart, fault_chart, write_reports
from tests._support.browser import chromium, screenshot_dir
from tests.lab.test_reports import SCRIPT_NAME, sample_report

WAIT = 15_000  # ms: the longest any expectation waits
DOC_FIGURE = Path(__file__).resolve().parents[3] / "docs" / "img" / "quality-lab-report.png"


def _artifacts() -> Path:
    folder = screenshot_dir().parent / "lab"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as started:
        yield started


async def test_the_report_page_renders_offline_with_its_chart_and_sections(
    browser: Browser, tmp_path: Path
) -> None:
    report = sample_report()
    path = write_reports(report, html=tmp_path / "report.html")["html"]
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page: Page = await context.new_page()
    page.set_default_timeout(WAIT)
    errors: list[str] = []
    requested: list[str] = []

    def note(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)

    def fetched(request: Request) -> None:
        requested.append(request.url)

    page.on("console", note)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", fetched)
    try:
        url = path.as_uri()
        await page.goto(url)
        await expect(page.locator("h1")).to_have_text("Quality Lab report")
        await expect(page.locator("#verdict")).to_have_text("FAILED")
        counts = page.locator("#counts .count")
        await expect(counts).to_have_text(
            ["2passed", "3failed", "1refused", "1error", "1shadow (not counted)"]
        )

        # the bars: one per (row, outcome and reason), as many as the chart data has
        by_case, by_fault = case_chart(report), fault_chart(report)
        case_bars = page.locator("#chart-cases rect.bar")
        fault_bars = page.locator("#chart-faults rect.bar")
        await expect(case_bars).to_have_count(sum(len(r.segments) for r in by_case.rows))
        await expect(fault_bars).to_have_count(sum(len(r.segments) for r in by_fault.rows))
        drawn = await page.eval_on_selector_all(
            "#chart-cases g.row",
            """rows => rows.map(row => ({
                label: row.dataset.label,
                counts: [...row.querySelectorAll('rect.bar')].map(b => +b.dataset.count),
                width: [...row.querySelectorAll('rect.bar')]
                    .reduce((sum, b) => sum + b.getBoundingClientRect().width, 0),
            }))""",
        )
        assert [(row["label"], sum(row["counts"])) for row in drawn] == [
            (row.label, row.total) for row in by_case.rows
        ]
        # drawn widths are proportional to the totals (slow-search ran twice)
        unit = drawn[0]["width"] / by_case.rows[0].total
        assert unit > 100
        for row, chart_row in zip(drawn, by_case.rows, strict=True):
            assert row["width"] == pytest.approx(unit * chart_row.total, rel=0.02)
        await expect(page.locator("#chart-faults g.row")).to_have_count(len(by_fault.rows))

        # one section per result, in order, the markup name shown as text
        sections = page.locator("section.case")
        await expect(sections).to_have_count(len(report.results))
        await expect(sections.locator(".case-name")).to_have_text(
            [f"{r.case} [repeat {r.repeat}]" if r.repeat else r.case for r in report.results]
        )
        await expect(page.locator("section.case .case-name").nth(6)).to_have_text(SCRIPT_NAME)
        assert await page.locator("script").count() == 0
        await expect(page.locator("#summary tbody tr")).to_have_count(7)
        await expect(page.locator("section.case.shadow")).to_have_count(1)

        # events are folded away until opened
        events = page.locator("#case-1 details.events")
        await expect(events.locator("pre")).to_be_hidden()
        await events.locator("summary").click()
        await expect(events.locator("pre")).to_contain_text('"tool": "getOrderDetail"')
        await events.locator("summary").click()

        # nothing but the file itself was loaded; no script ran, no policy was broken
        assert requested == [url]
        assert errors == []

        await page.screenshot(path=str(_artifacts() / "report.png"), full_page=True)
        if os.environ.get("LLAMON_WRITE_DOC_SCREENSHOT") == "1":
            DOC_FIGURE.parent.mkdir(parents=True, exist_ok=True)
            # the same report against a plain target: header, charts and summary
            report.target = "http://127.0.0.1:8000"
            await page.goto(write_reports(report, html=tmp_path / "doc.html")["html"].as_uri())
            await expect(page.locator("#target")).to_have_text(report.target)
            top: FloatRect = {"x": 0, "y": 0, "width": 1280, "height": 1040}
            await page.screenshot(path=str(DOC_FIGURE), full_page=True, clip=top)
    finally:
        await context.close()
