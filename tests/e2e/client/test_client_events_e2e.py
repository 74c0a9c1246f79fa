"""The caller side emits remote.call and remote.retry runner events (a real server)."""

from __future__ import annotations

import pytest
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import AgentClient, RemoteAgentError, RetryPolicy, clear_card_cache
from llamon_agent.core.events import EventBus, RunnerEvent, emit, event_scope
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


SECRET = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"


async def test_a_called_agents_events_are_followed_and_forwarded_with_their_extra_fields() -> None:
    async def downstream(ctx: AgentContext) -> str:
        emit(
            "retriever.searched",
            "retrieve",
            metadata={"hits_count": 3},
            extra={"index": "faq-v3", "api_key": SECRET, "note": "see https://db.internal:5432"},
        )
        return f"found {ctx.text}"

    remote_bus = EventBus()
    app = create_app(downstream, make_card(), events=remote_bus)
    local_bus = EventBus()
    forwarded: list[RunnerEvent] = []
    local_bus.subscribe(forwarded.append)
    async with running_server(app) as url, AgentClient(url) as client:
        with event_scope(local_bus, task_id="caller-task"):
            result = await client.send("faq")
            assert result.task_id is not None
            followed = [event async for event in client.events(result.task_id, forward=True)]
        with pytest.raises(RemoteAgentError):
            _ = [event async for event in client.events("no-such-task")]
        assert (await client.send("next")).text == "found next"
    assert await local_bus.flush()
    assert [e.type for e in followed] == [
        "task.submitted",
        "task.working",
        "retriever.searched",
        "task.completed",
    ]
    searched = followed[2]
    assert searched.task_id == result.task_id  # the called agent's own task
    assert searched.trace_metadata == {"hits_count": 3}
    assert searched.extra["index"] == "faq-v3"
    assert searched.extra["api_key"] == "[REDACTED]"
    assert "db.internal" not in str(searched.extra["note"])
    assert [e.type for e in forwarded if not e.type.startswith("remote.")] == [
        e.type for e in followed
    ]
    assert [e.extra for e in forwarded if e.type == "retriever.searched"] == [searched.extra]
