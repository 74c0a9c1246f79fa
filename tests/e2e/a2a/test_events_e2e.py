"""Runner events of a real A2A server: the task's life, the loop inside it, and the SSE
route ``/tasks/{id}/events`` (auth, ownership, kept then live events, its end)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import AgentCard

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill
from llamon_agent.a2a.server import create_app
from llamon_agent.core.events import EventBus, RunnerEvent
from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.exceptions import ComponentInvokeError
from llamon_agent.loop import ToolRegistry, run_loop
from llamon_agent.loop.scripted import ScriptedModel, tool_call
from tests._support.a2a_server import running_server
from tests._support.jsonrpc import post, post_stream, request, text_message

KEY_A = "alice-key-3f9c1e7a5b2d4c60"
KEY_B = "bob-key-8d2a6f0c4e1b9735"
SECRET = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"


def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key}"


@dataclass
class Served:
    url: str
    bus: EventBus
    events: list[RunnerEvent]
    jsonl: Path
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def until(self, task_id: str, type_: str) -> list[RunnerEvent]:
        """The task's events once one of ``type_`` arrived (5 s at most)."""

        def seen() -> bool:
            return any(e.task_id == task_id and e.type == type_ for e in self.events)

        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(seen), timeout=5)
        return [e for e in self.events if e.task_id == task_id]


def _card() -> AgentCard:
    return build_agent_card(
        name="events-test-agent",
        description="Answers test questions for the llamon-agent events suite.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("echo", "Echo", "Echoes one test question.", tags=["test"])],
        auth=AuthSpec.api_key(),
    )


@asynccontextmanager
async def serve(tmp_path: Path) -> AsyncIterator[Served]:
    bus = EventBus()
    received: list[RunnerEvent] = []
    jsonl = tmp_path / "events.jsonl"
    bus.subscribe_jsonl(jsonl)
    served = Served("", bus, received, jsonl)

    async def record(event: RunnerEvent) -> None:
        async with served.arrived:
            received.append(event)
            served.arrived.notify_all()

    bus.subscribe(record)

    async def agent(ctx: AgentContext) -> str | HITLInterrupt:
        if ctx.resumed:
            return f"resumed {ctx.text}"
        if ctx.text == "ask":
            return HITLInterrupt(payload={"question": "which one?"})
        if ctx.text == "fail":
            raise ComponentInvokeError(f"billing said no; key {SECRET}")
        if ctx.text == "stream":
            await ctx.emit("one ")
            await ctx.emit("two ")
            return "three"
        if ctx.text == "loop":
            model = ScriptedModel([tool_call("lookup", {"key": "a"}, id="c1"), "done"])
            outcome = await run_loop(model, ToolRegistry([lookup]), "go")
            return outcome.answer or ""
        if ctx.text == "wait":
            served.started.set()
            await served.gate.wait()
            return "released"
        return f"echo {ctx.text}"

    card = _card()
    config = AuthConfig.from_card(card, principals={"alice": KEY_A, "bob": KEY_B})
    app = create_app(agent, card, auth=config, events=bus)
    async with running_server(app) as url:
        served.url = url
        yield served
        served.gate.set()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with serve(tmp_path) as server:
        yield server


@asynccontextmanager
async def caller(key: str | None) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"X-API-Key": key} if key else {}
    async with httpx.AsyncClient(headers=headers, timeout=10.0) as http:
        yield http


