"""Spans of the tool loop (``core.telemetry``): ``chat {model}`` per model call and
``execute_tool {tool}`` per tool call, the failure rule on each, and no secret, argument
value or message text in any span (an SDK with an in-memory exporter)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from llamon_agent.core.telemetry import invoke_agent_span, mark_exception, tracer_provider_set
from llamon_agent.exceptions import ComponentInvokeError
from llamon_agent.loop import ModelResponse, ScriptedModel, ToolRegistry, run_loop, tool, tool_call
from tests._support.otel import span_exporter, span_texts, spans_named

SENTINEL = "sk-otel-SENTINEL-5f2c9a"
"""A secret the test puts in tool arguments, tool failures and messages."""


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def lookup(account: str) -> str:
    """Look an account up."""
    raise RuntimeError(f"bank refused {account} with key {SENTINEL}")


async def test_a_loop_run_has_a_chat_span_per_model_call_and_a_tool_span_per_call() -> None:
    exporter = span_exporter()
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=(tool_call("add", {"a": 2, "b": 3}, id="c1"),),
                usage={"input_tokens": 11, "output_tokens": 4},
                retries=1,
            ),
            "5",
        ],
        name="scripted-7",
    )
    outcome = await run_loop(model, ToolRegistry([add]), "2+3?")
    assert outcome.status == "completed"
    chats = spans_named(exporter, "chat ")
    assert [span.name for span in chats] == ["chat scripted-7", "chat scripted-7"]
    assert chats[0].kind == SpanKind.CLIENT
    assert dict(chats[0].attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted-7",
        "gen_ai.usage.input_tokens": 11,
        "gen_ai.usage.output_tokens": 4,
        "llamon.model.retries": 1,
    }
    (call,) = spans_named(exporter, "execute_tool ")
    assert call.name == "execute_tool add"
    assert dict(call.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "c1",
    }
    assert call.status.status_code == StatusCode.UNSET
    assert call.parent is None  # no span around the run: each call is a root


@pytest.mark.parametrize(
    ("calls", "tool_name", "reason"),
    [
        ([tool_call("lookup", {"account": SENTINEL}, id="c1")], "lookup", "tool_error"),
        ([tool_call(f"no_{SENTINEL}", {}, id="c1")], "(unknown)", "unknown_tool"),
        ([tool_call("add", {"a": SENTINEL}, id="c1")], "add", "invalid_arguments"),
        ([tool_call("add", f'{{"a": "{SENTINEL}"', id="c1")], "add", "malformed_arguments"),
    ],
    ids=["tool-raised", "unknown-tool", "invalid-arguments", "malformed-arguments"],
)
async def test_a_failed_tool_call_marks_its_span_and_leaks_nothing(
    calls: list[Any], tool_name: str, reason: str
) -> None:
    exporter = span_exporter()
    model = ScriptedModel([calls, f"sorry, {SENTINEL}"])
    outcome = await run_loop(model, ToolRegistry([add, lookup]), f"my key is {SENTINEL}")
    assert outcome.status == "completed"
    (span,) = spans_named(exporter, "execute_tool ")
    record = outcome.failures[0]
    assert span.name == f"execute_tool {tool_name}"
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == reason
    attributes = dict(span.attributes or {})
    assert (
        attributes["error.type"],
        attributes["llamon.error_code"],
        attributes["llamon.stage"],
    ) == (
        reason,
        record.error_code.value,
        "tool_loop",
    )
    assert attributes["gen_ai.tool.name"] == tool_name
    assert span.events == ()  # no exception event: its text may hold anything
    assert [text for text in span_texts(exporter) if SENTINEL in text] == []


async def test_a_failed_model_call_marks_its_chat_span() -> None:
    exporter = span_exporter()
    model = ScriptedModel([ComponentInvokeError(f"provider said {SENTINEL}")], name="m")
    outcome = await run_loop(model, ToolRegistry([add]), "hi")
    assert outcome.status == "model_error"
    (span,) = spans_named(exporter, "chat ")
    assert span.status.status_code == StatusCode.ERROR
    attributes = dict(span.attributes or {})
    assert (
        attributes["error.type"],
        attributes["llamon.error_code"],
        attributes["llamon.stage"],
    ) == (
        "component_invoke_error",
        "UPSTREAM_UNAVAILABLE",
        "model_call",
    )
    assert [text for text in span_texts(exporter) if SENTINEL in text] == []


async def test_spans_nest_under_the_current_span() -> None:
    exporter = span_exporter()
    with invoke_agent_span("outer", task_id="t-1", context_id="ctx-1") as outer:
        model = ScriptedModel([tool_call("add", {"a": 1, "b": 1}), "2"])
        await run_loop(model, ToolRegistry([add]), "1+1")
    parents = {span.name: span.parent for span in exporter.get_finished_spans()}
    outer_id = outer.get_span_context().span_id
    assert parents["execute_tool add"] is not None
    assert parents["execute_tool add"].span_id == outer_id
    assert parents["chat scripted"] is not None
    assert parents["chat scripted"].span_id == outer_id
    assert parents["invoke_agent outer"] is None


def test_mark_exception_uses_the_one_table_and_never_the_text() -> None:
    exporter = span_exporter()
    with invoke_agent_span("agent", task_id="t-1", context_id="ctx-1") as span:
        mark_exception(span, RuntimeError(f"db at postgres://u:{SENTINEL}@10.0.0.5/x"))
    (ended,) = exporter.get_finished_spans()
    assert dict(ended.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "agent",
        "gen_ai.conversation.id": "ctx-1",
        "llamon.task.id": "t-1",
        "error.type": "runtime_error",
        "llamon.error_code": "INTERNAL_ERROR",
        "llamon.stage": "service",
    }
    assert (ended.status.status_code, ended.status.description) == (
        StatusCode.ERROR,
        "runtime_error",
    )


def test_a_tracer_provider_is_set_exactly_while_the_api_holds_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    assert not tracer_provider_set()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", TracerProvider())
    assert tracer_provider_set()
    monkeypatch.delattr(trace, "_TRACER_PROVIDER")  # an API without that global: asked
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    assert not tracer_provider_set()
    monkeypatch.setattr(trace, "get_tracer_provider", TracerProvider)
    assert tracer_provider_set()
