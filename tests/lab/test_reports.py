"""Quality Lab reports from a hand-built ``LabReport``: the JSON round trip, JUnit XML a CI
system reads (structure, counts, escaping), the HTML page (escaped, offline, bars that
match the counts), the summary rows and table, and ``write_reports``."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from llamon_agent.lab.reports import (
    NO_FAULT,
    REPORT_FORMAT,
    case_chart,
    fault_chart,
    html_report,
    junit_xml,
    report_json,
    summary_rows,
    summary_table,
    write_reports,
)
from llamon_agent.lab.results import (
    AssertionResult,
    CaseResult,
    CleanupResult,
    LabReport,
    StepRecord,
)

SCRIPT_NAME = '<script>alert("x")</script> & "quotes"'
TRIAGE = {
    "reason": "auth_failed",
    "symptom": "The downstream API refused the credentials.",
    "lookFirst": "The failure's evidence: which credential was sent <and how>.",
    "fix": "Configure the collection's credentials.",
}


def _event(kind: str, **data: Any) -> dict[str, Any]:
    return {"type": kind, **data}


def sample_report() -> LabReport:
    """Every outcome, faults fired, a shadow case, repetitions, triage and a case whose
    name is markup -- the report the tests and the page screenshot use."""
    auth_failure = {
        "errorCode": "AUTH_REQUIRED",
        "errorReason": "auth_failed",
        "message": "The orders API refused the request.",
        "stage": "tool",
        "retriable": False,
        "incidentId": "inc-7f3a",
    }
    results = [
        CaseResult(
            case="order-detail-without-credentials",
            source="docs/lab-cases/orders.yaml",
            tags=["orders", "auth"],
            outcome="passed",
            task_id="task-1",
            final_state="failed",
            error_code="AUTH_REQUIRED",
            failure_reason="auth_failed",
            incident_id="inc-7f3a",
            failure=auth_failure,
            selected_target="getOrderDetail",
            steps=[StepRecord(1, "getOrderDetail", ok=False, reason="auth_failed")],
            rounds=1,
            duration_ms=412.0,
            assertions=[
                AssertionResult("selected_target", "getOrderDetail", "getOrderDetail", True),
                AssertionResult(
                    "allowed_failure_reasons", ["auth_failed", "http_4xx"], "auth_failed", True
                ),
            ],
            events=[_event("tool_call", round=1, tool="getOrderDetail")],
            event_source="events",
            triage=TRIAGE,
        ),
        CaseResult(
            case="cancel-order",
            source="docs/lab-cases/orders.yaml",
            outcome="failed",
            lab_reason="cleanup_failed",
            message="cleanup step reopenOrder failed",
            final_state="completed",
            selected_target="cancelOrder",
            steps=[StepRecord(1, "cancelOrder", ok=True)],
            rounds=1,
            duration_ms=1530.5,
            artifact_texts=["Order 1042 cancelled."],
            assertions=[AssertionResult("final_state", "completed", "completed", True)],
            cleanup=[CleanupResult("reopenOrder", ok=False, reason="http_5xx")],
            event_source="event_stream",
        ),
        CaseResult(
            case="slow-search",
            source="cases/search.json",
            outcome="failed",
            final_state="failed",
            error_code="UPSTREAM_TIMEOUT",
            failure_reason="tool_timeout",
            incident_id="inc-0b1c",
            failure={"errorCode": "UPSTREAM_TIMEOUT", "errorReason": "tool_timeout"},
            selected_target="searchBooks",
            steps=[StepRecord(1, "searchBooks", ok=False, reason="tool_timeout")],
            duration_ms=2000.0,
            assertions=[
                AssertionResult(
                    "allowed_failure_reasons",
                    ["http_4xx"],
                    "tool_timeout",
                    False,
                    "failed with reason 'tool_timeout', not one of ['http_4xx']",
                ),
                AssertionResult("uncaught_server_error", False, False, True),
            ],
            faults=[{"kind": "tool_timeout", "tool": "searchBooks"}],
            faults_fired={"tool_timeout:searchBooks": 2},
            event_source="tool_results_artifact",
        ),
        CaseResult(
            case="slow-search",
            source="cases/search.json",
            outcome="passed",
            final_state="completed",
            selected_target="searchBooks",
            duration_ms=300.0,
            assertions=[AssertionResult("final_state", "completed", "completed", True)],
            faults=[{"kind": "tool_timeout", "tool": "searchBooks"}],
            faults_fired={"tool_timeout:searchBooks": 1},
            repeat=1,
            event_source="events",
        ),
        CaseResult(
            case="place-order",
            source="cases/search.json",
            outcome="refused",
            lab_reason="cleanup_not_configured",
            message="placeOrder has side effects and the case has no cleanup",
            stopped_before="placeOrder",
            faults=[{"kind": "model_rate_limited", "retry_after_ms": 100}],
            faults_fired={"model_rate_limited:model": 1},
        ),
        CaseResult(
            case="unreachable",
            outcome="error",
            message="the target did not answer",
        ),
        CaseResult(
            case=SCRIPT_NAME,
            source="cases/<odd>.yaml",
            outcome="failed",
            selected_target="deleteOrder",
            message="bad \x1b[31m control \x00 characters",
            assertions=[
                AssertionResult(
                    "selected_target",
                    "getOrder",
                    "<b>deleteOrder</b>",
                    False,
                    "selected '<b>deleteOrder</b>' first, expected 'getOrder'",
                )
            ],
            events=[_event("text", text="</pre><script>alert(1)</script>")],
        ),
        CaseResult(
            case="learned-regression-1",
            outcome="failed",
            failure_reason="http_5xx",
            shadow=True,
            faults_fired={"downstream_unavailable:billing": 1},
        ),
    ]
    return LabReport(
        results=results,
        target="http://user:hunter2@127.0.0.1:8000/?api_key=sk-live-abcdef1234567890",
        started_at=1_790_000_000.0,
        duration_ms=4321.0,
    )


# -- summary ---------------------------------------------------------------------------------


def test_summary_rows_group_counted_results_by_outcome_then_frequency() -> None:
    assert summary_rows(sample_report()) == [
        ("passed", "", 1),
        ("passed", "auth_failed", 1),
        ("failed", "assertion: selected_target", 1),
        ("failed", "cleanup_failed", 1),
        ("failed", "tool_timeout", 1),
        ("refused", "cleanup_not_configured", 1),
        ("error", "", 1),
    ]
    assert summary_rows(LabReport()) == []


def test_summary_table_renders_counts_and_the_shadow_caption() -> None:
    console = Console(record=True, width=120, color_system=None)
    console.print(summary_table(sample_report()))
    text = console.export_text()
    assert "7 result(s): 2 passed, 3 failed, 1 refused, 1 error" in text
    assert "1 shadow result(s) not counted" in text
    rows = [line for line in text.splitlines() if "cleanup_not_configured" in line]
    assert [cell.strip() for cell in rows[0].strip("│ ").split("│")] == [
        "refused",
        "cleanup_not_configured",
        "1",
    ]
    assert sum(1 for line in text.splitlines() if re.search(r"│ error\s+│ -\s+│", line)) == 1


# -- JSON ------------------------------------------------------------------------------------


def test_report_json_round_trips_every_case_record_and_event() -> None:
    report = sample_report()
    text = report_json(report)
    data = json.loads(text)
    expected = report.to_dict()
    assert data["format"] == REPORT_FORMAT
    assert data["results"] == json.loads(json.dumps(expected["results"]))
    assert data["counts"] == {"passed": 2, "failed": 3, "refused": 1, "error": 1}
    assert data["ok"] is False
    assert data["summary"][0] == {"outcome": "passed", "reason": "", "count": 1}
    assert data["results"][0]["failure"]["incidentId"] == "inc-7f3a"
    assert data["results"][0]["events"] == [
        {"type": "tool_call", "round": 1, "tool": "getOrderDetail"}
    ]
    assert data["results"][6]["case"] == SCRIPT_NAME
    # stable: the same report gives the same text, keys sorted at every level
    assert report_json(sample_report()) == text
    assert list(data) == sorted(data)
    assert list(data["results"][0]) == sorted(data["results"][0])


def test_report_json_scrubs_the_target_and_writes_what_json_cannot_hold() -> None:
    report = sample_report()
    report.results[0].assertions.append(
        AssertionResult("artifact_contains", {"b", "a"}, Path("out.txt"), passed=False)
    )
    data = json.loads(report_json(report))
    assert "hunter2" not in data["target"]
    assert "sk-live-abcdef1234567890" not in data["target"]
    assert "127.0.0.1:8000" in data["target"]
    odd = data["results"][0]["assertions"][-1]
    assert (odd["expected"], odd["actual"]) == (["a", "b"], "out.txt")


# -- JUnit XML -------------------------------------------------------------------------------

_CHILDREN = {
    "testsuites": {"testsuite"},
    "testsuite": {"properties", "testcase", "system-out", "system-err"},
    "properties": {"property"},
    "property": set(),
    "testcase": {"failure", "error", "skipped", "system-out", "system-err"},
    "failure": set(),
    "error": set(),
    "skipped": set(),
    "system-out": set(),
    "system-err": set(),
}
_REQUIRED = {
    "testsuites": {"tests", "failures", "errors", "time"},
    "testsuite": {"name", "tests", "failures", "errors", "skipped", "time"},
    "testcase": {"classname", "name", "time"},
    "property": {"name", "value"},
    "failure": {"message", "type"},
    "error": {"message", "type"},
    "skipped": {"message"},
}


def _xml(text: str) -> ET.Element:
    return ET.fromstring(text)  # noqa: S314 -- the report we just wrote, not untrusted input


def _check_junit_structure(element: ET.Element) -> None:
    """The JUnit shape CI systems read: known elements only, in their parents, with their
    required attributes, numbers where numbers go, one outcome element per testcase."""
    assert element.tag in _CHILDREN, element.tag
    assert _REQUIRED.get(element.tag, set()) <= set(element.attrib), element.tag
    for name in ("tests", "failures", "errors", "skipped"):
        if name in element.attrib:
            assert element.attrib[name].isdigit()
    if "time" in element.attrib:
        assert re.fullmatch(r"\d+\.\d{3}", element.attrib["time"])
    if element.tag == "testcase":
        outcomes = [child for child in element if child.tag in ("failure", "error", "skipped")]
        assert len(outcomes) <= 1
    for child in element:
        assert child.tag in _CHILDREN[element.tag], (element.tag, child.tag)
        _check_junit_structure(child)


def _testcases(root: ET.Element) -> dict[str, ET.Element]:
    return {case.attrib["name"]: case for case in root.iter("testcase")}


def test_junit_structure_and_counts() -> None:
    text = junit_xml(sample_report())
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = _xml(text)
    _check_junit_structure(root)
    (suite,) = root.findall("testsuite")
    totals = {"tests": "8", "failures": "4", "errors": "1", "skipped": "1", "time": "4.321"}
    for element in (root, suite):
        assert {key: element.attrib[key] for key in totals} == totals
    assert suite.attrib["timestamp"] == "2026-09-21T14:13:20"
    cases = _testcases(root)
    assert len(cases) == 8
    assert [case.attrib["classname"] for case in root.iter("testcase")] == [
        "orders",
        "orders",
        "search",
        "search",
        "search",
        "lab",
        "<odd>",
        "lab",
    ]
    assert cases["slow-search [repeat 1]"].attrib["time"] == "0.300"
    assert list(cases["order-detail-without-credentials"]) != []  # its triage row
    assert cases["order-detail-without-credentials"].find("failure") is None
    # the counts match the elements
    assert len(root.findall(".//failure")) == 4
    assert len(root.findall(".//error")) == 1
    assert len(root.findall(".//skipped")) == 1


def test_junit_failure_carries_the_assertions_and_the_failure_record() -> None:
    cases = _testcases(_xml(junit_xml(sample_report())))
    failure = cases["slow-search"].find("failure")
    assert failure is not None
    assert failure.attrib == {
        "message": "failed with reason 'tool_timeout', not one of ['http_4xx']",
        "type": "assertion",
    }
    assert failure.text is not None
    text = failure.text.strip().splitlines()
    assert text == [
        "case: slow-search (cases/search.json)",
        "failed assertions:",
        "  - allowed_failure_reasons: failed with reason 'tool_timeout', not one of "
        "['http_4xx'] (expected [\"http_4xx\"], actual tool_timeout)",
        "failure record:",
        "  errorCode: UPSTREAM_TIMEOUT",
        "  reason: tool_timeout",
        "  incidentId: inc-0b1c",
    ]
    cleanup = cases["cancel-order"].find("failure")
    assert cleanup is not None
    assert cleanup.attrib == {
        "message": "cleanup step reopenOrder failed",
        "type": "cleanup_failed",
    }
    assert cleanup.text is not None
    assert "  - reopenOrder: failed (http_5xx)" in cleanup.text


def test_junit_refused_error_shadow_and_triage() -> None:
    cases = _testcases(_xml(junit_xml(sample_report())))
    refused = cases["place-order"].find("failure")
    assert refused is not None
    assert refused.attrib == {
        "message": "placeOrder has side effects and the case has no cleanup",
        "type": "cleanup_not_configured",
    }
    error = cases["unreachable"].find("error")
    assert error is not None
    assert error.attrib == {"message": "the target did not answer", "type": "error"}
    skipped = cases["learned-regression-1"].find("skipped")
    assert skipped is not None
    assert skipped.attrib == {"message": "shadow mode: failed (http_5xx)"}
    assert cases["learned-regression-1"].find("failure") is None
    out = cases["order-detail-without-credentials"].find("system-out")
    assert out is not None
    assert out.text is not None
    assert out.text.strip().splitlines() == [
        "triage: auth_failed",
        "  symptom: The downstream API refused the credentials.",
        "  look first: The failure's evidence: which credential was sent <and how>.",
        "  fix: Configure the collection's credentials.",
    ]


def test_junit_escapes_markup_quotes_and_control_characters() -> None:
    text = junit_xml(sample_report())
    assert "<script>" not in text
    assert "\x1b" not in text
    assert "\x00" not in text
    root = _xml(text)  # valid XML despite the control characters
    case = _testcases(root)[SCRIPT_NAME]
    assert case.attrib["classname"] == "<odd>"
    failure = case.find("failure")
    assert failure is not None
    assert failure.attrib["message"] == "selected '<b>deleteOrder</b>' first, expected 'getOrder'"
    assert failure.text is not None
    assert "message: bad \\x1b[31m control \\x00 characters" in failure.text
    (target,) = root.iter("property")
    assert "hunter2" not in target.attrib["value"]
    assert "sk-live-abcdef1234567890" not in text


def test_junit_of_an_empty_run() -> None:
    root = _xml(junit_xml(LabReport()))
    _check_junit_structure(root)
    assert root.attrib["tests"] == "0"
    suite = root.find("testsuite")
    assert suite is not None
    assert "timestamp" not in suite.attrib
    assert suite.find("properties") is None


@settings(max_examples=60, deadline=None)
@given(
    name=st.text(min_size=1, max_size=40),
    message=st.text(max_size=60),
    expected=st.text(max_size=20),
)
def test_any_text_gives_valid_junit_and_escaped_html(
    name: str, message: str, expected: str
) -> None:
    report = LabReport(
        results=[
            CaseResult(
                case=name,
                source=f"{name}.yaml",
                outcome="failed",
                message=message,
                assertions=[AssertionResult("final_state", expected, name, False, message)],
            ),
            CaseResult(case=name, outcome="error", message=message, repeat=2),
        ]
    )
    root = _xml(junit_xml(report))
    _check_junit_structure(root)
    names = [case.attrib["name"] for case in root.iter("testcase")]
    if not re.search("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]", name):
        assert names == [name, f"{name} [repeat 2]"]
    page = _parse(html_report(report))
    assert page.find("script") == []
    assert len(page.find("section", **{"class": "case"})) == 2
    assert json.loads(report_json(report))["results"][0]["case"] == name


# -- charts ----------------------------------------------------------------------------------


def test_case_chart_has_one_bar_per_counted_case_with_its_reason_counts() -> None:
    chart = case_chart(sample_report())
    assert [(row.label, row.total) for row in chart.rows] == [
        ("order-detail-without-credentials", 1),
        ("cancel-order", 1),
        ("slow-search", 2),
        ("place-order", 1),
        ("unreachable", 1),
        (SCRIPT_NAME, 1),
    ]
    assert chart.top_count == 2
    slow = chart.rows[2]
    assert [(s.key, s.count) for s in slow.segments] == [("passed", 1), ("failed: tool_timeout", 1)]
    # bars are proportional to the counts, side by side, ending at the row's end
    for row in chart.rows:
        assert sum(segment.count for segment in row.segments) == row.total
        assert sum(segment.width for segment in row.segments) == pytest.approx(
            chart.plot_width * row.total / chart.top_count, abs=0.05
        )
        for left, right in zip(row.segments, row.segments[1:], strict=False):
            assert right.x == pytest.approx(left.x + left.width, abs=0.02)
        assert row.end == pytest.approx(row.segments[-1].x + row.segments[-1].width, abs=0.02)
    assert sum(entry.count for entry in chart.legend) == 7
    assert len({entry.color for entry in chart.legend}) == len(chart.legend)


def test_fault_chart_counts_results_per_fault_kind_that_fired() -> None:
    chart = fault_chart(sample_report())
    assert [(row.label, row.total) for row in chart.rows] == [
        ("model_rate_limited", 1),
        ("tool_timeout", 2),
        (NO_FAULT, 4),
    ]
    (segment,) = chart.rows[0].segments
    assert (segment.outcome, segment.reason) == ("refused", "cleanup_not_configured")
    # the same (outcome, reason) has the same color in both charts
    by_case = {entry.key: entry.color for entry in case_chart(sample_report()).legend}
    assert all(by_case[entry.key] == entry.color for entry in chart.legend)
    quiet = LabReport(results=[CaseResult(case="calm")])
    assert fault_chart(quiet).rows == []


# -- HTML ------------------------------------------------------------------------------------


class _Page(HTMLParser):
    """What the tests read from the page: every start tag with its attributes, and the
    text of every element with a class."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.texts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {key: value or "" for key, value in attrs}))

    def handle_data(self, data: str) -> None:
        self.texts.append(data)

    def find(self, tag: str, **wanted: str) -> list[dict[str, str]]:
        return [
            attrs
            for name, attrs in self.tags
            if name == tag and all(wanted[k] in attrs.get(k, "").split() for k in wanted)
        ]


