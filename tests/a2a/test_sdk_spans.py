"""a2a-sdk's server spans: started while a tracer provider is set, skipped without one, on
a served send (a real server, a2a-sdk's client); a failure in them is its reason, never
its text."""

from __future__ import annotations

import httpx
import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Task, TaskState
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import a2a_client, make_card, running_server, send, user_message
from tests._support.otel import StartedSpans, span_exporter, span_texts, spans_named

SERVER_CLASSES = (
    "DefaultRequestHandler.",
    "JSONRPCHandler.",
    "EventQueue.",
    "InMemoryQueueManager.",
)
"""The a2a-sdk classes llamon's server derives from: their spans are the ones skipped."""


def of_server_classes(names: list[str]) -> list[str]:
    """The span names of ``SERVER_CLASSES``' methods."""
    return [name for name in names if any(cls in name for cls in SERVER_CLASSES)]


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
    assert of_server_classes(started.names) == []


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


BACKEND = "connect to db-primary.prod.internal:5432 (10.2.3.4) refused"


class Unreachable(InMemoryTaskStore):
    """A task store whose reads fail, naming its backend, while ``down``."""

    down = False

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        if self.down:
            raise ConnectionRefusedError(BACKEND)
        return await super().get(task_id, context)


async def test_a2a_sdks_spans_record_a_failure_by_its_reason_never_its_text() -> None:
    """With a provider set, a task store that fails under ``tasks/get`` is in a2a-sdk's
    handler span as the failure's reason (status ERROR, ``error.type``), never as the
    exception's text or traceback, which name the backend."""
    exporter = span_exporter()
    store = Unreachable()
    app = create_app(echo, make_card(), task_store=store)
    async with running_server(app) as url, a2a_client(url) as client:
        task = await send(client, user_message("one"))
        store.down = True
        body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task.id}}
        async with httpx.AsyncClient(timeout=10) as http:
            refused = (await http.post(url, json=body)).json()
            store.down = False
            answered = (await http.post(url, json=body)).json()
    assert refused["error"]["data"]["errorReason"] == "database_unavailable"
    assert answered["result"]["status"]["state"] == "completed"  # the next request
    texts = list(span_texts(exporter))
    for location in ("db-primary", "prod.internal", "5432", "10.2.3.4", "refused"):
        assert not [text for text in texts if location in text], location
    name = "a2a.server.request_handlers.default_request_handler.DefaultRequestHandler.on_get_task"
    failed, succeeded = spans_named(exporter, name)
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.status.description == "database_unavailable"
    assert (failed.attributes or {}).get("error.type") == "database_unavailable"
    assert failed.events == ()  # no exception event: its text and traceback stay out
    assert succeeded.status.status_code == StatusCode.OK
