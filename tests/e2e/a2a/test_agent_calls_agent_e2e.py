"""An agent that calls another agent with a2a-sdk's own client: when the called agent
fails (an HTTP error status, a JSON-RPC error), the caller of the first agent gets the
right errorCode from the one table, and no address of the called agent (all real servers
on 127.0.0.1)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import Message, TaskState, TextPart
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    texts,
    user_message,
)


@dataclass
class CalledAgent:
    """The second agent: answers each JSON-RPC request with the next scripted reply."""

    replies: list[tuple[int, dict[str, Any], dict[str, str]]] = field(default_factory=list)

    async def handle(self, request: Request) -> Response:
        body = await request.json()
        status, reply, headers = self.replies.pop(0)
        if status != 200:
            return JSONResponse({"detail": "unavailable"}, status_code=status, headers=headers)
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], **reply}, headers=headers)


def _answer(text: str) -> dict[str, Any]:
    message = {"kind": "message", "messageId": "m-1", "role": "agent"}
    return {"result": {**message, "parts": [{"kind": "text", "text": text}]}}


class Forwarder:
    """The first agent: forwards the caller's text with a2a-sdk's client, answers the reply."""

    def __init__(self, url: str) -> None:
        self.card = make_card(url + "/", streaming=False)

    async def invoke(self, ctx: AgentContext) -> str:
        async with httpx.AsyncClient(timeout=10.0) as http:
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(
                self.card
            )
            async for event in client.send_message(user_message(ctx.text)):
                if isinstance(event, Message):
                    return "".join(p.root.text for p in event.parts if isinstance(p.root, TextPart))
        return ""


_INTERNAL = {"error": {"code": -32603, "message": "Internal error"}}
_NOT_FOUND = {"error": {"code": -32001, "message": "Task not found"}}


@pytest.mark.reason(
    "http_5xx",
    "rate_limited",
    "a2a_upstream_auth_failed",
    "a2a_upstream_error",
    "a2a_task_not_found",
)
@pytest.mark.parametrize(
    ("reply", "code", "reason", "retriable", "retry_after_ms"),
    [
        ((503, {}, {}), "UPSTREAM_UNAVAILABLE", "http_5xx", True, None),
        ((429, {}, {"Retry-After": "2"}), "RATE_LIMITED", "rate_limited", True, 2000),
        ((401, {}, {}), "UPSTREAM_UNAVAILABLE", "a2a_upstream_auth_failed", False, None),
        ((200, _INTERNAL, {}), "UPSTREAM_UNAVAILABLE", "a2a_upstream_error", True, None),
        ((200, _NOT_FOUND, {}), "NOT_FOUND", "a2a_task_not_found", False, None),
    ],
    ids=["http-503", "http-429", "http-401", "jsonrpc-internal", "jsonrpc-not-found"],
)
async def test_a_failing_called_agent_gives_the_right_error_code(
    reply: tuple[int, dict[str, Any], dict[str, str]],
    code: str,
    reason: str,
    retriable: bool,
    retry_after_ms: int | None,
) -> None:
    called = CalledAgent([reply, (200, _answer("pong"), {})])
    called_app = Starlette(routes=[Route("/", called.handle, methods=["POST"])])
    async with running_server(called_app) as called_url:
        app = create_app(Forwarder(called_url), make_card())
        async with running_server(app) as url, a2a_client(url) as client:
            task = await send(client, user_message("ping"))
            following = await send(client, user_message("ping again"))
    assert task.status.state == TaskState.failed
    data = error_data(task)
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        code,
        reason,
        retriable,
    )
    assert data.get("retryAfterMs") == retry_after_ms
    shown = json.dumps(task.model_dump(mode="json"))
    assert called_url.removeprefix("http://") not in shown
    assert "127.0.0.1" not in shown
    assert following.status.state == TaskState.completed
    assert texts(following) == ["pong"]
