"""Every row of the retry table through ``AgentClient``, against real servers on 127.0.0.1.

A fault server (Starlette under uvicorn) answers each JSON-RPC request with the next
scripted fault -- an HTTP status, a JSON-RPC error with a llamon agent's error data, or no
answer in time -- then a completed task. The waits are recorded (``Recorded``: a
``RetryClock`` whose sleep only writes the wait down), so each test asserts the attempts
made, the time waited, and that the next call is answered.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from a2a.types import TaskState
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import (
    AgentClient,
    ApiKey,
    Bearer,
    RemoteAgentError,
    RemoteAuthRequiredError,
    RemoteGuardrailBlockedError,
    RemoteInternalError,
    RemoteInvalidInputError,
    RemoteNotFoundError,
    RemoteTimeoutError,
    RemoteUnavailableError,
    RetryPolicy,
    clear_card_cache,
)
from llamon_agent.core.classify import classify_exception, classify_received
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.hitl import HITLInterrupt
from tests._support.a2a_server import make_card, running_server
from tests._support.retry_clock import Recorded

E = ErrorCode


@dataclass(frozen=True)
class Fault:
    """One scripted answer: ``status`` (an HTTP error), ``rpc`` (a JSON-RPC error code with
    ``data``), ``hang`` (no answer until the agent's ``release`` is set)."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    rpc: int | None = None
    data: dict[str, Any] | None = None
    hang: bool = False


@dataclass
class Seen:
    method: str
    message_id: str | None
    authorization: str | None


class FaultAgent:
    """A plain JSON-RPC agent (not llamon) that answers its scripted faults first."""

    def __init__(self, *faults: Fault) -> None:
        self.faults = list(faults)
        self.seen: list[Seen] = []
        self.release = asyncio.Event()

    async def card(self, request: Request) -> Response:
        url = f"{request.url.scheme}://{request.url.netloc}/"
        return JSONResponse(make_card(url, streaming=False).model_dump(mode="json"))

    async def rpc(self, request: Request) -> Response:
        body = await request.json()
        message = body.get("params", {}).get("message") or {}
        self.seen.append(
            Seen(body["method"], message.get("messageId"), request.headers.get("authorization"))
        )
        fault = self.faults.pop(0) if self.faults else Fault()
        if fault.status is not None:
            return JSONResponse({"detail": "no"}, status_code=fault.status, headers=fault.headers)
        if fault.rpc is not None:
            error = {"code": fault.rpc, "message": "refused", "data": fault.data}
            return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "error": error})
        if fault.hang:
            await self.release.wait()
        text = "".join(p.get("text", "") for p in message.get("parts", []))
        task = {
            "kind": "task",
            "id": f"task-{len(self.seen)}",
            "contextId": "ctx-1",
            "status": {"state": "completed"},
            "artifacts": [{"artifactId": "a-1", "parts": [{"kind": "text", "text": f"re {text}"}]}],
        }
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": task})

    def app(self) -> Starlette:
        paths = ("/.well-known/agent-card.json", "/.well-known/agent.json")
        return Starlette(
            routes=[
                *(Route(path, self.card, methods=["GET"]) for path in paths),
                Route("/", self.rpc, methods=["POST"]),
            ]
        )

    @property
    def sends(self) -> list[Seen]:
        return [seen for seen in self.seen if seen.method == "message/send"]


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


@asynccontextmanager
async def fault_server(agent: FaultAgent) -> AsyncIterator[str]:
    async with running_server(agent.app()) as url:
        yield url


def _data(code: ErrorCode, reason: str, retriable: bool, **more: object) -> dict[str, Any]:
    return {"errorCode": code.value, "errorReason": reason, "retriable": retriable, **more}


def _assert_retried(error: RemoteAgentError, codes: list[ErrorCode]) -> None:
    found = classify_received(error)
    assert (found.retried, list(found.attempt_codes)) == (len(codes) - 1, codes)


