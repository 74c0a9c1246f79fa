"""Quality Lab reports: what a ``LabReport`` looks like as JSON, JUnit XML, an HTML page,
and a summary table in the terminal.

==========================  =================================================================
``report_json(report)``     every case, its records and events, as one JSON document (keys
                            sorted, so two runs diff line by line); the ``LabReport.to_dict``
                            keys plus ``format`` and ``summary``
``junit_xml(report)``       JUnit XML for CI systems: one ``testcase`` per result, a failed
                            or refused case a ``<failure>``, an error an ``<error>``, a
                            shadow case ``<skipped>``
``html_report(report)``     one self-contained page (inline CSS and SVG, no script, no
                            external URL) that opens offline: counts, a chart of failure
                            reasons per case and per injected fault, the summary table, and
                            one section per case
``write_reports(...)``      writes the files asked for (parent folders created)
``summary_rows(report)``    ``(outcome, reason, count)`` of the counted results
``summary_table(report)``   the same as a ``rich`` table for the terminal
``case_chart(report)``      the chart data the page draws (bars per case, per fault kind)
``fault_chart(report)``
==========================  =================================================================

Shadow cases (learned cases not yet promoted) are shown but never counted: they are left
out of the counts, the summary and the charts, and are ``<skipped>`` in JUnit. Everything
rendered was scrubbed by the runner already; the target is scrubbed again here (a URL's
user-info or a token in its query never reaches a report), every text is escaped, and
characters XML cannot hold are written as ``\\xNN``.
"""

from __future__ import annotations

import json as jsonlib
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Final, Literal

from jinja2 import Environment, PackageLoader, StrictUndefined
from rich.markup import escape
from rich.table import Table

from llamon_agent.core.scrub import scrub_text
from llamon_agent.lab.results import OUTCOMES, CaseResult, LabReport

__all__ = [
    "NO_FAULT",
    "REPORT_FORMAT",
    "ChartRow",
    "LegendEntry",
    "ReasonChart",
    "ReportKind",
    "Segment",
    "case_chart",
    "fault_chart",
    "html_report",
    "junit_xml",
    "report_json",
    "summary_rows",
    "summary_table",
    "write_reports",
]

REPORT_FORMAT: Final = "llamon-lab-report/1"
"""The ``format`` key of ``report_json``: changes when a key changes meaning."""

ReportKind = Literal["json", "junit", "html"]
"""The report files ``write_reports`` writes."""

NO_FAULT: Final = "no fault fired"
"""The row of the fault chart for results no injected fault took effect in."""

_PASSED: Final = "#2e8b57"
_PASSED_ALLOWED: Final = "#8fd19e"
_ERROR: Final = "#343a40"
_PALETTE: Final = (
    "#d62728",
    "#ff7f0e",
    "#9467bd",
    "#1f77b4",
    "#e377c2",
    "#8c564b",
    "#bcbd22",
    "#17becf",
    "#7f7f7f",
    "#393b79",
)
_WIDTH: Final = 760
_LABEL_WIDTH: Final = 250
_COUNT_WIDTH: Final = 44
_ROW: Final = 24
_BAR: Final = 16
_TOP: Final = 6
_AXIS: Final = 18
_SHORT: Final = 36
_INVALID_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


# -- summary ---------------------------------------------------------------------------------


def summary_rows(report: LabReport) -> list[tuple[str, str, int]]:
    """``(outcome, reason, count)`` for the counted results (shadow cases left out): by
    outcome (passed, failed, refused, error), then most frequent first; ``reason`` is the
    result's ``reason_shown`` (``""`` when it has none; a passed case can have one, the
    failure reason its assertions allowed)."""
    order: dict[str, int] = {outcome: index for index, outcome in enumerate(OUTCOMES)}
    found = report.by_reason()
    ranked = sorted(found.items(), key=lambda item: (order[item[0][0]], -item[1], item[0][1]))
    return [(outcome, reason, count) for (outcome, reason), count in ranked]


