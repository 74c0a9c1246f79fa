"""The Quality Lab's pytest plugin, as a user meets it: ``python -m pytest`` run in a
directory of its own (the plugin comes from the installed package's ``pytest11`` entry
point), its case items, outcomes and failure text, its usage errors, ``-k`` by tag, and
the ``lab`` fixture in sync and async tests."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from llamon_agent.a2a.server import create_app
from llamon_agent.examples import demo_agent
from tests._support.a2a_server import running_server

SAMPLES = Path(__file__).parents[2] / "docs" / "lab-cases"
TARGET = ("--llamon-lab-target", "llamon_agent.examples.demo_agent:agent")
CARD = ("--llamon-lab-card", "llamon_agent.examples.demo_agent:card")
TIMEOUT = 120
WRONG_CODE = {
    "name": "wrong-code",
    "mode": "execute",
    "query": "upstream",
    "assertions": {"error_code": "RATE_LIMITED"},
    "tags": ["x"],
}
HELLO = {"name": "ok", "mode": "execute", "query": "hello", "tags": ["y"]}
USAGE_ERROR = 4
INTERRUPTED = 2
SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|deselected)")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory with its own pytest.ini, the demo agent's sample cases and two more."""
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n", encoding="utf-8"
    )
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "demo-agent.json").write_text(
        (SAMPLES / "demo-agent.json").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (cases / "more.json").write_text(json.dumps([WRONG_CODE, HELLO]), encoding="utf-8")
    return tmp_path


def pytest_in(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in ``directory`` (no cache; this run's ``PYTEST_*``
    variables left out)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["COLUMNS"] = "200"
    return subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def counts(done: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """The counts of the final summary line (``1 failed, 7 passed in 2.1s``)."""
    last = done.stdout.strip().splitlines()[-1]
    return {
        kind.rstrip("s") if kind == "errors" else kind: int(n) for n, kind in SUMMARY.findall(last)
    }


def test_the_plugin_is_registered_through_the_pytest11_entry_point() -> None:
    (found,) = [ep for ep in entry_points(group="pytest11") if ep.name == "llamon_lab"]
    assert found.value == "llamon_agent.lab.pytest_plugin"


def test_each_case_is_an_item_named_file_and_case(project: Path) -> None:
    done = pytest_in(project, "--llamon-lab", "cases", *TARGET, "--collect-only", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    items = [line for line in done.stdout.splitlines() if "::" in line]
    assert items == [
        "cases/demo-agent.json::demo-hello",
        "cases/demo-agent.json::demo-upstream-fails-cleanly",
        "cases/demo-agent.json::demo-quota-says-when-to-retry",
        "cases/demo-agent.json::demo-partial-keeps-its-artifact",
        "cases/demo-agent.json::demo-birthday-asks-for-input",
        "cases/demo-agent.json::demo-survives-a-task-store-hiccup",
        "cases/more.json::wrong-code",
        "cases/more.json::ok",
    ]


def test_cases_pass_and_fail_and_a_failure_shows_assertions_record_and_triage(
    project: Path,
) -> None:
    done = pytest_in(project, "--llamon-lab", "cases", *TARGET, *CARD)
    assert done.returncode == 1, done.stdout + done.stderr
    assert counts(done) == {"failed": 1, "passed": 7}
    lines = done.stdout.splitlines()
    start = lines.index("lab case wrong-code: failed")
    assert lines[start + 1 : start + 7] == [
        "  error_code: it failed with UPSTREAM_UNAVAILABLE / component_invoke_error",
        "  assertion error_code: expected 'RATE_LIMITED', got 'UPSTREAM_UNAVAILABLE' -- it "
        "failed with UPSTREAM_UNAVAILABLE / component_invoke_error",
        "  failure record: errorCode=UPSTREAM_UNAVAILABLE, errorReason=component_invoke_error, "
        "errorMessage=the account service did not answer, retriable=True, retried=0, "
        "message=the account service did not answer",
        "  triage -- symptom: Calling a component (MCP, RAG, DB, LLM) failed.",
        "  triage -- look first: The component named in the record (tool/node) and its health "
        "at that time.",
        "  triage -- fix: Check the upstream component's health; the caller may retry.",
    ]
    assert any(line.startswith("FAILED cases/more.json::wrong-code") for line in lines)
    assert "Traceback" not in done.stdout  # the case's lines, not the plugin's stack


def test_a_broken_case_file_is_a_collection_error_naming_each_problem(project: Path) -> None:
    broken = project / "cases" / "broken.json"
    broken.write_text(
        json.dumps([{"name": "x", "mode": "bogus", "query": "hi"}, {"mode": "plan"}]),
        encoding="utf-8",
    )
    done = pytest_in(project, "--llamon-lab", "cases", *TARGET)
    assert done.returncode == INTERRUPTED, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(re.fullmatch(r"_+ ERROR collecting cases/broken\.json _+", line) for line in lines)
    assert f"{broken}: case 'x': mode: Input should be 'execute' or 'plan'" in lines
    assert (
        f"{broken}: case #1: give the message as either 'query' or 'parts' (exactly one)" in lines
    )
    assert counts(done) == {"error": 1}  # nothing ran


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            (),
            "ERROR: --llamon-lab needs the agent to run: --llamon-lab-target module:attribute "
            "or --llamon-lab-url URL (exactly one)",
        ),
        (
            (*TARGET, "--llamon-lab-url", "http://127.0.0.1:9"),
            "ERROR: --llamon-lab needs the agent to run: --llamon-lab-target module:attribute "
            "or --llamon-lab-url URL (exactly one)",
        ),
        (
            ("--llamon-lab-target", "no_such_module_here:agent"),
            "ERROR: cannot load the agent 'no_such_module_here:agent': cannot import "
            "'no_such_module_here': No module named 'no_such_module_here'.",
        ),
        (
            ("--llamon-lab", "missing", *TARGET),
            "ERROR: --llamon-lab missing: no such file or directory",
        ),
    ],
    ids=["no-target", "target-and-url", "target-not-loadable", "missing-path"],
)
def test_what_cannot_run_is_a_usage_error(
    project: Path, options: tuple[str, ...], message: str
) -> None:
    done = pytest_in(project, "--llamon-lab", "cases", *options)
    assert done.returncode == USAGE_ERROR, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    assert errors[0] == message  # (an old click may warn about itself first)
    assert "Traceback" not in done.stderr


def test_k_selects_cases_by_tag(project: Path) -> None:
    done = pytest_in(project, "--llamon-lab", "cases", *TARGET, *CARD, "-k", "failure", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    assert counts(done) == {"passed": 2, "deselected": 6}
    ran = [line.split(" ")[0] for line in done.stdout.splitlines() if " PASSED" in line]
    assert ran == [
        "cases/demo-agent.json::demo-upstream-fails-cleanly",
        "cases/demo-agent.json::demo-quota-says-when-to-retry",
    ]


FIXTURE_TESTS = """
import pytest

from llamon_agent.examples.demo_agent import agent, card


def test_sync(lab):
    result = lab.run({"name": "hi", "mode": "execute", "query": "hello",
                      "assertions": {"artifact_contains": "Hello!"}}, target=agent, card=card)
    lab.assert_passed(result)
    assert result.event_source == "events"


@pytest.mark.asyncio
async def test_async(lab):
    result = await lab.arun({"name": "up", "mode": "execute", "query": "upstream",
                             "assertions": {"error_code": "UPSTREAM_UNAVAILABLE"}},
                            target=agent, card=card)
    lab.assert_passed(result)
    assert result.failure_reason == "component_invoke_error"


def test_a_failing_case(lab):
    lab.assert_passed(lab.run({"name": "no", "mode": "execute", "query": "quota",
                               "assertions": {"final_state": "completed"}}, target=agent))


@pytest.mark.asyncio
async def test_sync_run_inside_a_loop(lab):
    with pytest.raises(RuntimeError, match=r"use 'await lab\\.arun\\(\\.\\.\\.\\)'"):
        lab.run({"name": "hi", "mode": "execute", "query": "hello"}, target=agent)
"""


def test_the_lab_fixture_in_sync_and_async_tests(project: Path) -> None:
    (project / "test_with_lab.py").write_text(FIXTURE_TESTS, encoding="utf-8")
    done = pytest_in(project, "test_with_lab.py", "-v")
    assert done.returncode == 1, done.stdout + done.stderr
    assert counts(done) == {"failed": 1, "passed": 3}
    lines = done.stdout.splitlines()
    outcomes = dict(
        re.findall(r"^test_with_lab\.py::(\w+) (PASSED|FAILED)", done.stdout, flags=re.MULTILINE)
    )
    assert outcomes == {
        "test_sync": "PASSED",
        "test_async": "PASSED",
        "test_a_failing_case": "FAILED",
        "test_sync_run_inside_a_loop": "PASSED",
    }
    assert "E           AssertionError: lab case no: failed" in lines
    assert "E             final_state: ended failed" in lines
    assert (
        "E             assertion final_state: expected 'completed', got 'failed' -- ended failed"
        in lines
    )
    assert any(
        line.startswith(
            "E             failure record: errorCode=RATE_LIMITED, "
            "errorReason=classifier_quota_exceeded"
        )
        for line in lines
    )


def test_without_the_option_case_files_are_not_collected(project: Path) -> None:
    (project / "test_plain.py").write_text("def test_plain():\n    assert True\n", encoding="utf-8")
    done = pytest_in(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert counts(done) == {"passed": 1}
    assert "cases/" not in done.stdout
    only = pytest_in(project, "--llamon-lab", "cases/more.json", *TARGET)
    assert counts(only) == {"failed": 1, "passed": 1}  # no test path given: the cases only
    both = pytest_in(project, "test_plain.py", "--llamon-lab", "cases/more.json", *TARGET)
    assert counts(both) == {"failed": 1, "passed": 2}  # the plain test and the cases


async def test_cases_against_a_url_and_a_refused_case(project: Path) -> None:
    app = create_app(demo_agent.agent, demo_agent.card)  # fault injection not allowed
    async with running_server(app) as url:
        done = await asyncio.to_thread(
            pytest_in, project, "--llamon-lab", "cases/demo-agent.json", "--llamon-lab-url", url
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert counts(done) == {"failed": 1, "passed": 5}
    lines = done.stdout.splitlines()
    start = lines.index("lab case demo-survives-a-task-store-hiccup: refused")
    assert lines[start + 1] == (
        "  the agent does not accept fault injection (its card does not declare "
        "https://llamon.dev/extensions/lab-faults/v1); serve it with --allow-fault-injection, "
        "on 127.0.0.1, to run cases with faults or in plan mode"
    )
