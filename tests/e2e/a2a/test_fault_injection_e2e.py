"""A served agent with fault injection allowed: the plan in a request's metadata makes that
request fail the way the real failures would, seen over the wire exactly as a caller sees
them; without the opt-in the key is ignored; the next request is always answered.

A ``LoopAgent`` (``ScriptedModel``) with the bookshop's tools from a real ``MCPServer``
over streamable HTTP, served by ``create_app`` with uvicorn, everything on 127.0.0.1;
requests are raw JSON-RPC (``message/send``, ``message/stream``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.server.apps import A2AStarletteApplication
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from examples.bookshop_mcp_server import build_server

from llamon_agent.a2a import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import open_stores
from llamon_agent.client import AgentClient, clear_card_cache
from llamon_agent.core.faults import FAULTS_EXTENSION_URI, FAULTS_METADATA_KEY
from llamon_agent.loop import LoopAgent, ScriptedModel, ToolMessage, ToolRegistry, tool_call
from llamon_agent.mcp import MCPToolLoader
from tests._support.a2a_server import make_card, running_server
from tests._support.serve import llamon_serve, message_json, rpc
from tests.client.test_faults import NO_WAIT, GatedAgent
from tests.mcp.conftest import serving

DUNE = {"title": "Dune"}
TIMEOUT = 20.0


def _plan(*faults: dict[str, Any]) -> dict[str, Any]:
    return {FAULTS_METADATA_KEY: {"faults": list(faults)}}


@asynccontextmanager
async def _bookshop_agent(
    script: Sequence[Any], *, allow: bool
) -> AsyncIterator[tuple[httpx.AsyncClient, str, ScriptedModel]]:
    """The loop agent on the bookshop's tools, served; an HTTP client and its URL."""
    model = ScriptedModel(script)
    async with (
        serving(build_server()) as bookshop,
        MCPToolLoader(bookshop.url, name="bookshop").session() as tools,
    ):
        agent = LoopAgent(model, ToolRegistry(tools))
        app = create_app(agent, make_card(), allow_fault_injection=allow)
        async with running_server(app) as base, httpx.AsyncClient(timeout=TIMEOUT) as http:
            yield http, base + "/", model


async def _send(
    http: httpx.AsyncClient, url: str, text: str, metadata: dict[str, Any] | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {"message": message_json(text)}
    if metadata is not None:
        params["metadata"] = metadata
    return await rpc(http, url, "message/send", params)


async def _stream(
    http: httpx.AsyncClient, url: str, text: str, metadata: dict[str, Any]
) -> list[dict[str, Any]]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/stream",
        "params": {"message": message_json(text), "metadata": metadata},
    }
    events: list[dict[str, Any]] = []
    async with http.stream("POST", url, json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line.removeprefix("data:")))
    return events


def _failure(reply: dict[str, Any]) -> dict[str, Any]:
    task = reply["result"]
    assert task["status"]["state"] == "failed", task["status"]
    parts = task["status"]["message"]["parts"]
    data: dict[str, Any] = next(p["data"] for p in parts if p["kind"] == "data")
    return data


def _answer(reply: dict[str, Any]) -> str:
    task = reply["result"]
    assert task["status"]["state"] == "completed", task["status"]
    return "".join(p.get("text", "") for a in task["artifacts"] for p in a["parts"])


async def _still_answered(http: httpx.AsyncClient, url: str) -> None:
    assert _answer(await _send(http, url, "anything else?")) == "still here"


@pytest.mark.parametrize(
    ("fault", "calls", "expected"),
    [
        pytest.param(
            {"kind": "tool_timeout", "tool": "get_book"},
            3,
            ("UPSTREAM_TIMEOUT", "timeout", True),
            marks=pytest.mark.reason("timeout"),
            id="tool_timeout",
        ),
        pytest.param(
            {"kind": "mcp_connection_drop", "server": "bookshop", "after_calls": 0},
            3,
            ("UPSTREAM_UNAVAILABLE", "connection_closed", True),
            marks=pytest.mark.reason("connection_closed"),
            id="mcp_connection_drop",
        ),
    ],
)
async def test_transport_faults_strike_twice_then_fail_the_task(
    fault: dict[str, Any], calls: int, expected: tuple[str, str, bool]
) -> None:
    script = [*[[tool_call("get_book", DUNE)]] * calls, "still here"]
    async with _bookshop_agent(script, allow=True) as (http, url, model):
        data = _failure(await _send(http, url, "dune?", _plan(fault)))
        assert (data["errorCode"], data["errorReason"], data["retriable"]) == expected
        unavailable = "Upstream tool 'get_book' temporarily unavailable. Retry may succeed."
        seen = [m.content for m in model.calls[-1].messages if isinstance(m, ToolMessage)]
        assert seen == [unavailable, unavailable]  # two strikes shown, the third escalated
        await _still_answered(http, url)


