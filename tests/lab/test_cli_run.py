"""``llamon lab run`` through the real ``llamon`` app (typer's ``CliRunner``), the agent in
process: exit statuses, what a failing case prints, options, and the report files."""

from __future__ import annotations

import json
import logging
import socket
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from llamon_agent.cli import app

runner = CliRunner()

SAMPLES = Path(__file__).parents[2] / "docs" / "lab-cases"
DEMO = ("--target", "llamon_agent.examples.demo_agent:agent")
DEMO_CARD = ("--card", "llamon_agent.examples.demo_agent:card")
WRONG_CODE = {
    "name": "wrong-code",
    "mode": "execute",
    "query": "upstream",
    "assertions": {"error_code": "RATE_LIMITED"},
    "tags": ["x"],
}
HELLO = {"name": "ok", "mode": "execute", "query": "hello", "tags": ["y"]}
FAILURE_LINES = [
    "FAILED wrong-code",
    "  error_code: it failed with UPSTREAM_UNAVAILABLE / component_invoke_error",
    "  failure: errorCode=UPSTREAM_UNAVAILABLE, errorReason=component_invoke_error, "
    "errorMessage=the account service did not answer, retriable=True, retried=0",
    "  look first: The component named in the record (tool/node) and its health at that time.",
    "  fix: Check the upstream component's health; the caller may retry.",
]


def lab_run(*args: str) -> Result:
    return runner.invoke(app, ["lab", "run", *args], env={"COLUMNS": "200"})


def write(path: Path, content: object) -> Path:
    path.write_text(json.dumps(content), encoding="utf-8")
    return path


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_the_sample_demo_cases_pass_and_exit_0() -> None:
    result = lab_run(str(SAMPLES / "demo-agent.json"), *DEMO, *DEMO_CARD, "--quiet")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].strip() == "6 result(s): 6 passed, 0 failed, 0 refused, 0 error"
    rows = [[cell.strip() for cell in line.strip("│ ").split("│")] for line in lines if "│" in line]
    assert rows == [
        ["passed", "-", "2"],
        ["passed", "component_invoke_error", "2"],
        ["passed", "classifier_quota_exceeded", "1"],
        ["passed", "database_unavailable", "1"],
    ]
    assert lines[-1] == "OK 6 passed"
    # the injected store failure prints no traceback (nor the store's exception text)
    assert result.stderr == ""


def test_a_failing_case_exits_1_with_its_record_and_the_triage_advice(tmp_path: Path) -> None:
    cases = write(tmp_path / "cases.json", [WRONG_CODE, HELLO])
    result = lab_run(str(cases), *DEMO, *DEMO_CARD, "--quiet")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[:5] == FAILURE_LINES
    assert lines[5].strip() == "2 result(s): 1 passed, 1 failed, 0 refused, 0 error"
    assert lines[-1] == "FAIL 1 passed, 1 failed"
    # the next run, with the case fixed, passes
    fixed = {**WRONG_CODE, "assertions": {"error_code": "UPSTREAM_UNAVAILABLE"}}
    write(cases, [fixed, HELLO])
    assert lab_run(str(cases), *DEMO, *DEMO_CARD, "--quiet").exit_code == 0


def test_a_case_with_an_unmapped_error_shows_the_incident_not_the_text(tmp_path: Path) -> None:
    agent = tmp_path / "crashing.py"
    agent.write_text(
        "async def agent(ctx):\n    raise RuntimeError('password hunter2 at db.internal')\n",
        encoding="utf-8",
    )
    cases = write(tmp_path / "cases.json", {"name": "crash", "mode": "execute", "query": "hi"})
    result = lab_run(str(cases), "--target", f"{agent}:agent", "--quiet")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "FAILED crash"
    escaped = "  uncaught_server_error: an unmapped server error escaped (incident "
    assert lines[1].startswith(escaped)
    assert lines[2].startswith("  failure: errorCode=INTERNAL_ERROR, errorReason=")
    assert "incidentId=" in lines[2]
    assert "hunter2" not in result.output
    assert "db.internal" not in result.output


