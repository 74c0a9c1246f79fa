"""``llamon triage ID`` and ``llamon triage --failure ID``: a real ``llamon serve`` process
fails tasks over SQLite; other ``llamon`` processes read a failure back (by its task, or by
the id ``llamon failures`` lists) with its triage row, operator action and events."""

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


async def test_triage_of_a_failure_id_listed_by_llamon_failures(tmp_path: Path) -> None:
    async with llamon_serve(tmp_path) as (_, url), httpx.AsyncClient(timeout=20) as http:
        first = await send_text(http, url, "upstream")
        second = await send_text(http, url, "upstream")
        assert [first["status"]["state"], second["status"]["state"]] == ["failed"] * 2
        # the next request is still answered
        fine = await send_text(http, url, "hello")
        assert fine["status"]["state"] == "completed"
    home = str(tmp_path)

    status, out, err = await llamon_cli("failures", "--home", home, "--json")
    assert status == 0, err
    listed = {row["taskId"]: row["id"] for row in json.loads(out)["failures"]}
    assert set(listed) == {first["id"], second["id"]}
    failure_id = listed[first["id"]]
    assert isinstance(failure_id, int)

    status, out, err = await llamon_cli("triage", "--failure", str(failure_id), "--home", home)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[:2] == [
        f"task {first['id']}  state failed",
        f"failure {failure_id}: the only failure record of this task",
    ]
    assert lines[2].startswith(
        "failure: UPSTREAM_UNAVAILABLE / component_invoke_error  stage execute"
    )
    assert lines[2].endswith(f"  id {failure_id}")
    by_task = (await llamon_cli("triage", first["id"], "--home", home))[1].splitlines()
    assert lines[2:] == by_task[1:]  # what the task form shows, after the "which" line
    assert second["id"] not in out

    status, out, err = await llamon_cli(
        "triage", "--failure", str(failure_id), "--home", home, "--json"
    )
    assert status == 0, err
    document = json.loads(out)
    assert document["task"] == {"id": first["id"], "state": "failed"}
    assert (document["failureId"], document["taskFailureIds"]) == (failure_id, [failure_id])
    [failure] = document["failures"]
    assert (failure["id"], failure["taskId"], failure["reason"]) == (
        failure_id,
        first["id"],
        "component_invoke_error",
    )
    assert failure["triage"]["matched"] == "reason"
    assert [event["type"] for event in document["events"]][-1] == "task.failed"

    unknown = max(listed.values()) + 1
    status, out, err = await llamon_cli("triage", "--failure", str(unknown), "--home", home)
    assert (status, out, err) == (
        1,
        "",
        f"llamon triage: no failure {unknown} in this store (`llamon failures` lists the ids).\n",
    )
    status, out, err = await llamon_cli("triage", "--failure", "first", "--home", home)
    assert (status, out) == (2, "")
    assert err.startswith("llamon triage: --failure 'first' is not a failure id")
    # the store still answers
    status, _, err = await llamon_cli(
        "triage", "--failure", str(listed[second["id"]]), "--home", home
    )
    assert status == 0, err


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
        _, listed, _ = await llamon_cli("failures", "--database-url", dsn, "--json")
        [failure_id] = [
            row["id"] for row in json.loads(listed)["failures"] if row["taskId"] == tasks["s2"].id
        ]
        by_id = await llamon_cli(
            "triage", "--failure", str(failure_id), "--database-url", dsn, "--json"
        )
    assert by_id[0] == 0, by_id[2]
    one = json.loads(by_id[1])
    assert (one["failureId"], one["taskFailureIds"]) == (failure_id, [failure_id])
    assert [(f["id"], f["taskId"], f["reason"]) for f in one["failures"]] == [
        (failure_id, tasks["s2"].id, "timeout")
    ]
    assert status == 0, err
    document = json.loads(out)
    assert [(f["taskId"], f["reason"], f["tool"]) for f in document["failures"]] == [
        (tasks["s2"].id, "timeout", "search")
    ]
    assert document["failures"][0]["triage"]["matched"] == "reason"