async def send(http: httpx.AsyncClient, url: str, text: str, **config: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": text_message(text)}
    if config:
        params["configuration"] = config
    reply = await post(http, url, request("message/send", params))
    assert "result" in reply, reply
    task: dict[str, Any] = reply["result"]
    return task


async def sse(http: httpx.AsyncClient, url: str, task_id: str) -> list[dict[str, Any]]:
    """The whole SSE stream of ``task_id``'s events (it must end by itself)."""
    events: list[dict[str, Any]] = []
    async with http.stream("GET", f"{url}/tasks/{task_id}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        kind = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                kind = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                event = json.loads(line.removeprefix("data:").strip())
                assert event["type"] == kind
                events.append(event)
    return events


async def test_a_completed_task_emits_submitted_working_completed(served: Served) -> None:
    async with caller(KEY_A) as http:
        task = await send(http, served.url, "hello", blocking=False)
        events = await served.until(task["id"], "task.completed")
    assert [(e.type, e.stage) for e in events] == [
        ("task.submitted", "a2a_serve"),
        ("task.working", "a2a_serve"),
        ("task.completed", "a2a_serve"),
    ]
    assert {e.context_id for e in events} == {task["contextId"]}


async def test_a_failed_task_emits_its_error_code_and_reason(served: Served) -> None:
    async with caller(KEY_A) as http:
        task = await send(http, served.url, "fail")
        assert task["status"]["state"] == "failed"
        events = await served.until(task["id"], "task.failed")
        assert [e.type for e in events] == ["task.submitted", "task.working", "task.failed"]
        failed = events[-1]
        # the next request is still answered
        assert (await send(http, served.url, "again"))["status"]["state"] == "completed"
    assert failed.stage == "execute"
    meta = failed.trace_metadata
    assert (meta["failure_reason"], meta["error_code"], meta["retryable"]) == (
        "component_invoke_error",
        "UPSTREAM_UNAVAILABLE",
        True,
    )
    data = task["status"]["message"]["parts"][1]["data"]
    assert (data["errorReason"], data["errorCode"]) == (
        "component_invoke_error",
        meta["error_code"],
    )
    await served.bus.flush()
    assert SECRET not in served.jsonl.read_text()


async def test_a_stream_ends_with_its_chunk_count(served: Served) -> None:
    async with caller(KEY_A) as http:
        body = request("message/stream", {"message": text_message("stream")})
        frames = await post_stream(http, served.url, body)
    task_id = frames[0]["result"]["id"]
    events = await served.until(task_id, "task.completed")
    assert events[-1].trace_metadata == {"chunk_count": 3}


async def test_input_required_and_cancel_are_events_too(served: Served) -> None:
    async with caller(KEY_A) as http:
        asked = await send(http, served.url, "ask")
        [*_, paused] = await served.until(asked["id"], "task.input-required")
        assert paused.type == "task.input-required"
        waiting = await send(http, served.url, "wait", blocking=False)
        await asyncio.wait_for(served.started.wait(), timeout=5)
        reply = await post(http, served.url, request("tasks/cancel", {"id": waiting["id"]}))
        assert reply["result"]["status"]["state"] == "canceled"
        events = await served.until(waiting["id"], "task.canceled")
    assert [e.type for e in events] == ["task.submitted", "task.working", "task.canceled"]


async def test_a_loop_inside_a_task_emits_into_the_servers_bus(served: Served) -> None:
    async with caller(KEY_A) as http:
        task = await send(http, served.url, "loop")
        assert task["status"]["state"] == "completed"
        events = await served.until(task["id"], "task.completed")
    assert [e.type for e in events] == [
        "task.submitted",
        "task.working",
        "run.started",
        "model.completed",
        "step.started",
        "step.completed",
        "model.completed",
        "run.completed",
        "task.completed",
    ]
    assert {e.context_id for e in events} == {task["contextId"]}
    assert len({e.run_id for e in events if e.type.startswith(("run.", "step."))}) == 1


async def test_sse_gives_the_kept_events_then_ends(served: Served) -> None:
    async with caller(KEY_A) as http:
        task = await send(http, served.url, "fail")
        await served.until(task["id"], "task.failed")
        events = await sse(http, served.url, task["id"])
    assert [e["type"] for e in events] == ["task.submitted", "task.working", "task.failed"]
    assert events[-1]["trace_metadata"]["error_code"] == "UPSTREAM_UNAVAILABLE"
    assert {e["task_id"] for e in events} == {task["id"]}
    assert SECRET not in json.dumps(events)


async def test_sse_follows_a_running_task_live_to_its_end(served: Served) -> None:
    async with caller(KEY_A) as http:
        task = await send(http, served.url, "wait", blocking=False)
        await asyncio.wait_for(served.started.wait(), timeout=5)
        listening = asyncio.create_task(sse(http, served.url, task["id"]))
        await served.until(task["id"], "task.working")
        served.gate.set()
        events = await asyncio.wait_for(listening, timeout=5)
    assert [e["type"] for e in events] == ["task.submitted", "task.working", "task.completed"]


async def test_sse_refuses_the_unauthenticated_and_hides_other_callers_tasks(
    served: Served,
) -> None:
    async with caller(KEY_A) as alice:
        task = await send(alice, served.url, "hello")
    async with caller(None) as anonymous:
        refused = await anonymous.get(f"{served.url}/tasks/{task['id']}/events")
        assert refused.status_code == 401
    async with caller(KEY_B) as bob:
        theirs = await bob.get(f"{served.url}/tasks/{task['id']}/events")
        unknown = await bob.get(f"{served.url}/tasks/no-such-task/events")
        assert (theirs.status_code, theirs.json()) == (404, {"error": "task_not_found"})
        assert (unknown.status_code, unknown.json()) == (theirs.status_code, theirs.json())
        # bob is still served
        assert (await send(bob, served.url, "hi"))["status"]["state"] == "completed"
    async with caller(KEY_A) as alice:
        events = await sse(alice, served.url, task["id"])
    assert [e["type"] for e in events][-1] == "task.completed"


async def test_answering_a_paused_task_is_a_resumed_working_then_its_end(served: Served) -> None:
    async with caller(KEY_A) as http:
        asked = await send(http, served.url, "ask")
        await served.until(asked["id"], "task.input-required")
        params = {
            "message": text_message(
                "the blue one", taskId=asked["id"], contextId=asked["contextId"]
            )
        }
        reply = await post(http, served.url, request("message/send", params))
        assert reply["result"]["status"]["state"] == "completed"
        events = await served.until(asked["id"], "task.completed")
    # with an OpenTelemetry SDK set (by an earlier test), task.working carries the trace id
    traces = {e.trace_metadata.get("trace_id") for e in events} - {None}
    assert all(re.fullmatch("[0-9a-f]{32}", str(trace)) for trace in traces)
    untraced = [
        {key: value for key, value in e.trace_metadata.items() if key != "trace_id"} for e in events
    ]
    assert [(e.type, kept) for e, kept in zip(events, untraced, strict=True)] == [
        ("task.submitted", {}),
        ("task.working", {"resumed": False}),
        ("task.input-required", {}),
        ("task.working", {"resumed": True}),
        ("task.completed", {}),
    ]
