"""docs/operations.md, "Triage": the TOML example is a valid guide, every
``llamon triage --reason`` shown prints exactly what the real command prints, and the
``llamon triage --failure ID`` example is what the command prints for the store of the
"Failures and tasks" example (failure 3, a timeout of the search tool), whose
``llamon failures`` table is checked too."""

from __future__ import annotations

import asyncio
import re
import shlex
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from a2a.types import Task, TaskState, TaskStatus
from typer.testing import CliRunner

from llamon_agent.a2a.stores import open_stores
from llamon_agent.a2a.stores.failures import StoredFailure
from llamon_agent.cli import app
from llamon_agent.core.events import RunnerEvent
from llamon_agent.core.settings import DATABASE_URL_ENV, HOME_ENV, TRIAGE_GUIDE_ENV
from llamon_agent.core.triage import parse_guide

DOC = (Path(__file__).parents[3] / "docs" / "operations.md").read_text(encoding="utf-8")
SECTION = DOC.split("### Triage\n", 1)[1].split("\n### ", 1)[0]
TOML = re.findall(r"```toml\n(.*?)```", SECTION, flags=re.DOTALL)
TEXT = re.findall(r"```text\n(.*?)```", SECTION, flags=re.DOTALL)


def _sessions(block: str) -> list[tuple[list[str], list[str]]]:
    """``$ command`` lines and the lines printed after each."""
    sessions: list[tuple[list[str], list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            sessions.append((shlex.split(line[2:]), []))
        else:
            sessions[-1][1].append(line)
    return sessions


def test_the_toml_example_is_a_valid_guide() -> None:
    (block,) = TOML
    guide = parse_guide(block, "my_guide.toml")
    assert guide.reasons() == ["timeout", "ledger_locked"]
    assert list(guide.code_rows) == ["INTERNAL_ERROR"]


def test_every_reason_example_prints_what_the_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TRIAGE_GUIDE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (block,) = TOML
    (tmp_path / "my_guide.toml").write_text(block, encoding="utf-8")
    (tmp_path / "broken.toml").write_text(block.replace("fix =", "fixx =", 1), encoding="utf-8")
    shown = [s for b in TEXT for s in _sessions(b) if "--reason" in s[0]]
    assert len(shown) == 3
    for command, expected in shown:
        assert command[:2] == ["llamon", "triage"]
        result = CliRunner().invoke(app, command[1:])
        assert (result.stdout + result.stderr).splitlines() == expected, command


def test_the_task_example_shows_the_reasons_row_as_the_command_does() -> None:
    ((command, printed),) = [
        s for b in TEXT for s in _sessions(b) if not {"--reason", "--failure"} & set(s[0])
    ]
    assert command[:2] == ["llamon", "triage"]
    start = printed.index("triage (component_invoke_error)")
    result = CliRunner().invoke(app, ["triage", "--reason", "component_invoke_error"])
    assert result.exit_code == 0, result.output
    expected = result.stdout.splitlines()
    assert printed[start : start + len(expected)] == expected
    assert printed[0] == f"task {command[2]}  state failed"


AT = datetime(2026, 11, 30, 19, 12, 49, tzinfo=UTC).timestamp()
TASKS = (
    "1f144080-b2a6-4111-b446-514c5ac847b2",
    "295b6925-b7f8-4c3b-9dd2-93fdc3c8ec3c",
    "3ebd97cc-8784-4fe1-9e0e-d1972e87bb03",
)


def _timeout(task: str, at: float) -> StoredFailure:
    """A timeout of the search tool, as a served agent records it."""
    return StoredFailure(
        task_id=task,
        time=datetime.fromtimestamp(at, UTC),
        error_code="UPSTREAM_TIMEOUT",
        stage="execute",
        reason="timeout",
        message="search took too long",
        operator_action="check_timeout_paging_and_downstream_latency",
        retryable=True,
        agent="billing",
        tool="search",
        evidence={
            "tool": "search",
            "exception_type": "SearchTimedOut",
            "task_id": task,
            "chunk_count": 0,
        },
    )


async def _example_store(home: Path) -> None:
    """The store of the docs' examples: failures 1 to 3 of "Failures and tasks", and the
    events the agent kept for the third task (a search that timed out, after a weather
    call that did not)."""
    stores = await open_stores("sqlite", home=home)
    assert stores.failures is not None
    assert stores.events is not None
    try:
        for task in TASKS:
            status = TaskStatus(state=TaskState.failed)
            await stores.task_store.save(Task(id=task, context_id="c", status=status))
        boom = replace(
            _timeout(TASKS[0], AT + 0.101),
            error_code="INTERNAL_ERROR",
            stage="service",
            reason="runtime_error",
            message="Internal error (incident d8700caf4efa).",
            operator_action="inspect_server_log_by_incident_id",
            retryable=False,
            tool=None,
            incident_id="d8700caf4efa",
            evidence={
                "incident_id": "d8700caf4efa",
                "exception_type": "RuntimeError",
                "task_id": TASKS[0],
                "chunk_count": 0,
            },
        )
        for row in (boom, _timeout(TASKS[1], AT + 0.305), _timeout(TASKS[2], AT + 0.517)):
            await stores.failures.add(row)  # ids 1, 2, 3, in this order
        timed_out = {"failure_reason": "timeout", "error_code": "UPSTREAM_TIMEOUT"}
        steps = [
            ("task.submitted", "a2a_serve", None, {}),
            ("task.working", "a2a_serve", None, {}),
            ("step.started", "tool_loop", "weather", {}),
            ("step.completed", "tool_loop", "weather", {}),
            ("step.started", "tool_loop", "search", {}),
            ("step.failed", "tool_loop", "search", timed_out),
            ("task.failed", "execute", None, timed_out),
        ]
        await stores.events.add(
            [
                RunnerEvent(
                    kind,
                    stage,
                    tool=tool,
                    trace_metadata=meta,
                    task_id=TASKS[2],
                    time=AT + 0.4005 + index * 0.019,
                )
                for index, (kind, stage, tool, meta) in enumerate(steps)
            ]
        )
    finally:
        await stores.close()


def test_the_failure_example_prints_what_the_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (TRIAGE_GUIDE_ENV, DATABASE_URL_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    asyncio.run(_example_store(tmp_path))
    ((command, printed),) = [s for b in TEXT for s in _sessions(b) if "--failure" in s[0]]
    assert command == ["llamon", "triage", "--failure", "3"]
    result = CliRunner().invoke(app, command[1:])
    assert (result.exit_code, result.stderr) == (0, "")
    assert [line.rstrip() for line in result.stdout.splitlines()] == printed
    # the id is the one `llamon failures` lists for that task, as the example there shows
    listed = CliRunner().invoke(app, ["failures", "--until", "2026-11-30T20:00:00"])
    assert listed.exit_code == 0, listed.output
    shown = DOC.split("$ llamon failures --since 1h\n", 1)[1].split("\n\n", 1)[0]
    assert [line.rstrip() for line in listed.stdout.splitlines()] == shown.splitlines()
    assert f"│  3 │ 2026-11-30 19:12:49 │ {TASKS[2]} │" in shown