async def test_a_raising_tool_fails_the_task_with_an_incident_and_no_text() -> None:
    script = [[tool_call("get_book", DUNE)], "still here"]
    fault = {"kind": "tool_raises", "tool": "get_book", "message": "disk on fire at /srv/db"}
    async with _bookshop_agent(script, allow=True) as (http, url, _):
        reply = await _send(http, url, "dune?", _plan(fault))
        data = _failure(reply)
        assert (data["errorCode"], data["retriable"]) == ("INTERNAL_ERROR", False)
        assert data["incidentId"]
        assert "disk on fire" not in json.dumps(reply)
        await _still_answered(http, url)


@pytest.mark.reason("tool_error")
async def test_a_tool_error_reaches_the_model_and_the_task_completes() -> None:
    script = [[tool_call("get_book", DUNE)], "none on the shelf", "still here"]
    fault = {"kind": "tool_error", "tool": "get_book", "message": "shelf empty"}
    async with _bookshop_agent(script, allow=True) as (http, url, model):
        assert _answer(await _send(http, url, "dune?", _plan(fault))) == "none on the shelf"
        last = model.calls[1].messages[-1]
        assert isinstance(last, ToolMessage)
        assert last.content == "shelf empty"
        await _still_answered(http, url)


async def test_a_stream_runs_inside_its_plan_too() -> None:
    script = [[tool_call("get_book", DUNE)], "none on the shelf", "still here"]
    fault = {"kind": "tool_error", "tool": "get_book", "message": "shelf empty"}
    async with _bookshop_agent(script, allow=True) as (http, url, model):
        events = await _stream(http, url, "dune?", _plan(fault))
        final = events[-1]["result"]
        assert (final["kind"], final["status"]["state"], final["final"]) == (
            "status-update",
            "completed",
            True,
        )
        last = model.calls[1].messages[-1]
        assert isinstance(last, ToolMessage)
        assert last.content == "shelf empty"
        await _still_answered(http, url)


async def test_without_the_opt_in_the_plan_is_ignored() -> None:
    script = [[tool_call("get_book", DUNE)], "Dune is in stock", "still here"]
    fault = {"kind": "tool_timeout", "tool": "get_book"}
    async with _bookshop_agent(script, allow=False) as (http, url, model):
        card = (await http.get(url + ".well-known/agent-card.json")).json()
        assert FAULTS_EXTENSION_URI not in json.dumps(card)
        assert _answer(await _send(http, url, "dune?", _plan(fault))) == "Dune is in stock"
        last = model.calls[1].messages[-1]
        assert isinstance(last, ToolMessage)
        assert "Frank Herbert" in last.content  # the real tool answered
        await _still_answered(http, url)


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (
            {"faults": [{"kind": "tool_timeout"}]},
            "llamon.lab/faults.faults[0].tool_timeout.tool: Field required",
        ),
        ("everything", "llamon.lab/faults must be an object"),
        ({"faults": [], "guard": "sometimes"}, "llamon.lab/faults.guard must be"),
    ],
)
async def test_a_malformed_plan_is_refused_before_a_task_exists(plan: object, message: str) -> None:
    async with _bookshop_agent(["still here"], allow=True) as (http, url, model):
        reply = await _send(http, url, "dune?", {FAULTS_METADATA_KEY: plan})
        error = reply["error"]
        assert error["code"] == -32602
        assert (error["data"]["errorCode"], error["data"]["errorReason"]) == (
            "INVALID_INPUT",
            "invalid_fault_plan",
        )
        assert error["message"].startswith(message), error["message"]
        events = await _stream(http, url, "dune?", {FAULTS_METADATA_KEY: plan})
        assert [event["error"]["data"]["errorReason"] for event in events] == ["invalid_fault_plan"]
        assert model.calls == []  # nothing ran
        await _still_answered(http, url)


async def _echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"


