"""A real agent fails on 127.0.0.1 over SQLite; ``llamon failures``, ``llamon tasks`` and
``llamon task ID`` (the real CLI) read back exactly what it stored; ``llamon serve
--log-format json`` writes one task-end line per task with its fields, and no secret."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import open_stores
from llamon_agent.cli import app
from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.codes import ErrorCode
from llamon_agent.exceptions import LlamonError
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    user_message,
)
from tests._support.serve import rpc
from tests._support.stores import postgres_schema
from tests.e2e.test_operator_logs import SECRET, send_params, serve


class SearchTimedOut(
    LlamonError, code=ErrorCode.UPSTREAM_TIMEOUT, reason="timeout", retriable=True
):
    """The search tool did not answer in time."""


async def agent(ctx: Any) -> str:
    if ctx.text == "boom":
        raise RuntimeError(f"bank said no, api_key={SECRET}")
    if ctx.text == "search":
        raise SearchTimedOut("search took too long", tool="search")
    return "ok"


async def cli(*args: str) -> Result:
    """The real ``llamon`` command (it runs its own event loop, so in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, app, list(args))


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


async def _served_failures(home: Path, dsn: str | None = None) -> dict[str, Any]:
    """Send boom, search, search, hi to the agent served over SQLite in ``home`` (or the
    PostgreSQL of ``dsn``); the final tasks by name."""
    stores = await open_stores("postgres", dsn=dsn) if dsn else await open_stores(home=home)
    application = create_app(
        agent, make_card(), task_store=stores.task_store, failure_store=stores.failures
    )
    tasks: dict[str, Any] = {}
    try:
        async with running_server(application) as url, a2a_client(url) as client:
            for name, text in (("boom", "boom"), ("s1", "search"), ("s2", "search")):
                tasks[name] = await send(client, user_message(text))
            tasks["hi"] = await send(client, user_message("hi"))  # still answered
    finally:
        await stores.close()  # the failure writes are committed first
    return tasks


