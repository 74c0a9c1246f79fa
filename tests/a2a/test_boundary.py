"""The request handler's one translator: ``as_protocol_errors``.

Whatever a request raises leaves as a JSON-RPC error with ProtocolErrorData; the original
exception stays chained for the server log; cancellation and a client leaving a stream
pass through untouched. The wire answers themselves are pinned end to end
(``tests/e2e/a2a``); these tests pin the translator and that every handler method uses it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator

import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    InternalError,
    Task,
    TaskIdParams,
    TaskNotFoundError,
    TaskQueryParams,
)
from a2a.utils.errors import ServerError

from llamon_agent.a2a.executor import CustomAgentExecutor
from llamon_agent.a2a.handler import LlamonRequestHandler
from llamon_agent.a2a.protocol import as_protocol_errors, protocol_error, with_protocol_data
from llamon_agent.core.codes import ErrorCode


def test_an_unexpected_exception_leaves_as_a_classified_internal_error_chained() -> None:
    original = RuntimeError("password=hunter2 at /srv/app.py")
    with pytest.raises(ServerError) as caught, as_protocol_errors():
        raise original
    error = caught.value.error
    assert isinstance(error, InternalError)
    assert isinstance(error.data, dict)
    assert error.data["errorCode"] == "INTERNAL_ERROR"
    assert "hunter2" not in str(error.model_dump())
    assert caught.value.__cause__ is original


def test_an_sdk_error_gets_protocol_data_and_keeps_its_origin() -> None:
    original = ServerError(error=TaskNotFoundError())
    with pytest.raises(ServerError) as caught, as_protocol_errors():
        raise original
    error = caught.value.error
    assert isinstance(error, TaskNotFoundError)
    assert isinstance(error.data, dict)
    assert error.data["errorCode"] == "NOT_FOUND"
    assert caught.value.__cause__ is original


def test_a_complete_error_leaves_as_itself_without_chaining_to_itself() -> None:
    complete = with_protocol_data(
        protocol_error(InternalError, ErrorCode.INVALID_INPUT, "bad", "Bad input.")
    )
    with pytest.raises(ServerError) as caught, as_protocol_errors():
        raise complete
    assert caught.value is complete
    assert caught.value.__cause__ is None


@pytest.mark.parametrize("raised", [asyncio.CancelledError(), KeyboardInterrupt()])
def test_a_base_exception_passes_untouched(raised: BaseException) -> None:
    with pytest.raises(type(raised)) as caught, as_protocol_errors():
        raise raised
    assert caught.value is raised


async def test_a_generator_body_is_translated_after_its_events() -> None:
    async def events() -> AsyncIterator[int]:
        with as_protocol_errors():
            yield 1
            raise RuntimeError("store down")

    stream = events()
    assert await anext(stream) == 1
    with pytest.raises(ServerError) as caught:
        await anext(stream)
    assert isinstance(caught.value.error, InternalError)
    assert isinstance(caught.value.__cause__, RuntimeError)


async def test_a_client_leaving_a_stream_closes_it_quietly() -> None:
    closed = []

    async def events() -> AsyncGenerator[int]:
        try:
            with as_protocol_errors():
                yield 1
                yield 2
        finally:
            closed.append(True)

    stream = events()
    assert await anext(stream) == 1
    await stream.aclose()  # GeneratorExit passes through the translator
    assert closed == [True]


class _FailingStore(InMemoryTaskStore):
    """A task store whose reads fail with a message that must not reach the caller."""

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        raise RuntimeError("connection to db.internal:5432 refused for user admin")


def _handler(store: InMemoryTaskStore) -> LlamonRequestHandler:
    async def agent(ctx: object) -> str:
        return "ok"

    return LlamonRequestHandler(CustomAgentExecutor(agent), store)


async def test_tasks_get_translates_a_failed_store_and_keeps_the_cause() -> None:
    handler = _handler(_FailingStore())
    with pytest.raises(ServerError) as caught:
        await handler.on_get_task(TaskQueryParams(id="t1"))
    error = caught.value.error
    assert isinstance(error, InternalError)
    assert "db.internal" not in str(error.model_dump())
    assert isinstance(caught.value.__cause__, RuntimeError)


async def test_tasks_resubscribe_answers_an_unknown_task_with_protocol_data() -> None:
    handler = _handler(InMemoryTaskStore())
    with pytest.raises(ServerError) as caught:
        async for _ in handler.on_resubscribe_to_task(TaskIdParams(id="nope")):
            pass
    error = caught.value.error
    assert isinstance(error, TaskNotFoundError)
    assert isinstance(error.data, dict)
    assert error.data["errorCode"] == "NOT_FOUND"
