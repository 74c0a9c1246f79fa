"""The caller side emits remote.call and remote.retry runner events (a real server)."""

from __future__ import annotations

import pytest
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import AgentClient, RemoteAgentError, RetryPolicy, clear_card_cache
from llamon_agent.core.events import EventBus, RunnerEvent, event_scope
from llamon_agent.exceptions import ComponentInvokeError
from tests._support.a2a_server import make_card, running_server


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


class FirstPostUnavailable:
    """The app, but the first POST is answered 503 (a proxy in front of a busy agent)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.refused = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not self.refused:
            self.refused = True
            await PlainTextResponse("busy", status_code=503)(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def test_a_retried_then_answered_call_and_a_failed_one() -> None:
    async def agent(ctx: AgentContext) -> str:
        if ctx.text == "never":
            raise ComponentInvokeError("never works")
        return f"echo {ctx.text}"

    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    policy = RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.001)
    app = FirstPostUnavailable(create_app(agent, make_card()))
    async with running_server(app) as url:  # type: ignore[arg-type]
        with event_scope(bus, task_id="caller-task"):
            async with AgentClient(url, retry=policy) as client:
                result = await client.send("hi")
                with pytest.raises(RemoteAgentError):
                    await client.send("never")
                assert (await client.send("again")).text == "echo again"
    assert result.text == "echo hi"
    assert await bus.flush()
    assert [(e.type, e.stage, e.task_id) for e in got] == [
        ("remote.retry", "a2a_call", "caller-task"),
        ("remote.call", "a2a_call", "caller-task"),
        ("remote.call", "a2a_call", "caller-task"),
        ("remote.call", "a2a_call", "caller-task"),
    ]
    retry = got[0].trace_metadata
    assert (
        retry["failure_reason"],
        retry["error_code"],
        retry["http_status"],
        retry["attempt"],
        retry["operation"],
    ) == ("http_5xx", "UPSTREAM_UNAVAILABLE", 503, 1, "message/send")
    outcomes = [(e.trace_metadata["operation"], e.trace_metadata["outcome"]) for e in got[1:]]
    assert outcomes == [("message/send", "ok"), ("message/send", "failed"), ("message/send", "ok")]
    failed = got[2].trace_metadata
    assert (failed["failure_reason"], failed["error_code"]) == (
        "component_invoke_error",
        "UPSTREAM_UNAVAILABLE",
    )