@pytest.mark.reason("database_unavailable")
@pytest.mark.parametrize("method", ["message/send", "message/stream"])
async def test_the_store_fails_once_then_serves_again(tmp_path: Path, method: str) -> None:
    stores = await open_stores("sqlite", home=tmp_path)
    try:
        app = create_app(
            _echo, make_card(), task_store=stores.task_store, allow_fault_injection=True
        )
        plan = _plan({"kind": "task_store_fails_once"})
        async with running_server(app) as base, httpx.AsyncClient(timeout=TIMEOUT) as http:
            url = base + "/"
            if method == "message/send":
                error = (await _send(http, url, "hi", plan))["error"]
            else:
                [event] = await _stream(http, url, "hi", plan)
                error = event["error"]
            assert error["code"] == -32603
            assert (
                error["data"]["errorCode"],
                error["data"]["errorReason"],
                error["data"]["retriable"],
            ) == ("UPSTREAM_UNAVAILABLE", "database_unavailable", True)
            assert "locked" not in json.dumps(error)
            again = await _send(http, url, "hi")
            assert _answer(again) == "echo hi"
            stored = await stores.task_store.get(again["result"]["id"])
            assert stored is not None
            assert stored.status.state.value == "completed"
    finally:
        await stores.close()


async def test_the_card_declares_the_extension_when_allowed() -> None:
    async with _bookshop_agent([], allow=True) as (http, url, _):
        card = (await http.get(url + ".well-known/agent-card.json")).json()
    uris = [ext["uri"] for ext in card["capabilities"]["extensions"]]
    assert FAULTS_EXTENSION_URI in uris


@pytest.mark.parametrize("allow", [True, False])
async def test_llamon_serve_flag_turns_it_on(tmp_path: Path, allow: bool) -> None:
    flags = ("--store", "memory", *(("--allow-fault-injection",) if allow else ()))
    malformed = {FAULTS_METADATA_KEY: {"faults": [{"kind": "no_such_fault"}]}}
    async with (
        llamon_serve(tmp_path, *flags) as (_, url),
        httpx.AsyncClient(timeout=TIMEOUT) as http,
    ):
        card = (await http.get(url + ".well-known/agent-card.json")).json()
        declared = [e["uri"] for e in card["capabilities"].get("extensions") or []]
        assert (FAULTS_EXTENSION_URI in declared) is allow
        reply = await _send(http, url, "hello", malformed)
        if allow:
            assert reply["error"]["data"]["errorReason"] == "invalid_fault_plan"
        else:
            assert reply["result"]["status"]["state"] == "completed"  # the key is ignored
        again = await _send(http, url, "hello")
        assert again["result"]["status"]["state"] == "completed"


@asynccontextmanager
async def _calling_agent(allow: bool) -> AsyncIterator[tuple[httpx.AsyncClient, str, GatedAgent]]:
    """A served llamon agent that asks a plain a2a-sdk agent (``AgentClient``) and answers
    with its reply; an HTTP client and the served agent's URL."""
    downstream = GatedAgent()
    handler = DefaultRequestHandler(agent_executor=downstream, task_store=InMemoryTaskStore())
    plain = A2AStarletteApplication(agent_card=make_card(), http_handler=handler).build()
    async with running_server(plain) as downstream_url:

        async def caller(ctx: AgentContext) -> str:
            async with AgentClient(downstream_url, retry=NO_WAIT) as client:
                return (await client.send(ctx.text)).text

        app = create_app(caller, make_card(), allow_fault_injection=allow)
        async with running_server(app) as base, httpx.AsyncClient(timeout=TIMEOUT) as http:
            yield http, base + "/", downstream


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (
            {"kind": "downstream_unavailable", "agent": "test-agent"},
            ("UPSTREAM_UNAVAILABLE", "http_5xx", True),
        ),
        (
            {"kind": "downstream_failed", "agent": "test-agent"},
            ("UPSTREAM_UNAVAILABLE", "a2a_upstream_error", False),  # one hop up
        ),
    ],
)
async def test_the_plan_reaches_the_agents_the_served_agent_calls(
    fault: dict[str, Any], expected: tuple[str, str, bool]
) -> None:
    clear_card_cache()
    async with _calling_agent(allow=True) as (http, url, downstream):
        data = _failure(await _send(http, url, "hi", _plan(fault)))
        assert (data["errorCode"], data["errorReason"], data["retriable"]) == expected
        assert downstream.runs == 0  # the fault answered in its place
        again = await _send(http, url, "hi")
        assert _answer(again) == "plain hi"
        assert downstream.runs == 1