# -- UPSTREAM_UNAVAILABLE: 5xx, connection refused ------------------------------------------


async def test_a_5xx_burst_then_success_backs_off_with_the_same_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = FaultAgent(Fault(status=503), Fault(status=502))
    time = Recorded()
    async with fault_server(agent) as url:
        client = AgentClient(url, auth=Bearer("s3cr3t-token"), clock=time.clock())
        async with client:
            with caplog.at_level(logging.INFO, logger="llamon_agent.client"):
                result = await client.send("ping")
            following = await client.send("again")
    assert (result.state, result.text) == (TaskState.completed, "re ping")
    assert following.text == "re again"
    assert len(agent.sends) == 4
    assert len({seen.message_id for seen in agent.sends[:3]}) == 1
    assert time.waits == [0.5, 1.0]
    lines = [r.getMessage() for r in caplog.records if r.name == "llamon_agent.client"]
    assert lines == [
        "message/send failed (UPSTREAM_UNAVAILABLE http_5xx, HTTP 503); retry 1 of 3 in 0.500 s",
        "message/send failed (UPSTREAM_UNAVAILABLE http_5xx, HTTP 502); retry 2 of 3 in 1.000 s",
    ]
    assert not any("127.0.0.1" in line or "s3cr3t" in line for line in lines)


async def test_a_server_that_stays_down_ends_with_the_last_error_and_its_attempts() -> None:
    agent = FaultAgent(*[Fault(status=503)] * 4)
    time = Recorded()
    async with fault_server(agent) as url, AgentClient(url, clock=time.clock()) as client:
        with pytest.raises(RemoteUnavailableError) as caught:
            await client.send("ping")
        following = await client.send("again")
    assert (caught.value.reason, caught.value.http_status) == ("http_5xx", 503)
    _assert_retried(caught.value, [E.UPSTREAM_UNAVAILABLE] * 4)
    assert len(agent.sends) == 5
    assert time.waits == [0.5, 1.0, 2.0]
    assert following.text == "re again"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def serving_on(app: Starlette, port: int) -> AsyncIterator[None]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield  # the socket listens already: connections wait in its backlog
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)
        sock.close()


@pytest.mark.reason("network_error")
async def test_connection_refused_is_retried_until_the_agent_is_up() -> None:
    agent = FaultAgent()
    port = _free_port()
    card = make_card(f"http://127.0.0.1:{port}/", streaming=False)
    async with AsyncExitStack() as stack:

        async def start_on_second_wait(number: int) -> None:
            if number == 2:
                await stack.enter_async_context(serving_on(agent.app(), port))

        time = Recorded(on_sleep=start_on_second_wait)
        async with AgentClient(card, clock=time.clock()) as client:
            result = await client.send("ping")
            following = await client.send("again")
    assert result.text == "re ping"
    assert following.text == "re again"
    assert time.waits == [0.5, 1.0]
    assert len(agent.sends) == 2  # the two refused attempts never reached it


async def test_the_deadline_cuts_the_last_wait_and_stops_the_attempts() -> None:
    agent = FaultAgent(*[Fault(status=503)] * 10)
    time = Recorded()
    policy = RetryPolicy(max_attempts=10, deadline=3.0)
    async with fault_server(agent) as url, AgentClient(url, retry=policy, clock=time.clock()) as c:
        with pytest.raises(RemoteUnavailableError) as caught:
            await c.send("ping")
        agent.faults.clear()
        following = await c.send("again")
    assert time.waits == [0.5, 1.0, 1.5]  # 2.0 cut to what was left of 3 s
    assert time.now == 3.0
    _assert_retried(caught.value, [E.UPSTREAM_UNAVAILABLE] * 4)
    assert following.text == "re again"


# -- RATE_LIMITED ------------------------------------------------------------------------


