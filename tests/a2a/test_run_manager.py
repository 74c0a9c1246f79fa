"""A run's task manager stores each event as a2a-sdk's ``TaskManager`` does."""

from __future__ import annotations

import pytest
from a2a.server.events import Event
from a2a.server.tasks import InMemoryTaskStore, TaskManager
from a2a.types import (
    Artifact,
    InvalidParamsError,
    Message,
    MessageSendParams,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    TextPart,
)
from a2a.utils.errors import ServerError
from opentelemetry import trace

from llamon_agent.a2a.handler import _RunManager
from llamon_agent.a2a.task_locks import TaskClaims
from tests._support.otel import spans_of_a_provider_of_its_own


@pytest.fixture(autouse=True)
def _untraced(monkeypatch: pytest.MonkeyPatch) -> None:
    """No tracer provider (the run's manager appends artifacts itself), unless a test sets one."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)


def _message() -> Message:
    return Message(role=Role.user, parts=[Part(root=TextPart(text="hi"))], message_id="m-1")


def _artifact(artifact_id: str, text: str, *, append: bool, task_id: str = "t-1") -> Event:
    artifact = Artifact(artifact_id=artifact_id, parts=[Part(root=TextPart(text=text))])
    return TaskArtifactUpdateEvent(
        task_id=task_id, context_id="c-1", artifact=artifact, append=append
    )


def _run() -> list[Event]:
    return [
        Task(id="t-1", context_id="c-1", status=TaskStatus(state=TaskState.submitted)),
        _artifact("a-1", "one", append=False),
        _artifact("a-1", " two", append=True),
        _artifact("a-2", "other", append=False),
        _artifact("a-2", "replaced", append=False),
        TaskStatusUpdateEvent(
            task_id="t-1",
            context_id="c-1",
            status=TaskStatus(state=TaskState.completed),
            final=True,
        ),
    ]


def _managers() -> tuple[_RunManager, TaskManager]:
    params = MessageSendParams(message=_message())
    mine = _RunManager(TaskClaims(), InMemoryTaskStore(), params, None)
    sdks = TaskManager(
        task_id=None,
        context_id=None,
        task_store=InMemoryTaskStore(),
        initial_message=params.message,
        context=None,
    )
    return mine, sdks


async def _stored(manager: TaskManager) -> Task | None:
    for event in _run():
        await manager.process(event)
    return await manager.task_store.get("t-1")


async def test_a_runs_artifacts_are_stored_as_a2a_sdk_stores_them() -> None:
    mine, sdks = _managers()
    got = await _stored(mine)
    expected = await _stored(sdks)
    assert got is not None
    assert got == expected
    assert [a.artifact_id for a in got.artifacts or ()] == ["a-1", "a-2"]
    artifacts = got.artifacts or []
    texts = [[p.root.text for p in a.parts if isinstance(p.root, TextPart)] for a in artifacts]
    assert texts == [["one", " two"], ["replaced"]]


async def test_an_artifact_of_another_task_is_refused_as_a2a_sdk_refuses_it() -> None:
    mine, sdks = _managers()
    errors: list[InvalidParamsError] = []
    for manager in (mine, sdks):
        await manager.process(_run()[0])
        with pytest.raises(ServerError) as raised:
            await manager.process(_artifact("a-1", "x", append=False, task_id="t-2"))
        assert isinstance(raised.value.error, InvalidParamsError)
        errors.append(raised.value.error)
    assert errors[0].message == errors[1].message
    assert "t-2" in (errors[0].message or "")


async def test_only_with_a_tracer_provider_the_append_has_a2a_sdks_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exporter = spans_of_a_provider_of_its_own(monkeypatch)
    traced, _ = _managers()
    assert await _stored(traced) is not None
    names = [span.name for span in exporter.get_finished_spans()]
    assert names.count("a2a.utils.helpers.append_artifact_to_task") == 4

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    untraced, sdks = _managers()
    assert await _stored(untraced) == await _stored(sdks)
