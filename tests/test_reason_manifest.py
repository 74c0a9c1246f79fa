"""Every reason in the catalog is pinned by a test and has its line in docs/errors.md.

The reason catalog (``llamon_agent.core.catalog``, printed by ``llamon errors``) is the list
of failures a user can meet. A test that asserts a failure ends with a given reason says
so with ``@pytest.mark.reason("tool_timeout")`` (several reasons allowed in one marker).
The check runs both ways and names what is wrong: a catalog reason that no marker names,
and a marker that names no catalog reason (a typo, or a reason that was renamed).

How the markers are found: every ``tests/**/*.py`` file is parsed with ``ast``, never
imported or collected, and each call ``pytest.mark.reason(...)`` is read wherever it stands
(a decorator on a test function or class, ``pytestmark = ...``, or
``pytest.param(..., marks=...)``). Parsing needs no optional extra, database or server and
gives the same answer whether this file runs alone or in the whole suite, which a
collection hook would not (it only sees the tests of the current run). The price: a
marker's arguments must be string literals, and a test checks that they are.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from llamon_agent.core.catalog import reason_catalog

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
ERRORS_DOC = ROOT / "docs" / "errors.md"
CATALOG_HEADING = "### The reason catalog"
DOC_ROW = re.compile(r"^\| `(?P<reason>[a-z0-9_]+)` \|(?P<rest>.*)\|$")


@dataclass(frozen=True, slots=True)
class Marker:
    """One ``pytest.mark.reason(...)`` call: its literal reasons and where it stands."""

    where: str
    reasons: tuple[str, ...]
    literal: bool


def _is_reason_mark(node: ast.AST) -> bool:
    """``pytest.mark.reason`` or ``mark.reason`` (after ``from pytest import mark``)."""
    if not (isinstance(node, ast.Attribute) and node.attr == "reason"):
        return False
    mark = node.value
    if isinstance(mark, ast.Name):
        return mark.id == "mark"
    return (
        isinstance(mark, ast.Attribute)
        and mark.attr == "mark"
        and isinstance(mark.value, ast.Name)
        and mark.value.id == "pytest"
    )


def markers_in(source: str, name: str) -> Iterator[Marker]:
    """Every reason marker in one file's source, in source order."""
    calls = [
        node
        for node in ast.walk(ast.parse(source, filename=name))
        if isinstance(node, ast.Call) and _is_reason_mark(node.func)
    ]
    for call in sorted(calls, key=lambda node: (node.lineno, node.col_offset)):
        literal = bool(call.args) and not call.keywords
        reasons: list[str] = []
        for arg in call.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                reasons.append(arg.value)
            else:
                literal = False
        yield Marker(f"{name}:{call.lineno}", tuple(reasons), literal)