_STYLE: Final[dict[str, str]] = {
    "passed": "green",
    "failed": "red",
    "refused": "yellow",
    "error": "magenta",
}


def summary_table(report: LabReport) -> Table:
    """The summary by outcome and reason as a ``rich`` table (``outcome``, ``reason``,
    ``count``; ``-`` for no reason), titled with the counts; its caption says how many
    shadow results were left out."""
    counts = report.counts()
    by_outcome = ", ".join(f"{counts[outcome]} {outcome}" for outcome in OUTCOMES)
    title = f"{len(report.counted)} result(s): {by_outcome}"
    shadow = len(report.results) - len(report.counted)
    table = Table(
        title=title,
        caption=f"{shadow} shadow result(s) not counted" if shadow else None,
        min_width=len(title) + 2,
    )
    table.add_column("outcome")
    table.add_column("reason", overflow="fold")
    table.add_column("count", justify="right")
    for outcome, reason, count in summary_rows(report):
        style = _STYLE.get(outcome, "")
        table.add_row(f"[{style}]{outcome}[/{style}]", escape(reason or "-"), str(count))
    return table


# -- JSON ------------------------------------------------------------------------------------


def _jsonable(value: object) -> object:
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    if isinstance(value, Path):
        return str(value)
    return repr(value)


def _dumps(value: object, *, indent: int | None = None) -> str:
    return jsonlib.dumps(
        value, indent=indent, sort_keys=True, ensure_ascii=False, default=_jsonable
    )


def report_json(report: LabReport) -> str:
    """The report as one JSON document: ``LabReport.to_dict()`` (every result with its
    assertions, steps, failure record, faults and events), plus ``format``
    (``REPORT_FORMAT``) and ``summary`` (``summary_rows`` as ``{outcome, reason, count}``
    objects). Keys are sorted; values JSON cannot hold (a set, a path) are written as a
    list or a string; the target is scrubbed."""
    data = report.to_dict()
    data["target"] = _target(report.target)
    data["format"] = REPORT_FORMAT
    data["summary"] = [
        {"outcome": outcome, "reason": reason, "count": count}
        for outcome, reason, count in summary_rows(report)
    ]
    return _dumps(data, indent=2) + "\n"


# -- shared wording --------------------------------------------------------------------------


def _target(target: str) -> str:
    return scrub_text(target, max_length=300) if target else ""


def _when(started_at: float) -> str:
    if not started_at:
        return "-"
    return datetime.fromtimestamp(started_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(ms: float) -> str:
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.2f} s"


def _title(result: CaseResult) -> str:
    return f"{result.case} [repeat {result.repeat}]" if result.repeat > 0 else result.case


def _key(outcome: str, reason: str) -> str:
    return f"{outcome}: {reason}" if reason else outcome


def _show(value: object) -> str:
    return value if isinstance(value, str) else _dumps(value)


def _record(result: CaseResult) -> list[tuple[str, str]]:
    """The failure record's lines: errorCode, reason, incidentId first, then the rest."""
    rest = dict(result.failure or {})
    first = {
        "errorCode": result.error_code or rest.get("errorCode"),
        "reason": result.failure_reason or rest.get("errorReason"),
        "incidentId": result.incident_id or rest.get("incidentId"),
    }
    for name in ("errorCode", "errorReason", "incidentId"):
        rest.pop(name, None)
    lines = [(name, _show(value)) for name, value in first.items() if value not in (None, "")]
    return lines + [(str(name), _show(value)) for name, value in sorted(rest.items())]


_TRIAGE_KEYS: Final = (
    ("symptom", "symptom"),
    ("lookFirst", "look first"),
    ("look_first", "look first"),
    ("fix", "fix"),
)


def _triage(result: CaseResult) -> list[tuple[str, str]]:
    if not result.triage:
        return []
    row = dict(result.triage)
    lines = [(label, _show(row.pop(key))) for key, label in _TRIAGE_KEYS if key in row]
    row.pop("reason", None)
    return lines + [(str(key), _show(value)) for key, value in sorted(row.items())]


# -- JUnit XML -------------------------------------------------------------------------------