def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    page.close()
    return page


def test_html_escapes_every_text() -> None:
    text = html_report(sample_report())
    assert "<script" not in text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#34;quotes&#34;" in text
    assert "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;b&gt;deleteOrder&lt;/b&gt;" in text
    assert "bad \\x1b[31m control \\x00 characters" in text  # shown, not sent raw
    assert "\x1b" not in text
    assert "\x00" not in text
    page = _parse(text)
    assert SCRIPT_NAME in page.texts  # rendered as text, as written
    assert page.find("script") == []
    assert "hunter2" not in text
    assert "sk-live-abcdef1234567890" not in text


def test_html_has_no_external_url_and_forbids_scripts() -> None:
    text = html_report(sample_report())
    page = _parse(text)
    for _tag, attrs in page.tags:
        for name in ("src", "href", "action", "xlink:href", "poster", "data"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith("#"), (name, value)
    assert not re.search(r"url\(|@import|<link|<iframe|<img", text, re.IGNORECASE)
    (policy,) = page.find("meta", **{"http-equiv": "Content-Security-Policy"})
    assert policy["content"].startswith("default-src 'none'; style-src 'unsafe-inline';")
    assert "script-src" not in policy["content"]


def test_html_chart_bars_match_the_counts() -> None:
    report = sample_report()
    page = _parse(html_report(report))
    bars = page.find("rect", **{"class": "bar"})
    by_case = case_chart(report)
    by_fault = fault_chart(report)
    expected = [s for chart in (by_case, by_fault) for row in chart.rows for s in row.segments]
    assert [(bar["data-key"], int(bar["data-count"]), float(bar["width"])) for bar in bars] == [
        (s.key, s.count, s.width) for s in expected
    ]
    rows = page.find("g", **{"class": "row"})
    assert [(row["data-label"], int(row["data-total"])) for row in rows] == [
        (row.label, row.total) for chart in (by_case, by_fault) for row in chart.rows
    ]


def test_html_header_summary_and_one_section_per_result() -> None:
    report = sample_report()
    text = html_report(report)
    page = _parse(text)
    counts = {a["data-outcome"]: a for a in page.find("span", **{"class": "count"})}
    assert set(counts) == {"passed", "failed", "refused", "error", "shadow"}
    assert "2026-09-21 14:13:20 UTC" in text
    assert "4.32 s" in text
    summary = page.find("tr")
    rows = [(a["data-outcome"], a["data-reason"]) for a in summary if "data-outcome" in a]
    assert rows == [(o, r) for o, r, _count in summary_rows(report)]
    sections = page.find("section", **{"class": "case"})
    assert [(s["data-outcome"], s["data-shadow"]) for s in sections] == [
        (r.outcome, "true" if r.shadow else "false") for r in report.results
    ]
    assert len(page.find("details", **{"class": "events"})) == len(report.results)
    assert len(page.find("table", **{"class": "assertions"})) == 5
    assert len(page.find("dl", **{"class": "triage"})) == 1
    assert len(page.find("table", **{"class": "cleanup"})) == 1
    assert "No injected fault took effect" not in text


def test_html_of_an_empty_run_says_so() -> None:
    text = html_report(LabReport())
    assert "No counted result." in text
    assert "No case ran." in text
    assert _parse(text).find("rect", **{"class": "bar"}) == []


# -- files -----------------------------------------------------------------------------------


def test_write_reports_writes_what_is_asked_into_new_folders(tmp_path: Path) -> None:
    report = sample_report()
    written = write_reports(
        report, json=tmp_path / "a" / "lab.json", junit=tmp_path / "b" / "c" / "lab.xml"
    )
    assert written == {"json": tmp_path / "a" / "lab.json", "junit": tmp_path / "b/c/lab.xml"}
    assert written["json"].read_text(encoding="utf-8") == report_json(report)
    assert written["junit"].read_text(encoding="utf-8") == junit_xml(report)
    html = write_reports(report, html=str(tmp_path / "lab.html"))["html"]
    assert html.read_text(encoding="utf-8") == html_report(report)
    assert write_reports(report) == {}
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        "lab.html",
        "lab.json",
        "lab.xml",
    ]