def all_markers() -> list[Marker]:
    """The reason markers of the whole test suite."""
    return [
        marker
        for path in sorted(TESTS.rglob("*.py"))
        for marker in markers_in(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]


def gaps(catalog: set[str], markers: list[Marker]) -> tuple[list[str], dict[str, list[str]]]:
    """Catalog reasons no marker names, and marker reasons outside the catalog (by place)."""
    named = {reason for marker in markers for reason in marker.reasons}
    unknown: dict[str, list[str]] = {}
    for marker in markers:
        for reason in marker.reasons:
            if reason not in catalog:
                unknown.setdefault(reason, []).append(marker.where)
    return sorted(catalog - named), unknown


def documented_rows(text: str) -> dict[str, list[str]]:
    """The reason table of docs/errors.md (the section under ``### The reason catalog``):
    reason -> its other cells, stripped."""
    section = text.split(CATALOG_HEADING, 1)[-1].split("\n#", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        found = DOC_ROW.match(line)
        if found:
            cells = [cell.strip().strip("`") for cell in found["rest"].split("|")]
            rows[found["reason"]] = cells
    return rows


def _catalog() -> set[str]:
    return {spec.reason for spec in reason_catalog()}


def test_every_catalog_reason_is_pinned_by_a_marked_test() -> None:
    missing, _ = gaps(_catalog(), all_markers())
    assert missing == [], (
        f"catalog reasons that no test marks with @pytest.mark.reason(...): {missing}; "
        "mark the test that asserts the reason, or write one"
    )


def test_every_marker_names_a_catalog_reason() -> None:
    _, unknown = gaps(_catalog(), all_markers())
    assert unknown == {}, f"markers naming a reason the catalog does not have: {unknown}"


def test_every_marker_names_its_reasons_as_string_literals() -> None:
    bad = [marker.where for marker in all_markers() if not marker.literal]
    assert bad == [], f"reason markers this scan cannot read (use string literals): {bad}"


def test_every_catalog_reason_has_its_line_in_the_docs() -> None:
    rows = documented_rows(ERRORS_DOC.read_text(encoding="utf-8"))
    missing = sorted(_catalog() - set(rows))
    unknown = sorted(set(rows) - _catalog())
    assert missing == [], f"catalog reasons with no row in docs/errors.md: {missing}"
    assert unknown == [], f"docs/errors.md rows naming no catalog reason: {unknown}"


def test_each_documented_row_says_what_the_catalog_says() -> None:
    rows = documented_rows(ERRORS_DOC.read_text(encoding="utf-8"))
    differ = {}
    for spec in reason_catalog():
        expected = [
            str(spec.stage),
            spec.error_code.value,
            str(spec.retryable).lower(),
            spec.operator_action,
            spec.meaning,
        ]
        if spec.reason in rows and rows[spec.reason] != expected:
            differ[spec.reason] = {"docs": rows[spec.reason], "catalog": expected}
    assert differ == {}


SAMPLE = """
import pytest
from pytest import mark

pytestmark = pytest.mark.reason("timeout")


@pytest.mark.reason("tool_error", "unknown_tool")
def test_a() -> None: ...


@mark.reason("no_such_reason")
class TestB: ...


@pytest.mark.parametrize("x", [pytest.param(1, marks=pytest.mark.reason("rate_limited"))])
def test_c(x: int) -> None: ...


NAME = "worker_lost"


@pytest.mark.reason(NAME)
def test_d() -> None: ...
"""


def test_the_scan_finds_markers_wherever_they_stand() -> None:
    found = [(m.where, m.reasons, m.literal) for m in markers_in(SAMPLE, "sample.py")]
    assert found == [
        ("sample.py:5", ("timeout",), True),
        ("sample.py:8", ("tool_error", "unknown_tool"), True),
        ("sample.py:12", ("no_such_reason",), True),
        ("sample.py:16", ("rate_limited",), True),
        ("sample.py:23", (), False),
    ]


@pytest.mark.parametrize(
    ("catalog", "expected"),
    [
        ({"timeout", "tool_error", "unknown_tool", "rate_limited"}, ([], ["no_such_reason"])),
        (
            {"timeout", "tool_error", "unknown_tool", "rate_limited", "worker_lost"},
            (["worker_lost"], ["no_such_reason"]),
        ),
    ],
)
def test_the_check_fails_both_ways_and_says_which(
    catalog: set[str], expected: tuple[list[str], list[str]]
) -> None:
    missing, unknown = gaps(catalog, list(markers_in(SAMPLE, "sample.py")))
    assert (missing, sorted(unknown)) == expected
    assert unknown["no_such_reason"] == ["sample.py:12"]


def test_the_docs_table_is_read_row_by_row() -> None:
    text = (
        "| `domain` | kebab-case |\n"
        f"{CATALOG_HEADING}\n\n| reason | stage |\n|---|---|\n"
        "| `task_busy` | a2a_serve | `RATE_LIMITED` |\n\n## Next\n| `retried` | int |\n"
    )
    assert documented_rows(text) == {"task_busy": ["a2a_serve", "RATE_LIMITED"]}