@pytest.mark.reason("rate_limited")
async def test_429_waits_what_retry_after_asks() -> None:
    agent = FaultAgent(Fault(status=429, headers={"Retry-After": "2"}))
    time = Recorded()
    async with fault_server(agent) as url, AgentClient(url, clock=time.clock()) as client:
        result = await client.send("ping")
        following = await client.send("again")
    assert result.text == "re ping"
    assert time.waits == [2.0]
    assert len(agent.sends) == 3
    assert following.text == "re again"


async def test_rate_limited_error_data_waits_its_retry_after_ms() -> None:
    data = _data(E.RATE_LIMITED, "quota_exceeded", True, retryAfterMs=1500)
    agent = FaultAgent(Fault(rpc=-32603, data=data))
    time = Recorded()
    async with fault_server(agent) as url, AgentClient(url, clock=time.clock()) as client:
        result = await client.send("ping")
        following = await client.send("again")
    assert result.text == "re ping"
    assert time.waits == [1.5]
    assert agent.sends[0].message_id == agent.sends[1].message_id
    assert following.text == "re again"


async def test_a_429_asking_past_the_deadline_waits_only_what_is_left() -> None:
    agent = FaultAgent(*[Fault(status=429, headers={"Retry-After": "60"})] * 2)
    time = Recorded()
    policy = RetryPolicy(deadline=10.0)
    async with fault_server(agent) as url, AgentClient(url, retry=policy, clock=time.clock()) as c:
        with pytest.raises(RemoteAgentError) as caught:
            await c.send("ping")
        following = await c.send("again")
    assert caught.value.code is E.RATE_LIMITED
    assert caught.value.retry_after_ms == 60_000
    assert time.waits == [10.0]
    _assert_retried(caught.value, [E.RATE_LIMITED] * 2)
    assert following.text == "re again"


# -- AUTH_REQUIRED ----------------------------------------------------------------------


async def test_401_refreshes_the_bearer_token_once_then_succeeds() -> None:
    agent = FaultAgent(Fault(status=401))
    renewals: list[str] = []

    async def renew() -> str:
        renewals.append("fresh")
        return "fresh"

    time = Recorded()
    async with (
        fault_server(agent) as url,
        AgentClient(url, auth=Bearer("stale", refresh=renew), clock=time.clock()) as c,
    ):
        result = await c.send("ping")
        following = await c.send("again")
    assert result.text == "re ping"
    assert renewals == ["fresh"]
    assert [seen.authorization for seen in agent.sends] == [
        "Bearer stale",
        "Bearer fresh",
        "Bearer fresh",
    ]
    assert sum(time.waits) == 0.0
    assert following.text == "re again"


async def test_401_after_the_refresh_stops() -> None:
    agent = FaultAgent(Fault(status=401), Fault(status=401))
    renewals: list[str] = []

    async def renew() -> str:
        renewals.append("fresh")
        return "fresh"

    async with (
        fault_server(agent) as url,
        AgentClient(url, auth=Bearer("stale", refresh=renew), clock=Recorded().clock()) as c,
    ):
        with pytest.raises(RemoteAuthRequiredError) as caught:
            await c.send("ping")
        following = await c.send("again")
    assert renewals == ["fresh"]
    assert len(agent.sends) == 3
    _assert_retried(caught.value, [E.AUTH_REQUIRED] * 2)
    assert following.text == "re again"


async def test_401_with_an_api_key_is_final() -> None:
    agent = FaultAgent(Fault(status=401))
    time = Recorded()
    async with (
        fault_server(agent) as url,
        AgentClient(url, auth=ApiKey("k-123"), clock=time.clock()) as client,
    ):
        with pytest.raises(RemoteAuthRequiredError) as caught:
            await client.send("ping")
        following = await client.send("again")
    assert len(agent.sends) == 2
    _assert_retried(caught.value, [E.AUTH_REQUIRED])
    assert "k-123" not in str(caught.value)
    assert following.text == "re again"


