"""The seed's ``stream_response`` sample, as written, in a ``GraphBuilder`` flow served by
llamon, calling a real downstream llamon agent on loopback that streams and then fails:
the chunks reach the flow's caller (a2a-sdk's streaming client), the flow's failure answer
carries the downstream's errorCode, and the next request is answered."""

from __future__ import annotations

import ast
import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.types import DataPart, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent
from langgraph.config import get_stream_writer

from llamon_agent import END, START, GraphBuilder, build_agent_context, call_agent_stream
from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import clear_card_cache
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import raise_application_error
from tests._support.a2a_server import (
    a2a_client,
    make_card,
    running_server,
    send,
    stream,
    user_message,
)
from tests._support.parts import texts_of

SEED_SAMPLE = """\
from llamon_agent.exceptions import ComponentInvokeError

async def stream_response(state, *, agent_url):
    writer = get_stream_writer()
    full = ""
    async for chunk in call_agent_stream(agent_url, build_agent_context(state)):
        writer(chunk)
        full += chunk
        if some_mid_stream_error_condition:
            # 청크 N개 발행 후 실패 — SDK 가 자동으로 failed 마감
            raise ComponentInvokeError("mid-stream failure")
    return {"output": full}
"""
"""The sample exactly as the guide prints it (its comment included)."""


def load_sample(*, fail_mid_stream: bool) -> Any:
    """``stream_response`` from the sample's own text; ``some_mid_stream_error_condition``
    is a global of the module it runs in."""
    namespace: dict[str, Any] = {
        "get_stream_writer": get_stream_writer,
        "call_agent_stream": call_agent_stream,
        "build_agent_context": build_agent_context,
        "some_mid_stream_error_condition": fail_mid_stream,
    }
    exec(compile(ast.parse(SEED_SAMPLE), "seed-000", "exec"), namespace)  # noqa: S102
    return namespace["stream_response"]


class Downstream:
    """A llamon agent that streams three chunks and then ends as its message says:
    ``busy`` fails RATE_LIMITED, ``down`` fails INTERNAL_ERROR, anything else completes."""

    def __init__(self) -> None:
        self.received: list[tuple[str, list[dict[str, Any]]]] = []

    async def invoke(self, ctx: AgentContext) -> str:
        return f"answered {ctx.text}"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
        self.received.append((ctx.text, list(ctx.data)))
        for index in range(3):
            yield f"d{index} "
        if ctx.text == "busy":
            raise_application_error(
                ErrorCode.RATE_LIMITED,
                "quota_exceeded",
                message="the quota is used up",
                retriable=True,
                retryAfterMs=1500,
            )


def flow(downstream_url: str, *, fail_mid_stream: bool) -> GraphBuilder:
    node = functools.partial(load_sample(fail_mid_stream=fail_mid_stream), agent_url=downstream_url)
    return (
        GraphBuilder()
        .node("stream_response", node, node_kind="llm")
        .edge(START, "stream_response")
        .edge("stream_response", END)
    )


def chunk_texts(events: list[Any]) -> list[str]:
    return [
        text
        for _, update in events
        if isinstance(update, TaskArtifactUpdateEvent) and not update.last_chunk
        for text in texts_of(update.artifact.parts)
    ]


def failure_data(events: list[Any]) -> dict[str, Any]:
    (failed,) = [
        update
        for _, update in events
        if isinstance(update, TaskStatusUpdateEvent) and update.status.state == TaskState.failed
    ]
    assert failed.final is True
    assert failed.status.message is not None
    (data,) = [p.root.data for p in failed.status.message.parts if isinstance(p.root, DataPart)]
    return data


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


async def test_the_downstream_chunks_reach_the_caller_and_its_failure_code_too() -> None:
    downstream = Downstream()
    async with running_server(create_app(downstream, make_card())) as down_url:
        app = create_app(flow(down_url, fail_mid_stream=False), make_card())
        async with running_server(app) as url, a2a_client(url, streaming=True) as caller:
            events = await stream(caller, user_message("busy"))
            following = await send(caller, user_message("hello"))
    assert chunk_texts(events) == ["d0 ", "d1 ", "d2 "]
    data = failure_data(events)
    assert (data["errorCode"], data["errorReason"], data["retriable"], data["retryAfterMs"]) == (
        "RATE_LIMITED",
        "quota_exceeded",
        True,
        1500,
    )
    assert data["node"] == {"id": "stream_response", "kind": "llm"}
    assert downstream.received[0] == ("busy", [])  # the query, as text; nothing else
    assert following.status.state == TaskState.completed
    assert "".join(texts_of(following.artifacts[0].parts)) == "d0 d1 d2 "  # type: ignore[index]


async def test_the_sample_failing_mid_stream_closes_the_flow_failed() -> None:
    downstream = Downstream()
    async with running_server(create_app(downstream, make_card())) as down_url:
        app = create_app(flow(down_url, fail_mid_stream=True), make_card())
        async with running_server(app) as url, a2a_client(url, streaming=True) as caller:
            events = await stream(caller, user_message("hello"))
            following = await send(caller, user_message("hello again"))
    assert chunk_texts(events) == ["d0 "]  # one chunk, then the sample raises
    data = failure_data(events)
    assert (data["errorCode"], data["errorReason"]) == (
        "UPSTREAM_UNAVAILABLE",
        "component_invoke_error",
    )
    assert following.status.state == TaskState.failed  # the same condition, on send too
