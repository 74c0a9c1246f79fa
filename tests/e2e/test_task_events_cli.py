"""``llamon task ID`` shows a failed task's runner events in order, read by another process
from the store a real served run wrote: ``llamon serve`` keeps them by default (SQLite), and
a served flow keeps them in SQLite and in PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import TaskState

from llamon_agent.a2a.serve import ServeOptions, serve_agent
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import open_stores
from llamon_agent.core.events import EventBus
from tests._support.a2a_server import a2a_client, make_card, running_server, send, user_message
from tests._support.otel import span_exporter, spans_named
from tests._support.serve import llamon_cli, llamon_serve, send_text
from tests._support.stores import postgres_schema
from tests.e2e.flow.test_flow_e2e import example_flow


async def test_llamon_serve_keeps_a_failed_tasks_events_and_llamon_task_shows_them(
    tmp_path: Path,
) -> None:
    async with llamon_serve(tmp_path) as (_, url), httpx.AsyncClient(timeout=10) as http:
        failed = await send_text(http, url, "upstream")
        assert failed["status"]["state"] == "failed"
        done = await send_text(http, url, "hello")
        assert done["status"]["state"] == "completed"  # the next request is answered
    # the server has stopped; another process reads what it kept
    status, out, err = await llamon_cli("task", failed["id"], "--home", str(tmp_path), "--json")
    assert status == 0, err
    shown = json.loads(out)
    events = shown["events"]
    assert [e["type"] for e in events] == ["task.submitted", "task.working", "task.failed"]
    assert {e["task_id"] for e in events} == {failed["id"]}
    assert {e["context_id"] for e in events} == {failed["contextId"]}
    assert events[-1]["trace_metadata"]["error_code"] == "UPSTREAM_UNAVAILABLE"
    assert events[-1]["trace_metadata"]["failure_reason"] == "component_invoke_error"
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)

    status, out, err = await llamon_cli("task", failed["id"], "--home", str(tmp_path))
    assert status == 0, err
    rows = [line for line in out.splitlines() if "task." in line and "│" in line]
    assert [row.split("│")[2].strip() for row in rows] == [
        "task.submitted",
        "task.working",
        "task.failed",
    ]
    assert "component_invoke_error / UPSTREAM_UNAVAILABLE" in rows[-1]

    status, out, err = await llamon_cli("task", done["id"], "--home", str(tmp_path), "--json")
    assert status == 0, err
    assert [e["type"] for e in json.loads(out)["events"]] == [
        "task.submitted",
        "task.working",
        "task.completed",
    ]


async def test_llamon_serve_no_keep_events_keeps_none(tmp_path: Path) -> None:
    async with (
        llamon_serve(tmp_path, "--no-keep-events") as (_, url),
        httpx.AsyncClient(timeout=10) as http,
    ):
        failed = await send_text(http, url, "upstream")
        assert failed["status"]["state"] == "failed"
        done = await send_text(http, url, "hello")
        assert done["status"]["state"] == "completed"  # the next request is answered
    status, out, err = await llamon_cli("task", failed["id"], "--home", str(tmp_path), "--json")
    assert status == 0, err
    shown = json.loads(out)
    assert shown["events"] == []
    assert [f["reason"] for f in shown["failures"]] == ["component_invoke_error"]  # still kept


async def _serve_flow(dsn: str | None, home: Path) -> Any:
    """Send ``math`` to the example flow (it fails at ``rag_search``), served with a store
    that keeps events; the failed task."""
    stores = await open_stores("postgres", dsn=dsn) if dsn else await open_stores(home=home)
    bus = EventBus()
    app = create_app(
        example_flow().compile(),
        make_card(),
        task_store=stores.task_store,
        failure_store=stores.failures,
        events=bus,
        event_store=stores.events,
    )
    try:
        async with running_server(app) as url, a2a_client(url) as client:
            task = await send(client, user_message("math"))
            assert task.status.state == TaskState.failed
            again = await send(client, user_message("again"))  # the next one is answered
            assert again.status.state == TaskState.failed
    finally:
        await stores.close()
    return task


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_served_flows_events_are_read_back_by_another_process(
    kind: str, tmp_path: Path
) -> None:
    async def check(store_args: tuple[str, ...], dsn: str | None) -> None:
        task = await _serve_flow(dsn, tmp_path)
        status, out, err = await llamon_cli("task", task.id, *store_args, "--json")
        assert status == 0, err
        events = json.loads(out)["events"]
        assert [(e["type"], e["node"]) for e in events] == [
            ("task.submitted", None),
            ("task.working", None),
            ("node.started", "fetch_subject"),
            ("node.completed", "fetch_subject"),
            ("node.started", "rag_search"),
            ("node.failed", "rag_search"),
            ("task.failed", "rag_search"),
        ]
        assert events[-1]["stage"] == "flow_node"
        assert events[-1]["trace_metadata"]["failure_reason"] == "component_invoke_error"

    if kind == "postgres":
        async with postgres_schema() as dsn:
            await check(("--database-url", dsn), dsn)
        return
    await check(("--home", str(tmp_path)), None)


async def test_llamon_task_shows_the_trace_id_of_the_run_when_a_span_recorded(
    tmp_path: Path,
) -> None:
    exporter = span_exporter()  # an OpenTelemetry SDK in the serving process
    task = await _serve_flow(None, tmp_path)
    (span,) = [
        s
        for s in spans_named(exporter, "invoke_agent ")
        if (s.attributes or {}).get("llamon.task.id") == task.id
    ]
    trace = format(span.context.trace_id, "032x")

    status, out, err = await llamon_cli("task", task.id, "--home", str(tmp_path), "--json")
    assert status == 0, err
    shown = json.loads(out)
    assert shown["traceId"] == trace
    assert shown["events"][1]["trace_metadata"] == {"resumed": False, "trace_id": trace}
    status, out, err = await llamon_cli("task", task.id, "--home", str(tmp_path))
    assert status == 0, err
    assert f"trace {trace}\n" in out


async def _served_by_serve_agent(home: Path, *, keep_events: bool) -> str:
    """Serve an agent with ``serve_agent`` over SQLite in ``home``; the id of one task."""

    async def pong(ctx: object) -> str:
        return "pong"

    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    shutdown = asyncio.Event()
    options = ServeOptions(port=0, store="sqlite", gc_freeze=False, keep_events=keep_events)
    server = asyncio.create_task(
        serve_agent(pong, make_card(), options, on_ready=ready.set_result, shutdown=shutdown)
    )
    try:
        url = await asyncio.wait_for(ready, timeout=30)
        async with a2a_client(url.rstrip("/")) as client:
            task = await send(client, user_message("hi"))
    finally:
        shutdown.set()
        await asyncio.wait_for(server, timeout=30)
    return task.id


@pytest.mark.parametrize("keep_events", [True, False])
async def test_serve_agent_keeps_events_unless_told_not_to(
    keep_events: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path))
    monkeypatch.delenv("LLAMON_DATABASE_URL", raising=False)
    task_id = await _served_by_serve_agent(tmp_path, keep_events=keep_events)
    stores = await open_stores("sqlite", home=tmp_path)
    try:
        assert stores.events is not None
        kept = [event.type for event in await stores.events.for_task(task_id)]
    finally:
        await stores.close()
    expected = ["task.submitted", "task.working", "task.completed"] if keep_events else []
    assert kept == expected