@pytest.mark.reason("auth_failed")
async def test_403_is_not_retried() -> None:
    agent = FaultAgent(Fault(status=403))
    renewals: list[str] = []

    async def renew() -> str:
        renewals.append("fresh")
        return "fresh"

    time = Recorded()
    async with (
        fault_server(agent) as url,
        AgentClient(url, auth=Bearer("t", refresh=renew), clock=time.clock()) as c,
    ):
        with pytest.raises(RemoteAuthRequiredError) as caught:
            await c.send("ping")
        following = await c.send("again")
    assert (caught.value.http_status, caught.value.reason) == (403, "auth_failed")
    assert (renewals, time.waits, len(agent.sends)) == ([], [], 2)
    _assert_retried(caught.value, [E.AUTH_REQUIRED])
    assert following.text == "re again"


# -- never retried ----------------------------------------------------------------------

NEVER = [
    (Fault(status=400), RemoteUnavailableError, E.UPSTREAM_UNAVAILABLE, "http_4xx"),
    (
        Fault(rpc=-32602, data=_data(E.INVALID_INPUT, "missing_field", False)),
        RemoteInvalidInputError,
        E.INVALID_INPUT,
        "missing_field",
    ),
    (
        Fault(rpc=-32603, data=_data(E.GUARDRAIL_BLOCKED, "pii_detected", False)),
        RemoteGuardrailBlockedError,
        E.GUARDRAIL_BLOCKED,
        "pii_detected",
    ),
    (
        Fault(rpc=-32001, data=_data(E.NOT_FOUND, "document_not_found", False)),
        RemoteNotFoundError,
        E.NOT_FOUND,
        "document_not_found",
    ),
    (
        Fault(rpc=-32603, data=_data(E.INTERNAL_ERROR, "bug", False)),
        RemoteInternalError,
        E.INTERNAL_ERROR,
        "bug",
    ),
]


@pytest.mark.reason("http_4xx")
@pytest.mark.parametrize(
    ("fault", "kind", "code", "reason"),
    NEVER,
    ids=["http-400", "invalid-input", "guardrail-blocked", "not-found", "internal-not-retriable"],
)
async def test_a_failure_the_table_never_retries_is_raised_at_once(
    fault: Fault, kind: type[RemoteAgentError], code: ErrorCode, reason: str
) -> None:
    agent = FaultAgent(fault)
    time = Recorded()
    async with fault_server(agent) as url, AgentClient(url, clock=time.clock()) as client:
        with pytest.raises(kind) as caught:
            await client.send("ping")
        following = await client.send("again")
    assert (caught.value.code, caught.value.reason) == (code, reason)
    assert (time.waits, len(agent.sends)) == ([], 2)
    _assert_retried(caught.value, [code])
    assert following.text == "re again"


async def test_an_internal_error_that_says_retriable_is_backed_off() -> None:
    agent = FaultAgent(Fault(rpc=-32603, data=_data(E.INTERNAL_ERROR, "flaky", True)))
    time = Recorded()
    async with fault_server(agent) as url, AgentClient(url, clock=time.clock()) as client:
        result = await client.send("ping")
    assert result.text == "re ping"
    assert time.waits == [0.5]


# -- UPSTREAM_TIMEOUT: only an idempotent call --------------------------------------------


