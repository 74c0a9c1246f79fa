"""``llamon triage --reason R`` (no store), its bad input, and which events it calls related."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from llamon_agent.a2a.stores.failures import StoredFailure
from llamon_agent.a2a.stores.triage_cli import related_events
from llamon_agent.cli import app
from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.events import RunnerEvent
from llamon_agent.core.settings import TRIAGE_GUIDE_ENV
from llamon_agent.core.triage import package_guide

MINE = """
[[row]]
reason = "timeout"
symptom = "Our search is slow."
look_first = "The search dashboard."
fix = "Page the search team."
"""


@pytest.fixture(autouse=True)
def _no_user_guide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TRIAGE_GUIDE_ENV, raising=False)


def llamon(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def test_reason_prints_the_guide_row_and_the_catalog_entry() -> None:
    row, spec = package_guide().row("http_4xx"), reason_spec("http_4xx")
    assert row is not None
    assert spec is not None
    result = llamon("triage", "--reason", "http_4xx")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        "triage (http_4xx)",
        f"  symptom:     {row.symptom}",
        f"  look first:  {row.look_first}",
        f"  fix:         {row.fix}",
        "operator action: check_request_arguments_and_business_validation",
        "catalog: UPSTREAM_UNAVAILABLE at stage execute, retryable no; "
        "the downstream API rejected the request",
    ]


def test_reason_as_json() -> None:
    result = llamon("triage", "--reason", "rate_limited", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "reason": "rate_limited",
        "triage": {
            "reason": "rate_limited",
            "symptom": "The downstream API answered 429.",
            "lookFirst": "retryAfterMs in the error data and the API's quota.",
            "fix": "Back off (honour retryAfterMs) or raise the quota.",
            "matched": "reason",
        },
        "catalog": {
            "reason": "rate_limited",
            "stage": "execute",
            "errorCode": "RATE_LIMITED",
            "retryable": True,
            "operatorAction": "back_off_or_raise_quota",
            "meaning": "the downstream API answered 429",
        },
    }


def test_an_unknown_reason_is_exit_2_naming_the_option_with_close_matches() -> None:
    result = llamon("triage", "--reason", "auth_faild")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        "llamon triage: --reason 'auth_faild' is not a known reason; close matches:"
        " auth_failed, cleanup_failed, scrub_failed (`llamon errors` lists them).\n"
    )
    nothing = llamon("triage", "--reason", "zzz")
    assert (nothing.exit_code, nothing.stderr) == (
        2,
        "llamon triage: --reason 'zzz' is not a known reason (`llamon errors` lists them).\n",
    )
    # the next command is still answered
    assert llamon("triage", "--reason", "timeout").exit_code == 0


def test_a_task_id_and_reason_together_or_neither_is_exit_2() -> None:
    message = "llamon triage: give a task id or --reason R (one of them).\n"
    both = llamon("triage", "some-task", "--reason", "timeout")
    neither = llamon("triage")
    assert (both.exit_code, both.stderr) == (2, message)
    assert (neither.exit_code, neither.stderr) == (2, message)


def test_a_users_guide_replaces_the_row_by_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text(MINE, encoding="utf-8")
    by_option = llamon("triage", "--reason", "timeout", "--guide", str(mine), "--json")
    assert by_option.exit_code == 0, by_option.output
    assert json.loads(by_option.stdout)["triage"]["fix"] == "Page the search team."
    monkeypatch.setenv(TRIAGE_GUIDE_ENV, str(mine))
    by_env = llamon("triage", "--reason", "timeout")
    assert by_env.exit_code == 0, by_env.output
    assert "  fix:         Page the search team." in by_env.stdout.splitlines()


def test_a_users_own_reason_without_a_catalog_entry_is_shown(tmp_path: Path) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text(MINE.replace('"timeout"', '"payroll_locked"'), encoding="utf-8")
    result = llamon("triage", "--reason", "payroll_locked", "--guide", str(mine))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == (
        "catalog: 'payroll_locked' is not in the reason catalog."
    )


def test_a_broken_guide_file_is_exit_2_naming_the_file_and_row(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text(MINE.replace("fix =", "fixx ="), encoding="utf-8")
    result = llamon("triage", "--reason", "timeout", "--guide", str(broken))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"llamon triage: {broken}: row 1 (reason 'timeout'): unknown key(s) fixx;"
        " a row has reason, symptom, look_first, fix.\n"
    )


def test_a_task_without_a_store_is_exit_1(tmp_path: Path) -> None:
    result = llamon("triage", "some-task", "--home", str(tmp_path))
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith(f"llamon triage: no task store at {tmp_path / 'tasks.db'}.")


def _failure(tool: str | None = None, node: str | None = None) -> StoredFailure:
    return StoredFailure(
        task_id="t1",
        time=datetime.now(UTC),
        error_code="UPSTREAM_TIMEOUT",
        stage="execute",
        reason="timeout",
        message="search took too long",
        operator_action="",
        retryable=True,
        tool=tool,
        node=node,
    )


def test_related_events_are_the_task_the_failing_tool_or_node_and_any_failure() -> None:
    events = [
        RunnerEvent("task.submitted", "a2a_serve", task_id="t1"),
        RunnerEvent("step.started", "tool_loop", tool="search"),
        RunnerEvent("step.started", "tool_loop", tool="weather"),
        RunnerEvent("step.completed", "tool_loop", tool="weather"),
        RunnerEvent("node.started", "flow_node", node="fetch"),
        RunnerEvent("node.started", "flow_node", node="rank"),
        RunnerEvent("model.retry", "model_call", trace_metadata={"error_code": "RATE_LIMITED"}),
        RunnerEvent(
            "step.failed", "tool_loop", tool="search", trace_metadata={"failure_reason": "timeout"}
        ),
        RunnerEvent("task.failed", "execute", task_id="t1"),
    ]
    picked = related_events(events, [_failure(tool="search"), _failure(node="rank")])
    assert [(e.type, e.tool or e.node) for e in picked] == [
        ("task.submitted", None),
        ("step.started", "search"),
        ("node.started", "rank"),
        ("model.retry", None),
        ("step.failed", "search"),
        ("task.failed", None),
    ]
