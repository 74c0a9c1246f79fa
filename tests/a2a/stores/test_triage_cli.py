"""``llamon triage --reason R`` (no store), ``llamon triage --failure ID`` on a SQLite store
written in process, their bad input, and which events the command calls related."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from a2a.types import Task, TaskState, TaskStatus
from typer.testing import CliRunner, Result

from llamon_agent.a2a.stores import open_stores
from llamon_agent.a2a.stores.failures import StoredFailure
from llamon_agent.a2a.stores.triage_cli import related_events
from llamon_agent.cli import app
from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.events import RunnerEvent
from llamon_agent.core.failures import FailureRecord
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
        " auth_failed, cleanup_failed, card_fetch_failed (`llamon errors` lists them).\n"
    )
    nothing = llamon("triage", "--reason", "zzz")
    assert (nothing.exit_code, nothing.stderr) == (
        2,
        "llamon triage: --reason 'zzz' is not a known reason (`llamon errors` lists them).\n",
    )
    # the next command is still answered
    assert llamon("triage", "--reason", "timeout").exit_code == 0


def test_not_exactly_one_of_task_failure_and_reason_is_exit_2() -> None:
    message = "llamon triage: give exactly one of: a task id, --failure ID, --reason R.\n"
    for args in (
        ["some-task", "--reason", "timeout"],
        ["some-task", "--failure", "1"],
        ["--failure", "1", "--reason", "timeout"],
        ["some-task", "--failure", "1", "--reason", "timeout"],
        [],
    ):
        result = llamon("triage", *args)
        assert (result.exit_code, result.stdout, result.stderr) == (2, "", message), args


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


# --- llamon triage --failure ID ------------------------------------------------------------------

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Kept:
    """A SQLite store under ``home``: task ``t1`` failed twice (a ``timeout`` of the search
    tool, then a ``component_invoke_error`` of the rank node), ``t2`` once."""

    home: Path
    search: StoredFailure
    rank: StoredFailure
    other: StoredFailure


def _row(
    task: str, reason: str, minute: int, *, tool: str | None = None, node: str | None = None
) -> StoredFailure:
    record = FailureRecord.of(reason, tool=tool, evidence={"attempt": minute})
    row = StoredFailure.of(record, task_id=task, context_id="c", agent="billing", node=node)
    return replace(row, time=T0 + timedelta(minutes=minute))


async def _keep(home: Path) -> Kept:
    stores = await open_stores("sqlite", home=home)
    failures, events = stores.failures, stores.events
    assert failures is not None
    assert events is not None
    try:
        for task in ("t1", "t2"):
            status = TaskStatus(state=TaskState.failed)
            await stores.task_store.save(Task(id=task, context_id="c", status=status))
        for row in (
            _row("t1", "timeout", 1, tool="search"),
            _row("t2", "timeout", 2, tool="search"),
            _row("t1", "component_invoke_error", 3, node="rank"),
        ):
            await failures.add(row)
        at = T0.timestamp()
        await events.add(
            [
                RunnerEvent("task.submitted", "a2a_serve", task_id="t1", time=at),
                RunnerEvent("step.started", "tool_loop", tool="search", task_id="t1", time=at + 1),
                RunnerEvent("node.started", "flow_node", node="rank", task_id="t1", time=at + 2),
                RunnerEvent("node.started", "flow_node", node="fetch", task_id="t1", time=at + 3),
                RunnerEvent("task.failed", "flow_node", node="rank", task_id="t1", time=at + 4),
            ]
        )
        by_task = {(row.task_id, row.reason): row for row in (await failures.query()).rows}
    finally:
        await stores.close()
    return Kept(
        home,
        by_task["t1", "timeout"],
        by_task["t1", "component_invoke_error"],
        by_task["t2", "timeout"],
    )


@pytest.fixture
def kept(tmp_path: Path) -> Kept:
    return asyncio.run(_keep(tmp_path))


def _advice(reason: str) -> list[str]:
    return llamon("triage", "--reason", reason).stdout.splitlines()


def test_failure_id_shows_that_record_and_says_which_of_the_tasks_it_is(kept: Kept) -> None:
    rank = kept.rank
    result = llamon("triage", "--failure", str(rank.id), "--home", str(kept.home))
    assert (result.exit_code, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[:5] == [
        "task t1  state failed",
        f"failure {rank.id}: 2 of 2 failure records of this task"
        f" (oldest first; the others: {kept.search.id})",
        "failure: UPSTREAM_UNAVAILABLE / component_invoke_error  stage execute"
        f"  tool/node rank  incident -  id {rank.id}",
        f"  message:  {rank.message}",
        '  evidence: {"attempt": 3}',
    ]
    advice = _advice("component_invoke_error")
    assert lines[5 : 5 + len(advice)] == advice
    after = lines[5 + len(advice) :]
    # the events of this record's node; not those of the other record's tool
    assert after[0] == "related events: 3 of 5 kept (--all-events: every one)"
    assert "search" not in "\n".join(after)
    assert [line.split()[3:8:2] for line in after if "│ 12:" in line] == [
        ["task.submitted", "a2a_serve", "-"],
        ["node.started", "flow_node", "rank"],
        ["task.failed", "flow_node", "rank"],
    ]
    # the same id, task form: both records, each with its id
    whole = llamon("triage", "t1", "--home", str(kept.home))
    assert whole.exit_code == 0, whole.output
    heads = [line for line in whole.stdout.splitlines() if line.startswith("failure")]
    assert [head.rsplit("  id ", 1)[1] for head in heads] == [str(kept.search.id), str(rank.id)]


def test_the_only_failure_of_a_task_says_so(kept: Kept) -> None:
    result = llamon("triage", "--failure", str(kept.other.id), "--home", str(kept.home))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:2] == [
        "task t2  state failed",
        f"failure {kept.other.id}: the only failure record of this task",
    ]
    assert result.stdout.splitlines()[-1] == "no events kept for this task."


def test_failure_id_as_json(kept: Kept) -> None:
    search = kept.search
    result = llamon("triage", "--failure", str(search.id), "--home", str(kept.home), "--json")
    assert (result.exit_code, result.stderr) == (0, "")
    document = json.loads(result.stdout)
    assert list(document) == [
        "task",
        "failureId",
        "taskFailureIds",
        "failures",
        "events",
        "eventsKept",
    ]
    assert document["task"] == {"id": "t1", "state": "failed"}
    assert (document["failureId"], document["taskFailureIds"]) == (
        search.id,
        [search.id, kept.rank.id],
    )
    [shown] = document["failures"]
    reason = json.loads(llamon("triage", "--reason", "timeout", "--json").stdout)
    assert shown == {
        **search.to_dict(),
        "operatorAction": reason["catalog"]["operatorAction"],
        "triage": reason["triage"],
        "catalog": reason["catalog"],
    }
    assert shown["id"] == search.id
    assert [(e["type"], e.get("tool"), e.get("node")) for e in document["events"]] == [
        ("task.submitted", None, None),
        ("step.started", "search", None),
        ("task.failed", None, "rank"),
    ]
    assert document["eventsKept"] == 5


def test_failures_lists_the_id_that_triage_takes(kept: Kept) -> None:
    listed = llamon("failures", "--home", str(kept.home), "--json")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)["failures"]
    assert [(row["id"], row["taskId"], row["reason"]) for row in rows] == [
        (kept.rank.id, "t1", "component_invoke_error"),
        (kept.other.id, "t2", "timeout"),
        (kept.search.id, "t1", "timeout"),
    ]
    assert all(next(iter(row)) == "id" for row in rows)
    table = llamon("failures", "--home", str(kept.home))
    assert table.exit_code == 0, table.output
    header, *cells = [line for line in table.stdout.splitlines() if line.startswith(("┃", "│"))]
    assert header.split("┃")[1].strip() == "id"
    assert [line.split("│")[1].strip() for line in cells] == [
        str(kept.rank.id),
        str(kept.other.id),
        str(kept.search.id),
    ]


def test_an_unknown_failure_id_is_exit_1_and_the_next_is_answered(kept: Kept) -> None:
    unknown = max(row.id or 0 for row in (kept.search, kept.rank, kept.other)) + 1
    for number in (str(unknown), "0", "99999999999999999999999"):
        result = llamon("triage", "--failure", number, "--home", str(kept.home))
        assert (result.exit_code, result.stdout, result.stderr) == (
            1,
            "",
            f"llamon triage: no failure {int(number)} in this store"
            " (`llamon failures` lists the ids).\n",
        ), number
    again = llamon("triage", "--failure", str(kept.other.id), "--home", str(kept.home))
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize("value", ["abc", "1.5", "-3", "", "1 OR 1=1", "٣"])
def test_a_failure_id_that_is_not_a_whole_number_is_exit_2(tmp_path: Path, value: str) -> None:
    # checked before any store is opened (tmp_path holds none)
    result = llamon("triage", "--failure", value, "--home", str(tmp_path))
    assert (result.exit_code, result.stdout, result.stderr) == (
        2,
        "",
        f"llamon triage: --failure {value!r} is not a failure id (a whole number: the id"
        " column of `llamon failures`).\n",
    )


def test_a_failure_id_without_a_store_is_exit_1(tmp_path: Path) -> None:
    result = llamon("triage", "--failure", "1", "--home", str(tmp_path))
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith(f"llamon triage: no task store at {tmp_path / 'tasks.db'}.")
