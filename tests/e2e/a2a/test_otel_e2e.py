"""OpenTelemetry across real servers on 127.0.0.1: A -> B -> C through ``AgentClient`` is
one trace (each ``invoke_agent`` span the child of its caller's), a served loop's spans
hold no secret, and ``GET /metrics`` counts tasks by state and errorCode."""

from __future__ import annotations

import httpx
from a2a.types import TaskState
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from starlette.applications import Starlette

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import AgentClient
from llamon_agent.core.errors import ErrorCode, raise_application_error
from llamon_agent.loop import (
    LoopAgent,
    ModelResponse,
    ScriptedModel,
    ToolRegistry,
    tool,
    tool_call,
)
from tests._support.a2a_server import a2a_client, make_card, running_server, send, user_message
from tests._support.otel import span_exporter, span_texts, spans_named

SENTINEL = "sk-otel-e2e-SENTINEL-81d3"


class Relay:
    """Answers ``<name>(<what the next agent answered>)``; the last one answers its text."""

    def __init__(self, name: str, next_url: str | None = None) -> None:
        self.name = name
        self.next_url = next_url

    async def invoke(self, ctx: AgentContext) -> str:
        if self.next_url is None:
            return f"{self.name}({ctx.text})"
        async with AgentClient(self.next_url) as client:
            answer = await client.send(ctx.text)
        return f"{self.name}({answer.text})"


def _app(agent: object, name: str) -> Starlette:
    return create_app(agent, make_card().model_copy(update={"name": name}))


async def test_a_call_through_three_agents_is_one_trace() -> None:
    exporter = span_exporter()
    async with (
        running_server(_app(Relay("C"), "agent-c")) as c_url,
        running_server(_app(Relay("B", c_url), "agent-b")) as b_url,
        running_server(_app(Relay("A", b_url), "agent-a")) as a_url,
        AgentClient(a_url) as client,
    ):
        with trace.get_tracer("test").start_as_current_span("caller") as caller:
            answer = await client.send("ping")
        again = await client.send("pong")  # the servers still answer
    assert answer.text == "A(B(C(ping)))"
    assert again.text == "A(B(C(pong)))"
    spans: dict[str, ReadableSpan] = {}
    for span in spans_named(exporter, "invoke_agent "):
        spans.setdefault(span.name, span)  # the first request's
    first = [spans[f"invoke_agent agent-{x}"] for x in "abc"]
    caller_context = caller.get_span_context()
    a, b, c = first
    assert {span.context.trace_id for span in first} == {caller_context.trace_id}
    assert a.parent is not None
    assert a.parent.span_id == caller_context.span_id
    assert b.parent is not None
    assert b.parent.span_id == a.context.span_id
    assert c.parent is not None
    assert c.parent.span_id == b.context.span_id
    assert [span.kind for span in first] == [SpanKind.SERVER] * 3
    assert dict(b.attributes or {})["llamon.task.state"] == "completed"
    assert dict(b.attributes or {})["gen_ai.operation.name"] == "invoke_agent"
    second = [s for s in spans_named(exporter, "invoke_agent ") if s not in first]
    assert len(second) == 3
    assert len({span.context.trace_id for span in second}) == 1  # its own trace
    assert {span.context.trace_id for span in second} != {caller_context.trace_id}


@tool
def pay(account: str, amount: int) -> str:
    """Pay an amount from an account."""
    raise RuntimeError(f"ledger refused {account}: token {SENTINEL}")


async def test_a_served_loop_leaks_no_secret_into_any_span() -> None:
    exporter = span_exporter()
    model = ScriptedModel(
        [tool_call("pay", {"account": SENTINEL, "amount": 5}, id="c-1"), f"failed ({SENTINEL})"]
    )
    agent = LoopAgent(model, ToolRegistry([pay]), name="payer")
    async with (
        running_server(_app(agent, "payer")) as url,
        a2a_client(url) as client,
    ):
        task = await send(client, user_message(f"pay with {SENTINEL}"))
    assert task.status.state == TaskState.completed
    (tool_span,) = spans_named(exporter, "execute_tool ")
    (agent_span,) = spans_named(exporter, "invoke_agent ")
    assert tool_span.parent is not None
    assert tool_span.parent.span_id == agent_span.context.span_id
    assert dict(tool_span.attributes or {})["error.type"] == "tool_error"
    assert tool_span.status.status_code == StatusCode.ERROR
    assert [text for text in span_texts(exporter) if SENTINEL in text] == []