class Slow:
    """A llamon agent whose runs wait for ``release``."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.release = asyncio.Event()

    async def __call__(self, ctx: AgentContext) -> str:
        self.runs.append(ctx.task_id)
        await self.release.wait()
        return f"slow {ctx.text}"


@pytest.mark.reason("timeout")
async def test_a_send_past_the_timeout_is_sent_again_and_answered_by_the_same_task() -> None:
    slow = Slow()

    async def release(_: int) -> None:
        slow.release.set()

    time = Recorded(on_sleep=release)
    async with (
        running_server(create_app(slow, make_card())) as url,
        AgentClient(url, timeout=0.3, clock=time.clock()) as client,
    ):
        result = await client.send("scan")
        following = await client.send("again")
    assert (result.state, result.text) == (TaskState.completed, "slow scan")
    assert slow.runs[0] == result.task_id
    assert len(slow.runs) == 2  # "scan" ran once, "again" once
    assert time.waits == [0.5]
    assert following.text == "slow again"


class SlowToResume:
    """A llamon agent that asks a question, then waits for ``release`` with the answer."""

    def __init__(self) -> None:
        self.answers: list[str] = []
        self.release = asyncio.Event()

    async def __call__(self, ctx: AgentContext) -> str | HITLInterrupt:
        if not ctx.resumed:
            return HITLInterrupt(payload={"question": "which city?"})
        self.answers.append(ctx.text)
        await self.release.wait()
        return f"booked {ctx.text}"


@pytest.mark.reason("timeout")
async def test_a_timed_out_answer_to_a_llamon_agent_is_sent_again_and_runs_once() -> None:
    agent = SlowToResume()

    async def release(_: int) -> None:
        agent.release.set()

    time = Recorded(on_sleep=release)
    async with (
        running_server(create_app(agent, make_card())) as url,
        AgentClient(url, timeout=0.3, clock=time.clock()) as client,
    ):
        asked = await client.send("book a trip")
        assert asked.needs_input
        result = await client.resume(asked, "Paris")
        following = await client.send("again")
    assert (result.state, result.text, result.task_id) == (
        TaskState.completed,
        "booked Paris",
        asked.task_id,
    )
    assert agent.answers == ["Paris"]  # the retried answer was not run again
    assert time.waits == [0.5]
    assert following.needs_input


async def test_a_timed_out_answer_to_another_agent_is_not_sent_twice() -> None:
    agent = FaultAgent(Fault(hang=True))
    time = Recorded()
    async with (
        fault_server(agent) as url,
        AgentClient(url, timeout=0.3, clock=time.clock()) as client,
    ):
        with pytest.raises(RemoteTimeoutError) as caught:
            await client.send("Paris", task_id="task-9", context_id="ctx-1")
        agent.release.set()
        following = await client.send("again")
    assert (caught.value.reason, caught.value.task_id) == ("timeout", "task-9")
    assert (time.waits, len(agent.sends)) == ([], 2)
    _assert_retried(caught.value, [E.UPSTREAM_TIMEOUT])
    assert following.text == "re again"


# -- the policy: per client and per call --------------------------------------------------


async def test_a_per_call_policy_overrides_the_clients() -> None:
    agent = FaultAgent(Fault(status=503), Fault(status=503))
    time = Recorded()
    once = RetryPolicy(max_attempts=1)
    async with fault_server(agent) as url, AgentClient(url, retry=once, clock=time.clock()) as c:
        assert c.retry is once
        with pytest.raises(RemoteUnavailableError):
            await c.send("ping")
        result = await c.send("ping", retry=RetryPolicy())
    assert result.text == "re ping"
    assert time.waits == [0.5]
    assert len(agent.sends) == 3


async def test_get_is_retried_too() -> None:
    agent = FaultAgent(Fault(status=503))
    time = Recorded()
    async with fault_server(agent) as url, AgentClient(url, clock=time.clock()) as client:
        result = await client.get("task-1")
        following = await client.get("task-1")
    assert result.state is following.state is TaskState.completed
    assert [seen.method for seen in agent.seen] == ["tasks/get"] * 3
    assert time.waits == [0.5]


async def test_what_the_caller_of_an_agent_gets_is_the_failure_one_hop_up() -> None:
    agent = FaultAgent(Fault(status=401))
    async with fault_server(agent) as url, AgentClient(url, clock=Recorded().clock()) as client:
        with pytest.raises(RemoteAuthRequiredError) as caught:
            await client.send("ping")
    answer = classify_exception(caught.value)
    assert (answer.code, answer.reason, answer.hop_from) == (
        E.UPSTREAM_UNAVAILABLE,
        "a2a_upstream_auth_failed",
        E.AUTH_REQUIRED,
    )