def test_a_bad_case_file_lists_every_problem_and_exits_2(tmp_path: Path) -> None:
    bad = write(
        tmp_path / "bad.json",
        [
            {"name": "x", "mode": "bogus", "query": "hi", "assertions": {"error_code": "NOPE"}},
            {"mode": "plan"},
        ],
    )
    result = lab_run(str(bad), *DEMO)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {bad}: case 'x': mode: Input should be 'execute' or 'plan'",
        f"error: {bad}: case 'x': assertions.error_code: unknown errorCode 'NOPE'",
        f"error: {bad}: case #1: give the message as either 'query' or 'parts' (exactly one)",
        "FAIL 3 problem(s)",
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ("--target", "no_such_module_here:agent"),
            [
                "error: cannot load the agent 'no_such_module_here:agent': cannot import "
                "'no_such_module_here': No module named 'no_such_module_here'.",
                "  Name it as module:attribute or path/to/file.py:attribute.",
            ],
        ),
        (
            ("--target", "llamon_agent.examples.demo_agent:nothing"),
            [
                "error: cannot load the agent 'llamon_agent.examples.demo_agent:nothing': "
                "'llamon_agent.examples.demo_agent' has no attribute 'nothing'.",
                "  Name it as module:attribute or path/to/file.py:attribute.",
            ],
        ),
        (
            (*DEMO, "--card", "no_such_module_here:card"),
            [
                "error: cannot load the card 'no_such_module_here:card': cannot import "
                "'no_such_module_here': No module named 'no_such_module_here'.",
                "  Give --card module:attribute, path/to/file.py:attribute or a card JSON file.",
            ],
        ),
        (
            (*DEMO, "--url", "http://127.0.0.1:9"),
            ["error: give --target or --url, not both"],
        ),
        ((), ["error: give the agent to run: --target module:attribute or --url URL"]),
        (
            ("--url", "http://127.0.0.1:9", *DEMO_CARD),
            ["error: --card is for --target (an agent at a URL serves its own card)"],
        ),
        (
            ("--url", "http://127.0.0.1:9", "--api-key", "k-1", "--bearer-token", "t-1"),
            ["error: give --api-key or --bearer-token, not both"],
        ),
        (
            (*DEMO, "--tags", "nope", "--tags", "zip, zap"),
            ["error: no case has any of the tags nope, zip, zap"],
        ),
    ],
    ids=[
        "no-module",
        "no-attribute",
        "bad-card",
        "target-and-url",
        "no-target",
        "card-with-url",
        "two-credentials",
        "no-tag-matches",
    ],
)
def test_what_cannot_run_exits_2_saying_why(
    tmp_path: Path, options: tuple[str, ...], message: list[str]
) -> None:
    cases = write(tmp_path / "cases.json", [WRONG_CODE, HELLO])
    result = lab_run(str(cases), *options)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines() == message


def test_an_unreachable_url_exits_2_in_one_line_without_the_address(tmp_path: Path) -> None:
    cases = write(tmp_path / "cases.json", HELLO)
    port = closed_port()
    result = lab_run(str(cases), "--url", f"http://127.0.0.1:{port}", "--quiet")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: cannot reach the agent at the URL: UPSTREAM_UNAVAILABLE network_error"
    ]
    assert str(port) not in result.stderr


@pytest.mark.parametrize(
    ("tags", "ran"),
    [
        (["--tags", "y"], ["ok"]),
        (["--tags", "x,y"], ["wrong-code", "ok"]),
        (["--tags", "x", "--tags", "y"], ["wrong-code", "ok"]),
        ([], ["wrong-code", "ok"]),
    ],
)
def test_tags_choose_the_cases_run(tmp_path: Path, tags: list[str], ran: list[str]) -> None:
    cases = write(tmp_path / "cases.json", [WRONG_CODE, HELLO])
    report = tmp_path / "report.json"
    result = lab_run(str(cases), *DEMO, *DEMO_CARD, *tags, "--quiet", "--report-json", str(report))
    assert result.exit_code == (1 if "wrong-code" in ran else 0), result.output
    assert [r["case"] for r in json.loads(report.read_text())["results"]] == ran