async def fails_on_request(ctx: AgentContext) -> str:
    if ctx.text == "fail":
        raise_application_error(ErrorCode.INVALID_INPUT, "query_empty", message="no query")
    return "ok"


async def test_metrics_count_tasks_by_state_and_error_code() -> None:
    exporter = span_exporter()
    card = make_card().model_copy(update={"name": "metered"})
    app = create_app(fails_on_request, card, metrics=True)
    async with running_server(app) as url, a2a_client(url) as client:
        done = await send(client, user_message("hello"))
        failed = await send(client, user_message("fail"))
        async with httpx.AsyncClient() as http:
            scraped = await http.get(f"{url}/metrics")
        after = await send(client, user_message("hello again"))
    assert (done.status.state, failed.status.state) == (TaskState.completed, TaskState.failed)
    assert after.status.state == TaskState.completed
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    lines = [line for line in scraped.text.splitlines() if 'gen_ai_agent_name="metered"' in line]
    assert [line for line in lines if line.startswith("llamon_tasks_total")] == [
        'llamon_tasks_total{gen_ai_agent_name="metered",llamon_task_state="completed"} 1.0',
        'llamon_tasks_total{gen_ai_agent_name="metered",llamon_error_code="INVALID_INPUT",'
        'llamon_task_state="failed"} 1.0',
    ]
    assert [line for line in lines if line.startswith("llamon_failure_latency_seconds_count")] == [
        'llamon_failure_latency_seconds_count{gen_ai_agent_name="metered",'
        'llamon_error_code="INVALID_INPUT"} 1.0'
    ]
    (failed_span,) = [
        span
        for span in spans_named(exporter, "invoke_agent metered")
        if dict(span.attributes or {})["llamon.task.state"] == "failed"
    ]
    attributes = dict(failed_span.attributes or {})
    assert (
        attributes["error.type"],
        attributes["llamon.error_code"],
        attributes["llamon.stage"],
    ) == (
        "query_empty",
        "INVALID_INPUT",
        "service",
    )
    assert "ids" not in scraped.text
    assert failed.id not in scraped.text


@tool
def metered_add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def metered_fail(account: str) -> str:
    """Always fails."""
    raise RuntimeError(f"refused {account}")


def _value(text: str, sample: str) -> float:
    """The value of ``sample`` (a whole sample name with labels) in a scrape; 0 if absent."""
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_metrics_count_tool_calls_by_outcome_and_reason_and_model_retries() -> None:
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=(
                    tool_call("metered_add", {"a": 1, "b": 2}),
                    tool_call("metered_fail", {"account": SENTINEL}),
                    tool_call("metered_add", {"a": "x"}),
                ),
                retries=2,
            ),
            "done",
        ]
    )
    agent = LoopAgent(model, ToolRegistry([metered_add, metered_fail]), name="tools")
    app = create_app(agent, make_card().model_copy(update={"name": "tools"}), metrics=True)
    async with running_server(app) as url, a2a_client(url) as client, httpx.AsyncClient() as http:
        before = (await http.get(f"{url}/metrics")).text
        task = await send(client, user_message("go"))
        scraped = (await http.get(f"{url}/metrics")).text
    assert task.status.state == TaskState.completed
    lines = sorted(line for line in scraped.splitlines() if 'gen_ai_tool_name="metered_' in line)
    assert lines == [
        'llamon_tool_calls_total{error_type="invalid_arguments",gen_ai_tool_name="metered_add",'
        'llamon_outcome="error"} 1.0',
        'llamon_tool_calls_total{error_type="tool_error",gen_ai_tool_name="metered_fail",'
        'llamon_outcome="error"} 1.0',
        'llamon_tool_calls_total{gen_ai_tool_name="metered_add",llamon_outcome="ok"} 1.0',
    ]
    retries = _value(scraped, "llamon_model_retries_total") - _value(
        before, "llamon_model_retries_total"
    )
    assert retries == 2.0
    assert SENTINEL not in scraped
