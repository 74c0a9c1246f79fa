"""a2a-sdk's per-call spans: started while a tracer provider is set, skipped without one --
on a served send (a real server, a2a-sdk's client) and on a class of a2a-sdk's own shape."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import TaskState
from a2a.utils.telemetry import trace_class
from opentelemetry import trace

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.sdk_spans import spans_only_when_traced
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import a2a_client, make_card, running_server, send, user_message
from tests._support.otel import span_exporter

SERVER_CLASSES = (
    "DefaultRequestHandler.",
    "JSONRPCHandler.",
    "EventQueue.",
    "InMemoryQueueManager.",
)
"""The a2a-sdk classes llamon's server derives from: their spans are the ones skipped."""


class StartedSpans:
    """Records the name of every span a tracer starts (and starts it as before)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        get_tracer = trace.get_tracer

        def recording_tracer(*args: Any, **kwargs: Any) -> trace.Tracer:
            tracer = get_tracer(*args, **kwargs)
            if getattr(tracer, "_recorded_by", None) is self:
                return tracer  # a provider may hand out the same tracer again
            tracer._recorded_by = self  # type: ignore[attr-defined]
            start = tracer.start_as_current_span

            def start_as_current_span(name: str, *more: Any, **options: Any) -> Any:
                self.names.append(name)
                return start(name, *more, **options)

            tracer.start_as_current_span = start_as_current_span  # type: ignore[method-assign]
            return tracer

        monkeypatch.setattr(trace, "get_tracer", recording_tracer)

    def of_server_classes(self) -> list[str]:
        return [name for name in self.names if any(cls in name for cls in SERVER_CLASSES)]


@pytest.fixture
def no_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)


async def echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"


async def _send_twice() -> list[tuple[TaskState, str]]:
    answers = []
    async with (
        running_server(create_app(echo, make_card())) as url,
        a2a_client(url) as client,
    ):
        for text in ("one", "two"):
            task = await send(client, user_message(text))
            assert task.artifacts is not None
            part = task.artifacts[0].parts[0].root
            answers.append((task.status.state, getattr(part, "text", "")))
    return answers


async def test_without_a_tracer_provider_a_send_starts_none_of_a2a_sdks_server_spans(
    no_provider: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = StartedSpans(monkeypatch)
    answers = await _send_twice()
    assert answers == [(TaskState.completed, "echo one"), (TaskState.completed, "echo two")]
    assert started.of_server_classes() == []


async def test_with_a_tracer_provider_a_send_records_a2a_sdks_server_spans() -> None:
    exporter = span_exporter()
    answers = await _send_twice()
    assert answers == [(TaskState.completed, "echo one"), (TaskState.completed, "echo two")]
    names = {span.name for span in exporter.get_finished_spans()}
    for expected in (
        "a2a.server.request_handlers.jsonrpc_handler.JSONRPCHandler.on_message_send",
        "a2a.server.request_handlers.default_request_handler.DefaultRequestHandler.on_message_send",
        "a2a.server.events.event_queue.EventQueue.enqueue_event",
        "a2a.server.events.event_queue.EventQueue.dequeue_event",
    ):
        assert expected in names


@trace_class()
class Traced:
    """A class traced as a2a-sdk traces its own."""

    async def fetch(self, value: int) -> int:
        return value + 1

    def name(self) -> str:
        return "traced"

    def kept(self) -> str:
        return "base"


@spans_only_when_traced
class Checked(Traced):
    """The shape llamon uses: a checked class of a2a-sdk's, subclassed."""


class Own(Checked):
    def kept(self) -> str:
        return f"own, then {super().kept()}"


async def _called(own: Own) -> tuple[int, str, str]:
    return await own.fetch(1), own.name(), own.kept()


async def test_a_checked_class_starts_the_span_only_while_a_provider_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exporter = span_exporter()
    started = StartedSpans(monkeypatch)
    assert await _called(Own()) == (2, "traced", "own, then base")
    traced_names = [name for name in started.names if ".Traced." in name]
    assert traced_names == [f"{__name__}.Traced.{m}" for m in ("fetch", "name", "kept")]
    assert {s.name for s in exporter.get_finished_spans()} >= set(traced_names)

    started.names.clear()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    assert await _called(Own()) == (2, "traced", "own, then base")
    assert started.names == []


def test_only_inherited_traced_methods_are_replaced() -> None:
    @spans_only_when_traced
    class Defines(Traced):
        def kept(self) -> str:
            return "its own"

    assert Defines.__dict__["kept"].__qualname__.endswith("Defines.kept")  # left as it is
    assert Checked.fetch is not Traced.fetch
    assert Checked.fetch.__wrapped__ is Traced.fetch.__wrapped__  # type: ignore[attr-defined]
    assert Checked.name.__name__ == "name"

    @spans_only_when_traced
    class Again(Own):
        """A subclass of a checked class: nothing left to check."""

    assert "fetch" not in Again.__dict__
