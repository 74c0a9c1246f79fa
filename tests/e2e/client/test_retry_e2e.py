"""Retry end to end: a real server on 127.0.0.1 answers 503, 503, then a JSON-RPC result.

The call goes through a2a-sdk's own client (its JSON-RPC transport over httpx) inside
``call_with_retry``; only the waits are recorded instead of slept.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError
from a2a.types import Task, TaskState
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llamon_agent.client import RetryPolicy, call_with_retry
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from tests._support.a2a_server import make_card, running_server, send, texts, user_message


class FlakyAgent:
    """Answers the first ``failures`` JSON-RPC requests with HTTP 503, then a result."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.requests: list[dict[str, Any]] = []

    async def rpc(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        if len(self.requests) <= self.failures:
            return Response("overloaded", status_code=503)
        message = body["params"]["message"]
        task = {
            "kind": "task",
            "id": "task-1",
            "contextId": "ctx-1",
            "status": {"state": "completed"},
            "artifacts": [
                {"artifactId": "a-1", "parts": [{"kind": "text", "text": "pong"}]},
            ],
            "history": [message],
        }
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": task})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/", self.rpc, methods=["POST"])])


class Recorded:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def client_for(url: str, http: httpx.AsyncClient) -> Client:
    config = ClientConfig(streaming=False, httpx_client=http)
    return ClientFactory(config).create(make_card(url + "/", streaming=False))


async def test_503_503_then_a_result_through_a2a_sdks_client(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = FlakyAgent(failures=2)
    time = Recorded()
    message = user_message("ping")
    async with running_server(agent.app()) as url, httpx.AsyncClient(timeout=10) as http:
        client = client_for(url, http)
        with caplog.at_level(logging.INFO, logger="llamon_agent.client"):
            task = await call_with_retry(
                lambda: send(client, message),
                policy=RetryPolicy(),
                idempotent=True,
                sleep=time.sleep,
                clock=time.clock,
                rng=lambda: 1.0,
                operation="message/send",
            )
    assert isinstance(task, Task)
    assert task.status.state is TaskState.completed
    assert texts(task) == ["pong"]
    assert len(agent.requests) == 3
    assert {r["params"]["message"]["messageId"] for r in agent.requests} == {message.message_id}
    assert time.waits == [0.5, 1.0]
    retries = [r.getMessage() for r in caplog.records if r.name == "llamon_agent.client"]
    assert len(retries) == 2
    assert all("UPSTREAM_UNAVAILABLE http_5xx, HTTP 503" in line for line in retries)
    assert not any("127.0.0.1" in line for line in retries)


async def test_a_server_that_stays_down_ends_with_retried_and_the_attempt_codes() -> None:
    agent = FlakyAgent(failures=10)
    time = Recorded()
    message = user_message("ping")
    async with running_server(agent.app()) as url, httpx.AsyncClient(timeout=10) as http:
        client = client_for(url, http)
        with pytest.raises(A2AClientHTTPError) as info:
            await call_with_retry(
                lambda: send(client, message),
                policy=RetryPolicy(),
                idempotent=True,
                sleep=time.sleep,
                clock=time.clock,
                rng=lambda: 1.0,
            )
    assert info.value.status_code == 503
    assert len(agent.requests) == 4
    assert time.waits == [0.5, 1.0, 2.0]
    found = classify_exception(info.value)
    assert (found.code, found.http_status) == (ErrorCode.UPSTREAM_UNAVAILABLE, 503)
    assert (found.retried, found.attempt_codes) == (3, (ErrorCode.UPSTREAM_UNAVAILABLE,) * 4)