def _x(text: object) -> str:
    """Text XML 1.0 (and a page) can hold: a character it cannot is written as ``\\xNN``."""
    return _INVALID_XML.sub(lambda found: f"\\x{ord(found.group()):02x}", str(text))


def _classname(result: CaseResult) -> str:
    stem = Path(result.source.split("#", 1)[0]).stem if result.source else ""
    return stem or "lab"


def _failure_text(result: CaseResult) -> str:
    lines = [f"case: {result.case}" + (f" ({result.source})" if result.source else "")]
    if result.lab_reason:
        lines.append(f"lab reason: {result.lab_reason}")
    if result.message:
        lines.append(f"message: {result.message}")
    failed = result.failed_assertions
    if failed:
        lines.append("failed assertions:")
        lines += [
            f"  - {item.name}: {item.message or 'did not hold'}"
            f" (expected {_show(item.expected)}, actual {_show(item.actual)})"
            for item in failed
        ]
    record = _record(result)
    if record:
        lines.append("failure record:")
        lines += [f"  {name}: {value}" for name, value in record]
    broken = [step for step in result.cleanup if not step.ok]
    if broken:
        lines.append("cleanup:")
        lines += [f"  - {step.tool}: failed ({step.reason or 'no reason'})" for step in broken]
    return "\n".join(lines)


def _failure_message(result: CaseResult) -> str:
    failed = [item.message or f"{item.name} did not hold" for item in result.failed_assertions]
    if failed:
        return "; ".join(failed)
    return result.message or result.reason_shown or result.outcome


def _testcase(suite: ET.Element, result: CaseResult) -> None:
    case = ET.SubElement(
        suite,
        "testcase",
        classname=_x(_classname(result)),
        name=_x(_title(result)),
        time=f"{result.duration_ms / 1000:.3f}",
    )
    if result.shadow:
        reason = f" ({result.reason_shown})" if result.reason_shown else ""
        ET.SubElement(case, "skipped", message=_x(f"shadow mode: {result.outcome}{reason}"))
    elif result.outcome in ("failed", "refused"):
        kind = result.lab_reason or ("assertion" if result.outcome == "failed" else "refused")
        failure = ET.SubElement(
            case, "failure", message=_x(_failure_message(result)), type=_x(kind)
        )
        failure.text = _x(_failure_text(result))
    elif result.outcome == "error":
        error = ET.SubElement(
            case,
            "error",
            message=_x(result.message or result.reason_shown or "error"),
            type=_x(result.lab_reason or result.failure_reason or "error"),
        )
        error.text = _x(_failure_text(result))
    triage = _triage(result)
    if triage:
        out = ET.SubElement(case, "system-out")
        reason = (result.triage or {}).get("reason") or result.reason_shown
        out.text = _x(
            "\n".join([f"triage: {reason}", *(f"  {name}: {text}" for name, text in triage)])
        )


