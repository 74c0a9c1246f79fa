"""``llamon triage ID``: a real ``llamon serve`` process fails a task over SQLite; another
``llamon`` process reads the failure back with its triage row, operator action and events."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.triage import package_guide
from tests._support.serve import llamon_cli, llamon_serve, send_text
from tests._support.stores import postgres_schema
from tests.e2e.test_failures_cli import _served_failures
from tests.e2e.test_operator_logs import SECRET


async def test_triage_of_a_served_failure_prints_its_row_action_and_events(
    tmp_path: Path,
) -> None:
    async with llamon_serve(tmp_path) as (_, url), httpx.AsyncClient(timeout=20) as http:
        failed = await send_text(http, url, "upstream")
        assert failed["status"]["state"] == "failed"
        # the next request is still answered
        fine = await send_text(http, url, "hello")
        assert fine["status"]["state"] == "completed"
    # the server has stopped: what it kept is committed
    home = str(tmp_path)
    spec = reason_spec("component_invoke_error")
    row = package_guide().row("component_invoke_error")
    assert spec is not None
    assert row is not None

    status, out, err = await llamon_cli("triage", failed["id"], "--home", home)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"task {failed['id']}  state failed"
    assert lines[1].startswith(
        "failure: UPSTREAM_UNAVAILABLE / component_invoke_error  stage execute"
    )
    assert "  message:  " in lines[2]
    assert lines[4:9] == [
        "triage (component_invoke_error)",
        f"  symptom:     {row.symptom}",
        f"  look first:  {row.look_first}",
        f"  fix:         {row.fix}",
        f"operator action: {spec.operator_action}",
    ]
    assert "task.submitted" in out
    assert "task.failed" in out
    assert "component_invoke_error / UPSTREAM_UNAVAILABLE" in out

    status, out, err = await llamon_cli("triage", failed["id"], "--home", home, "--json")
    assert status == 0, err
    document = json.loads(out)
    assert document["task"] == {"id": failed["id"], "state": "failed"}
    [failure] = document["failures"]
    assert (failure["taskId"], failure["errorCode"], failure["reason"]) == (
        failed["id"],
        "UPSTREAM_UNAVAILABLE",
        "component_invoke_error",
    )
    assert failure["triage"] == {**row.to_dict(), "matched": "reason"}
    assert failure["catalog"]["operatorAction"] == spec.operator_action
    types = [event["type"] for event in document["events"]]
    assert types[0] == "task.submitted"
    assert types[-1] == "task.failed"
    assert document["eventsKept"] >= len(types)

    status, out, err = await llamon_cli("triage", fine["id"], "--home", home)
    assert (status, out) == (1, "")
    assert err == (
        f"llamon triage: task {fine['id']} has no failure record (state completed);"
        " nothing to triage.\n"
    )
    status, out, err = await llamon_cli("triage", "no-such-task", "--home", home)
    assert (status, err) == (1, "llamon triage: no task 'no-such-task' in this store.\n")


async def test_triage_shows_the_fallback_row_and_never_the_raw_secret(tmp_path: Path) -> None:
    tasks = await _served_failures(tmp_path)
    assert tasks["hi"].status.state.value == "completed"
    home = str(tmp_path)
    guide = package_guide()

    status, out, err = await llamon_cli("triage", tasks["boom"].id, "--home", home, "--json")
    assert status == 0, err
    [failure] = json.loads(out)["failures"]
    assert (failure["errorCode"], failure["reason"]) == ("INTERNAL_ERROR", "runtime_error")
    assert failure["catalog"] is None
    fallback = guide.code_rows["INTERNAL_ERROR"]
    assert failure["triage"] == {**fallback.to_dict(), "matched": "errorCode"}
    status, text, err = await llamon_cli("triage", tasks["boom"].id, "--home", home)
    assert status == 0, err
    assert "triage (runtime_error: no row of its own; the INTERNAL_ERROR row)" in text
    assert f"operator action (as recorded): {failure['operatorAction']}" in text
    assert SECRET not in out + text
    assert "api_key" not in out + text

    status, out, err = await llamon_cli("triage", tasks["s1"].id, "--home", home)
    assert status == 0, err
    timeout = guide.row("timeout")
    assert timeout is not None
    assert "failure: UPSTREAM_TIMEOUT / timeout  stage execute  tool/node search" in out
    assert f"  fix:         {timeout.fix}" in out.splitlines()


async def test_triage_reads_a_shared_postgresql_store(tmp_path: Path) -> None:
    async with postgres_schema() as dsn:
        tasks = await _served_failures(tmp_path, dsn)
        status, out, err = await llamon_cli(
            "triage", tasks["s2"].id, "--database-url", dsn, "--json"
        )
    assert status == 0, err
    document = json.loads(out)
    assert [(f["taskId"], f["reason"], f["tool"]) for f in document["failures"]] == [
        (tasks["s2"].id, "timeout", "search")
    ]
    assert document["failures"][0]["triage"]["matched"] == "reason"
