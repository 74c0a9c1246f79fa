"""Runner events on OpenTelemetry (an SDK with an in-memory exporter): a served run's
``task.working`` carries its trace id, each event is a span event on the span it was
emitted in (ids and codes only, never message text or a secret), and a caller's
``traceparent`` is read from the message metadata when no header carries one."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from a2a.types import Message, Part, Role, TaskState, TextPart
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import INVALID_SPAN

from llamon_agent import END, START, GraphBuilder
from llamon_agent.a2a.server import create_app
from llamon_agent.core.events import EventBus, RunnerEvent
from llamon_agent.core.telemetry import SpanEventSubscriber, span_event_subscriber, trace_id_of
from llamon_agent.loop import LoopAgent, ModelResponse, ScriptedModel, ToolRegistry, tool, tool_call
from tests._support.a2a_server import a2a_client, make_card, running_server, send, user_message
from tests._support.otel import span_exporter, span_texts, spans_named
from tests._support.serve import rpc
from tests.e2e.flow.test_flow_e2e import example_flow

SECRET = "sk-evstore-SENTINEL-8d1e"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@tool
def lookup(account: str) -> str:
    """Look an account up."""
    raise RuntimeError(f"bank refused {account} with key {SECRET}")


async def charge_node(state: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError(f"card 4111 1111 1111 1111 refused, api_key={SECRET}")


def _events(span: ReadableSpan) -> list[tuple[str, dict[str, Any]]]:
    return [(event.name, dict(event.attributes or {})) for event in span.events]


def _one(spans: list[ReadableSpan]) -> ReadableSpan:
    assert len(spans) == 1, [span.name for span in spans]
    return spans[0]


async def test_a_served_flows_events_are_span_events_on_the_task_and_node_spans() -> None:
    exporter = span_exporter()
    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    app = create_app(example_flow().compile(), make_card(), events=bus)
    async with running_server(app) as url, a2a_client(url) as client:
        task = await send(client, user_message("math"))
        assert task.status.state == TaskState.failed
        assert await bus.flush()
        invoke = _one(spans_named(exporter, "invoke_agent "))
        exporter.clear()
        again = await send(client, user_message("again"))  # the next request is answered
        assert again.status.state == TaskState.failed

    failure = {
        "llamon.stage": "flow_node",
        "llamon.flow.node": "rag_search",
        "error.type": "component_invoke_error",
        "llamon.error_code": "UPSTREAM_UNAVAILABLE",
        "llamon.retryable": True,
    }
    assert _events(invoke) == [
        ("task.working", {"llamon.stage": "a2a_serve"}),
        ("task.failed", failure),
    ]
    working = next(e for e in got if e.type == "task.working" and e.task_id == task.id)
    assert working.trace_metadata["trace_id"] == format(invoke.context.trace_id, "032x")
    assert len(str(working.trace_metadata["trace_id"])) == 32


async def test_a_failed_nodes_span_has_its_events_and_no_secret_reaches_a_span() -> None:
    exporter = span_exporter()
    flow = (
        GraphBuilder()
        .node("charge", charge_node, node_kind="business")
        .edge(START, "charge")
        .edge("charge", END)
    )
    async with (
        running_server(create_app(flow.compile(), make_card(), events=EventBus())) as url,
        a2a_client(url) as client,
    ):
        task = await send(client, user_message(f"pay with {SECRET}"))
        assert task.status.state == TaskState.failed
        node = _one(spans_named(exporter, "flow_node charge"))
        texts = list(span_texts(exporter))
        again = await send(client, user_message("hi"))
        assert again.status.state == TaskState.failed
    assert [name for name, _ in _events(node)] == ["node.started", "node.failed"]
    failed = _events(node)[1][1]
    assert failed == {
        "llamon.stage": "flow_node",
        "llamon.flow.node": "charge",
        "error.type": failed["error.type"],
        "llamon.error_code": "INTERNAL_ERROR",
        "llamon.retryable": False,
    }
    assert not any(SECRET in text or "4111" in text or "refused" in text for text in texts)


async def test_a_served_loops_tool_steps_are_span_events_with_ids_and_codes_only() -> None:
    exporter = span_exporter()
    model = ScriptedModel(
        [ModelResponse(tool_calls=(tool_call("lookup", {"account": SECRET}, id="c1"),)), "no"],
        name="scripted",
    )
    agent = LoopAgent(model, ToolRegistry([lookup]))
    async with (
        running_server(create_app(agent, make_card(), events=EventBus())) as url,
        a2a_client(url) as client,
    ):
        task = await send(client, user_message("look me up"))
        assert task.status.state == TaskState.completed
        invoke = _one(spans_named(exporter, "invoke_agent "))
        texts = list(span_texts(exporter))
    events = _events(invoke)
    assert [name for name, _ in events] == [
        "task.working",
        "run.started",
        "model.completed",
        "step.started",
        "step.failed",
        "model.completed",
        "run.completed",
        "task.completed",
    ]
    assert events[4][1] == {
        "llamon.stage": "tool_loop",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "c1",
        "error.type": "tool_error",
        "llamon.error_code": "UPSTREAM_UNAVAILABLE",
        "llamon.retryable": True,
    }
    assert not any(SECRET in text or "failed (incident" in text for text in texts)


def test_without_a_recording_span_nothing_is_added_and_there_is_no_trace_id() -> None:
    bus = EventBus()
    subscriber = span_event_subscriber(bus)
    assert span_event_subscriber(bus) is subscriber  # one per bus
    bus.publish(RunnerEvent("task.working", "a2a_serve", task_id="t1"))  # no current span
    assert isinstance(subscriber, SpanEventSubscriber)
    assert subscriber.added == 0
    assert trace_id_of(INVALID_SPAN) is None


def _metadata_message(text: str, metadata: dict[str, Any]) -> Message:
    return Message(
        role=Role.user,
        message_id=uuid.uuid4().hex,
        parts=[Part(root=TextPart(text=text))],
        metadata=metadata,
    )


async def test_a_traceparent_in_the_message_metadata_joins_the_callers_trace() -> None:
    exporter = span_exporter()
    carried = {"traceparent": f"00-{TRACE}-{PARENT}-01", "tracestate": "vendor=1"}

    async def agent(ctx: Any) -> str:
        return "ok"

    app = create_app(agent, make_card())
    async with running_server(app) as url, a2a_client(url) as client:
        task = await send(client, _metadata_message("hi", carried))
        assert task.status.state == TaskState.completed
        joined = _one(spans_named(exporter, "invoke_agent "))

        exporter.clear()  # a malformed one starts a trace of its own; still answered
        task = await send(client, _metadata_message("hi", {"traceparent": "00-nonsense"}))
        assert task.status.state == TaskState.completed
        fresh = _one(spans_named(exporter, "invoke_agent "))

        exporter.clear()  # a header wins over the metadata
        header = f"00-{'1' * 32}-{'2' * 16}-01"
        async with httpx.AsyncClient(timeout=10) as http:
            http.headers["traceparent"] = header
            params = {"message": _metadata_message("hi", carried).model_dump(mode="json")}
            reply = await rpc(http, url + "/", "message/send", params)
        assert reply["result"]["status"]["state"] == "completed"
        by_header = _one(spans_named(exporter, "invoke_agent "))

    assert format(joined.context.trace_id, "032x") == TRACE
    assert joined.parent is not None
    assert format(joined.parent.span_id, "016x") == PARENT
    assert joined.parent.is_remote
    assert format(fresh.context.trace_id, "032x") != TRACE
    assert fresh.parent is None
    assert format(by_header.context.trace_id, "032x") == "1" * 32