def test_repeat_concurrency_and_the_three_report_files(tmp_path: Path) -> None:
    cases = write(tmp_path / "cases.json", [WRONG_CODE, HELLO])
    paths = {name: tmp_path / "out" / name for name in ("report.json", "junit.xml", "page.html")}
    result = lab_run(
        str(cases),
        *DEMO,
        *DEMO_CARD,
        "--repeat",
        "2",
        "--concurrency",
        "3",
        "--quiet",
        "--report-json",
        str(paths["report.json"]),
        "--junit",
        str(paths["junit.xml"]),
        "--html",
        str(paths["page.html"]),
    )
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[:5] == FAILURE_LINES
    assert lines[5:10] == FAILURE_LINES  # each repetition is reported
    assert lines[-4:] == [
        f"JSON report: {paths['report.json']}",
        f"JUnit report: {paths['junit.xml']}",
        f"HTML report: {paths['page.html']}",
        "FAIL 2 passed, 2 failed",
    ]

    document = json.loads(paths["report.json"].read_text(encoding="utf-8"))
    assert document["ok"] is False
    assert document["counts"] == {"passed": 2, "failed": 2, "refused": 0, "error": 0}
    assert [(r["case"], r["repeat"], r["outcome"]) for r in document["results"]] == [
        ("wrong-code", 0, "failed"),
        ("wrong-code", 1, "failed"),
        ("ok", 0, "passed"),
        ("ok", 1, "passed"),
    ]
    assert {r["event_source"] for r in document["results"]} == {"events"}

    suites = ET.parse(paths["junit.xml"]).getroot()  # noqa: S314 -- the report just written
    assert (suites.tag, suites.get("tests"), suites.get("failures")) == ("testsuites", "4", "2")
    testcases = suites.findall("./testsuite/testcase")
    assert [case.get("name") for case in testcases] == [
        "wrong-code",
        "wrong-code [repeat 1]",
        "ok",
        "ok [repeat 1]",
    ]
    failure = testcases[0].find("failure")
    assert failure is not None
    assert failure.get("message") == "it failed with UPSTREAM_UNAVAILABLE / component_invoke_error"
    assert testcases[2].find("failure") is None

    page = paths["page.html"].read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "<svg" in page  # the chart is drawn in the page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page  # nothing to fetch: the page opens offline
    assert "wrong-code" in page


def test_quiet_and_not_quiet_print_the_same_results_off_a_terminal(tmp_path: Path) -> None:
    cases = write(tmp_path / "cases.json", [WRONG_CODE, HELLO])
    loud = lab_run(str(cases), *DEMO, *DEMO_CARD)
    quiet = lab_run(str(cases), *DEMO, *DEMO_CARD, "--quiet")
    assert loud.exit_code == quiet.exit_code == 1
    assert loud.stdout == quiet.stdout
    assert loud.stderr == quiet.stderr == ""  # no bar where there is no terminal


@pytest.mark.parametrize("option", ["--repeat", "--concurrency"])
def test_repeat_and_concurrency_are_at_least_1(tmp_path: Path, option: str) -> None:
    cases = write(tmp_path / "cases.json", HELLO)
    result = lab_run(str(cases), *DEMO, option, "0")
    assert result.exit_code == 2
    assert result.stderr == f"error: {option} must be at least 1, got 0\n"


def test_lab_run_puts_the_log_levels_back() -> None:
    names = ("llamon_agent", "a2a", "httpx", "mcp", "uvicorn")
    before = {name: logging.getLogger(name).level for name in names}
    result = lab_run(str(SAMPLES / "demo-agent.json"), *DEMO, *DEMO_CARD)
    assert result.exit_code == 0, result.output
    assert {name: logging.getLogger(name).level for name in names} == before
