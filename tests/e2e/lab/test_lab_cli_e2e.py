"""``python -m llamon_agent lab run`` in a process of its own: the agent in process, a
``llamon serve`` subprocess by URL, an agent behind an API key, an unreachable URL, and
the progress bar on a terminal."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
from pathlib import Path
from typing import Any

from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill
from llamon_agent.a2a.server import create_app
from llamon_agent.core.events import EventBus
from llamon_agent.examples.bookshop_agent import agent as bookshop_agent
from tests._support.a2a_server import running_server
from tests._support.serve import CLI_TIMEOUT, llamon_serve

SAMPLES = Path(__file__).parents[3] / "docs" / "lab-cases"
DEMO = ("--target", "llamon_agent.examples.demo_agent:agent")
DEMO_CARD = ("--card", "llamon_agent.examples.demo_agent:card")
KEY = "lab-cli-key-0d93be41f2"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_KEEP_OUT = ("LLAMON_DATABASE_URL", "LLAMON_TRIAGE_GUIDE", "LLAMON_LAB_API_KEY")


async def llamon(*args: str, **env: str) -> tuple[int, str, str]:
    """``python -m llamon_agent ARGS`` (200 columns unless ``env`` says; ``env`` added):
    status, out, err."""
    environ = {k: v for k, v in os.environ.items() if k not in _KEEP_OUT}
    environ["COLUMNS"] = "200"
    environ.update(env)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llamon_agent",
        *args,
        env=environ,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), CLI_TIMEOUT)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def write(path: Path, content: object) -> Path:
    path.write_text(json.dumps(content), encoding="utf-8")
    return path


def results(path: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["results"]
    return found


async def test_the_installed_command_runs_the_sample_cases_in_process() -> None:
    status, out, err = await llamon(
        "lab", "run", str(SAMPLES / "demo-agent.json"), *DEMO, *DEMO_CARD, "--quiet"
    )
    assert status == 0, out + err
    assert out.splitlines()[-1] == "OK 6 passed"
    assert err == ""  # no log line, no traceback of the injected store failure


async def test_lab_run_by_url_against_llamon_serve(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    wrong = write(
        tmp_path / "wrong.json",
        {
            "name": "hello-says-goodbye",
            "mode": "execute",
            "query": "hello",
            "assertions": {"artifact_contains": "Goodbye"},
        },
    )
    flags = ("--store", "sqlite", "--allow-fault-injection")
    async with llamon_serve(tmp_path / "home", *flags) as (_, url):
        status, out, err = await llamon(
            "lab",
            "run",
            str(SAMPLES / "demo-agent.json"),
            "--url",
            url,
            "--quiet",
            "--report-json",
            str(report),
        )
        assert status == 0, out + err
        failing = await llamon("lab", "run", str(wrong), "--url", url, "--quiet")
        again = await llamon("lab", "run", str(SAMPLES / "demo-agent.json"), "--url", url)
    assert out.splitlines()[-2:] == [f"JSON report: {report}", "OK 6 passed"]
    found = {r["case"]: r for r in results(report)}
    hiccup = found["demo-survives-a-task-store-hiccup"]
    assert (hiccup["error_code"], hiccup["failure_reason"], hiccup["event_source"]) == (
        "UPSTREAM_UNAVAILABLE",
        "database_unavailable",
        "none",  # the request failed before a task existed
    )
    assert found["demo-hello"]["event_source"] == "event_stream"
    assert found["demo-upstream-fails-cleanly"]["events"][-1]["type"] == "task.failed"
    status, out, err = failing
    assert status == 1, out + err
    assert out.splitlines()[:2] == [
        "FAILED hello-says-goodbye",
        "  artifact_contains: no artifact contains 'Goodbye'",
    ]
    assert out.splitlines()[-1] == "FAIL 1 failed"
    assert again[0] == 0, again  # the server answers the next run


def keyed_card() -> Any:
    return build_agent_card(
        name="keyed-bookshop",
        description="Finds books for callers with the bookshop's API key.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        input_modes=("text/plain",),
        skills=[skill("books", "Find books", "Searches the catalog.", tags=["books"])],
        auth=AuthSpec.api_key(),
    )


async def test_an_api_key_from_the_environment_and_what_is_seen_without_it(
    tmp_path: Path,
) -> None:
    cases = write(
        tmp_path / "cases.json",
        {
            "name": "gibson",
            "mode": "execute",
            "query": "Which books by William Gibson do you have?",
            "assertions": {"selected_target": "search_books", "final_state": "completed"},
        },
    )
    report = tmp_path / "report.json"
    card = keyed_card()
    app = create_app(bookshop_agent, card, events=EventBus(), auth=AuthConfig.from_card(card, KEY))
    async with running_server(app) as url:
        keyed = await llamon(
            "lab",
            "run",
            str(cases),
            "--url",
            url,
            "--quiet",
            "--report-json",
            str(report),
            LLAMON_LAB_API_KEY=KEY,
        )
        anonymous = await llamon("lab", "run", str(cases), "--url", url, "--quiet", COLUMNS="400")
    status, out, err = keyed
    assert status == 0, out + err
    (result,) = results(report)
    assert result["event_source"] == "event_stream"  # the stream was read with the key
    status, out, err = anonymous
    assert status == 1, out + err
    assert out.splitlines()[:5] == [
        "FAILED gibson",
        "  selected_target: cannot be checked: the agent offers no event stream and the task "
        "has no tool_results artifact; final_state: ended no task (the request was answered "
        "with an error)",
        "  failure: errorCode=AUTH_REQUIRED, errorReason=credentials_required, "
        "errorMessage=This agent requires an API key in the 'X-API-Key' header., "
        "retriable=False, retried=0, httpStatus=401, jsonrpcCode=-32040",
        "  look first: The auth profile and credential freshness for the call in the record.",
        "  fix: Refresh or configure the credentials.",
    ]
    assert KEY not in keyed[1] + keyed[2]
    assert KEY not in report.read_text(encoding="utf-8")


async def test_an_unreachable_url_is_one_line_without_the_address(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cases = write(tmp_path / "cases.json", {"name": "hi", "mode": "execute", "query": "hi"})
    status, out, err = await llamon("lab", "run", str(cases), "--url", f"http://127.0.0.1:{port}")
    assert status == 2
    assert out == ""
    assert err == "error: cannot reach the agent at the URL: UPSTREAM_UNAVAILABLE network_error\n"


async def test_the_progress_bar_shows_on_a_terminal_unless_quiet(tmp_path: Path) -> None:
    cases = write(
        tmp_path / "cases.json",
        [
            {"name": "one", "mode": "execute", "query": "hello"},
            {"name": "two", "mode": "execute", "query": "hello"},
        ],
    )
    terminal = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1"}  # rich: stderr is a terminal
    status, _, err = await llamon("lab", "run", str(cases), *DEMO, **terminal)
    assert status == 0
    shown = ANSI.sub("", err)
    assert "cases" in shown
    assert "2/2" in shown
    status, _, err = await llamon("lab", "run", str(cases), *DEMO, "--quiet", **terminal)
    assert status == 0
    assert err == ""