async def test_llamon_failures_lists_what_the_served_agent_stored(tmp_path: Path) -> None:
    tasks = await _served_failures(tmp_path)
    assert tasks["hi"].status.state.value == "completed"
    boom = error_data(tasks["boom"])

    listed = as_json(await cli("failures", "--home", str(tmp_path), "--json"))["failures"]
    picked = [
        (f["taskId"], f["agent"], f["errorCode"], f["reason"], f["stage"], f["tool"])
        for f in listed
    ]
    assert picked == [
        (tasks["s2"].id, "test-agent", "UPSTREAM_TIMEOUT", "timeout", "execute", "search"),
        (tasks["s1"].id, "test-agent", "UPSTREAM_TIMEOUT", "timeout", "execute", "search"),
        (tasks["boom"].id, "test-agent", "INTERNAL_ERROR", boom["errorReason"], "service", None),
    ]
    assert listed[2]["incidentId"] == boom["incidentId"] is not None
    assert listed[2]["contextId"] == tasks["boom"].context_id
    ids = [f["id"] for f in listed]  # the row numbers `llamon triage --failure` takes
    assert all(isinstance(i, int) for i in ids)
    assert ids == sorted(set(ids), reverse=True)
    timeout = reason_spec("timeout")
    assert timeout is not None
    assert listed[0]["operatorAction"] == timeout.operator_action
    assert listed[0]["retryable"] is True

    by_reason = as_json(await cli("failures", "--home", str(tmp_path), "--by", "reason", "--json"))
    assert by_reason["by"] == "reason"
    assert [(c["value"], c["count"]) for c in by_reason["counts"]] == [
        ("timeout", 2),
        (boom["errorReason"], 1),
    ]
    by_code = as_json(await cli("failures", "--home", str(tmp_path), "--by", "code", "--json"))
    assert [(c["value"], c["count"]) for c in by_code["counts"]] == [
        ("UPSTREAM_TIMEOUT", 2),
        ("INTERNAL_ERROR", 1),
    ]

    only = await cli(
        "failures", "--home", str(tmp_path), "--code", "upstream_timeout", "--since", "1h"
    )
    assert only.exit_code == 0, only.output
    assert tasks["s1"].id in only.stdout
    assert tasks["s2"].id in only.stdout
    assert tasks["boom"].id not in only.stdout
    assert timeout.operator_action in only.stdout
    none = await cli("failures", "--home", str(tmp_path), "--tool", "nothing")
    assert (none.exit_code, none.stdout) == (0, "no failures match.\n")

    failed = as_json(await cli("tasks", "--home", str(tmp_path), "--state", "failed", "--json"))
    assert [(t["id"], t["state"], t["errorCode"]) for t in failed["tasks"]] == [
        (tasks["s2"].id, "failed", "UPSTREAM_TIMEOUT"),
        (tasks["s1"].id, "failed", "UPSTREAM_TIMEOUT"),
        (tasks["boom"].id, "failed", "INTERNAL_ERROR"),
    ]
    every = as_json(await cli("tasks", "--home", str(tmp_path), "--json"))
    assert next(t["id"] for t in every["tasks"]) == tasks["hi"].id

    one = as_json(await cli("task", tasks["boom"].id, "--home", str(tmp_path), "--json"))
    assert one["task"]["status"]["state"] == "failed"
    assert one["errorData"] == boom
    assert [f["incidentId"] for f in one["failures"]] == [boom["incidentId"]]
    assert [f["id"] for f in one["failures"]] == [listed[2]["id"]]
    shown = await cli("task", tasks["s1"].id, "--home", str(tmp_path))
    assert shown.exit_code == 0, shown.output
    assert "state failed" in shown.stdout
    assert '"errorReason": "timeout"' in shown.stdout

    outputs = [only.stdout, shown.stdout, json.dumps([listed, failed, one])]
    assert not any(SECRET in text or "api_key" in text for text in outputs)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("failures", "--code", "NOPE"), "llamon failures: --code unknown errorCode 'NOPE'"),
        (("failures", "--since", "yesterday"), "llamon failures: --since 'yesterday' is neither"),
        (("failures", "--by", "colour"), "llamon failures: --by 'colour': use one of reason"),
        (("failures", "--limit", "0"), "llamon failures: --limit must be 1 to 1000"),
        (("tasks", "--state", "broken"), "llamon tasks: --state 'broken': use one of"),
    ],
)
async def test_bad_input_names_the_option_and_exits_2(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    result = await cli(*args, "--home", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.startswith(message), result.stderr
    assert "Traceback" not in result.output


async def test_a_missing_store_is_one_line_and_exit_1(tmp_path: Path) -> None:
    result = await cli("failures", "--home", str(tmp_path / "nowhere"))
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"llamon failures: no task store at {tmp_path / 'nowhere' / 'tasks.db'}."
    )
    missing = await cli("task", "no-such-task", "--home", str(_store_home(tmp_path)))
    assert (missing.exit_code, missing.stderr) == (
        1,
        "llamon task: no task 'no-such-task' in this store.\n",
    )


def _store_home(tmp_path: Path) -> Path:
    import sqlite3

    from llamon_agent.a2a.stores.sqlite import SQLITE_SCHEMA_VERSION

    with sqlite3.connect(tmp_path / "tasks.db") as plain:  # an empty store, as created
        plain.execute(f"PRAGMA user_version = {SQLITE_SCHEMA_VERSION - 1}")
    return tmp_path


async def test_llamon_serve_logs_one_json_line_per_task_end(tmp_path: Path) -> None:
    async with (
        httpx.AsyncClient(timeout=10) as http,
        serve(tmp_path, "--log-format", "json") as (url, lines),
    ):
        failed = (await rpc(http, url + "/", "message/send", send_params("boom")))["result"]
        done = (await rpc(http, url + "/", "message/send", send_params("hi")))["result"]
    data = error_data_dict(failed)
    ends = [
        record
        for record in (json.loads(line) for line in lines if line.startswith("{"))
        if record.get("event") == "task_end"
    ]
    assert [(r["logger"], r["level"]) for r in ends] == [("llamon_agent.a2a", "INFO")] * 2
    first, second = ends
    assert first["time"].endswith("Z")
    assert isinstance(first["durationMs"], float)
    assert first["durationMs"] >= 0
    assert {k: v for k, v in first.items() if k not in ("time", "durationMs")} == {
        "level": "INFO",
        "logger": "llamon_agent.a2a",
        "message": (
            f"task {failed['id']} failed in {first['durationMs']} ms errorCode=INTERNAL_ERROR"
            f" reason={data['errorReason']} stage=service incidentId={data['incidentId']}"
        ),
        "event": "task_end",
        "taskId": failed["id"],
        "state": "failed",
        "errorCode": "INTERNAL_ERROR",
        "reason": data["errorReason"],
        "stage": "service",
        "incidentId": data["incidentId"],
    }
    assert (second["taskId"], second["state"], second["errorCode"], second["reason"]) == (
        done["id"],
        "completed",
        None,
        None,
    )
    assert SECRET not in "".join(lines)

    stored = as_json(await cli("failures", "--home", str(tmp_path), "--json"))["failures"]
    assert [(f["taskId"], f["agent"], f["incidentId"]) for f in stored] == [
        (failed["id"], "agent", data["incidentId"])
    ]


def error_data_dict(task: dict[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = task["status"]["message"]["parts"]
    return next(p["data"] for p in parts if p["kind"] == "data")


async def test_llamon_failures_reads_a_shared_postgresql_store(tmp_path: Path) -> None:
    async with postgres_schema() as dsn:
        tasks = await _served_failures(tmp_path, dsn)
        listed = as_json(await cli("failures", "--database-url", dsn, "--json"))["failures"]
        counted = as_json(await cli("failures", "--database-url", dsn, "--by", "tool", "--json"))[
            "counts"
        ]
        failed = as_json(await cli("tasks", "--database-url", dsn, "--state", "failed", "--json"))
        one = as_json(await cli("task", tasks["s1"].id, "--database-url", dsn, "--json"))
    assert sorted((f["taskId"], f["reason"], f["tool"]) for f in listed) == sorted(
        [
            (tasks["s1"].id, "timeout", "search"),
            (tasks["s2"].id, "timeout", "search"),
            (tasks["boom"].id, error_data(tasks["boom"])["errorReason"], None),
        ]
    )
    assert [(c["value"], c["count"]) for c in counted] == [("search", 2), (None, 1)]
    assert sorted(t["id"] for t in failed["tasks"]) == sorted(
        tasks[name].id for name in ("boom", "s1", "s2")
    )
    assert [(f["taskId"], f["errorCode"]) for f in one["failures"]] == [
        (tasks["s1"].id, "UPSTREAM_TIMEOUT")
    ]