def junit_xml(report: LabReport) -> str:
    """The report as JUnit XML: ``<testsuites>`` holding one ``<testsuite name="llamon
    lab">``, both with ``tests``, ``failures`` (failed and refused results), ``errors``,
    ``skipped`` (shadow results) and ``time`` (seconds). One ``<testcase>`` per result:
    ``classname`` the case file's stem (``lab`` when it has none), ``name`` the case's
    label (`` [repeat N]`` added for N > 0). A failed case has a ``<failure>`` whose
    ``message`` is its failed assertions' messages and whose text adds the failure record
    (errorCode, reason, incidentId ...); a refused case ``<failure
    type="cleanup_not_configured">`` (its ``lab_reason``); an error ``<error>``; a shadow
    case ``<skipped message="shadow mode: ...">``. ``<system-out>`` holds the triage row
    when the result has one."""
    counted = [result for result in report.results if not result.shadow]
    outcomes = Counter(result.outcome for result in counted)
    totals = {
        "tests": str(len(report.results)),
        "failures": str(outcomes["failed"] + outcomes["refused"]),
        "errors": str(outcomes["error"]),
        "skipped": str(len(report.results) - len(counted)),
        "time": f"{report.duration_ms / 1000:.3f}",
    }
    root = ET.Element("testsuites", {"name": "llamon lab", **totals})
    suite = ET.SubElement(root, "testsuite", {"name": "llamon lab", **totals})
    if report.started_at:
        stamp = datetime.fromtimestamp(report.started_at, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        suite.set("timestamp", stamp)
    target = _target(report.target)
    if target:
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(properties, "property", name="target", value=_x(target))
    for result in report.results:
        _testcase(suite, result)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


# -- charts ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Segment:
    """One colored part of a bar: ``count`` results with ``outcome`` and ``reason``
    (``key`` is ``"outcome: reason"``, or the outcome alone when there is no reason)."""

    key: str
    outcome: str
    reason: str
    count: int
    x: float
    width: float
    color: str


@dataclass(frozen=True, slots=True)
class ChartRow:
    """One bar: ``label`` (``short`` is what fits beside the bar), its ``total`` results
    and its ``segments`` left to right; ``y`` is the bar's top, ``end`` its right end."""

    label: str
    short: str
    total: int
    y: float
    end: float
    segments: list[Segment]


@dataclass(frozen=True, slots=True)
class LegendEntry:
    """A segment key, its color and how many results of the chart have it."""

    key: str
    color: str
    count: int


@dataclass(frozen=True, slots=True)
class ReasonChart:
    """Horizontal stacked bars, one ``row`` per case (or per fault kind), sized by
    ``top_count`` (the longest row's total); the page writes them out as SVG."""

    title: str
    width: int
    height: int
    label_width: int
    plot_width: float
    bar_height: int
    axis_y: float
    top_count: int
    rows: list[ChartRow]
    legend: list[LegendEntry]


def _colors(report: LabReport) -> dict[tuple[str, str], str]:
    """One color per ``(outcome, reason)``, the same in both charts and the summary."""
    colors: dict[tuple[str, str], str] = {}
    free = iter(_PALETTE * (1 + len(report.results) // len(_PALETTE)))
    for outcome, reason, _count in summary_rows(report):
        if outcome == "passed":
            colors[outcome, reason] = _PASSED_ALLOWED if reason else _PASSED
        elif outcome == "error" and not reason:
            colors[outcome, reason] = _ERROR
        else:
            colors[outcome, reason] = next(free)
    return colors


def _shorten(label: str) -> str:
    return label if len(label) <= _SHORT else label[: _SHORT - 1] + "…"


def _chart(
    title: str, groups: list[tuple[str, list[CaseResult]]], report: LabReport
) -> ReasonChart:
    colors = _colors(report)
    order = {pair: index for index, pair in enumerate(colors)}
    top = max((len(results) for _label, results in groups), default=0)
    plot_width = float(_WIDTH - _LABEL_WIDTH - _COUNT_WIDTH)
    rows: list[ChartRow] = []
    legend: Counter[tuple[str, str]] = Counter()
    for index, (label, results) in enumerate(groups):
        found = Counter((result.outcome, result.reason_shown) for result in results)
        x = float(_LABEL_WIDTH)
        segments: list[Segment] = []
        for pair in sorted(found, key=order.__getitem__):
            count = found[pair]
            width = round(plot_width * count / top, 2)
            segments.append(Segment(_key(*pair), *pair, count, round(x, 2), width, colors[pair]))
            x += width
            legend[pair] += count
        y = float(_TOP + index * _ROW)
        end = round(x, 2)
        rows.append(ChartRow(label, _shorten(label), len(results), y, end, segments))
    return ReasonChart(
        title=title,
        width=_WIDTH,
        height=_TOP + len(groups) * _ROW + _AXIS,
        label_width=_LABEL_WIDTH,
        plot_width=plot_width,
        bar_height=_BAR,
        axis_y=float(_TOP + len(groups) * _ROW),
        top_count=top,
        rows=rows,
        legend=[
            LegendEntry(_key(*pair), colors[pair], legend[pair])
            for pair in sorted(legend, key=order.__getitem__)
        ],
    )


def case_chart(report: LabReport) -> ReasonChart:
    """Outcome and reason counts per case (its repetitions together), one bar per case in
    the order the cases ran; shadow results left out."""
    groups: dict[str, list[CaseResult]] = {}
    for result in report.counted:
        groups.setdefault(result.case, []).append(result)
    return _chart("Outcome and reason by case", list(groups.items()), report)


def _fault_kinds(result: CaseResult) -> list[str]:
    fired = {key.split(":", 1)[0] for key, times in result.faults_fired.items() if times > 0}
    return sorted(fired)


def fault_chart(report: LabReport) -> ReasonChart:
    """Outcome and reason counts per injected fault kind that took effect (from each
    result's ``faults_fired``; a result with two kinds counts in both rows), kinds by
    name, then a ``NO_FAULT`` row for the results no fault took effect in (when there
    are any); shadow results left out. No row at all when no fault took effect."""
    groups: dict[str, list[CaseResult]] = {}
    calm: list[CaseResult] = []
    for result in report.counted:
        kinds = _fault_kinds(result)
        for kind in kinds:
            groups.setdefault(kind, []).append(result)
        if not kinds:
            calm.append(result)
    rows = sorted(groups.items())
    if rows and calm:
        rows.append((NO_FAULT, calm))
    return _chart("Outcome and reason by injected fault", rows, report)


# -- HTML ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Section:
    anchor: str
    title: str
    result: CaseResult
    record: list[tuple[str, str]]
    triage: list[tuple[str, str]]
    events: str


@lru_cache(maxsize=1)
def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("llamon_agent.lab", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=lambda value: _x(value) if isinstance(value, str) else value,
    )
    environment.filters["show"] = _show
    environment.filters["duration"] = _duration
    return environment


def _sections(results: Iterable[CaseResult]) -> list[_Section]:
    return [
        _Section(
            anchor=f"case-{index}",
            title=_title(result),
            result=result,
            record=_record(result),
            triage=_triage(result),
            events=_dumps(result.events, indent=2),
        )
        for index, result in enumerate(results, start=1)
    ]


def html_report(report: LabReport) -> str:
    """The report as one self-contained HTML page: a header (target, when, duration,
    counts by outcome), a chart of outcomes and reasons per case and one per injected
    fault kind (inline SVG), the summary by outcome and reason, then one section per result
    (outcome badge, assertions, failure record, steps, faults fired, event source,
    cleanup, triage advice, artifacts and events folded in ``<details>``). No script and
    no external URL (its Content-Security-Policy allows neither), every text escaped."""
    colors = _colors(report)
    summary = [
        (outcome, reason, count, colors[outcome, reason])
        for outcome, reason, count in summary_rows(report)
    ]
    shadow = len(report.results) - len(report.counted)
    page = _environment().get_template("report.html")
    return page.render(
        target=_target(report.target) or "-",
        when=_when(report.started_at),
        duration=_duration(report.duration_ms),
        counts=report.counts(),
        shadow=shadow,
        ok=report.ok,
        total=len(report.counted),
        charts=[case_chart(report), fault_chart(report)],
        summary=summary,
        sections=_sections(report.results),
    )


# -- files -----------------------------------------------------------------------------------


def write_reports(
    report: LabReport,
    *,
    json: str | Path | None = None,
    junit: str | Path | None = None,
    html: str | Path | None = None,
) -> dict[ReportKind, Path]:
    """Write the reports asked for (UTF-8; missing parent folders created) and return
    where each went, e.g. ``{"json": Path("out/lab.json")}``; nothing asked, nothing
    written."""
    asked: Mapping[ReportKind, str | Path | None] = {"json": json, "junit": junit, "html": html}
    renderers = {"json": report_json, "junit": junit_xml, "html": html_report}
    written: dict[ReportKind, Path] = {}
    for kind, where in asked.items():
        if where is None:
            continue
        path = Path(where)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(renderers[kind](report), encoding="utf-8")
        written[kind] = path
    return written
