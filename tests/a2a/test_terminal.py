"""The executor's one terminal publisher: a run's end is claimed once and published once,
on its event queue or, when nobody reads that queue any more, in the task store.

The three ends that share it: the agent's own end, the guardrail's end (the task's
artifacts withheld) and shutdown (straight to the store).
"""

from __future__ import annotations

import asyncio
import uuid

from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    DataPart,
    InvalidParamsError,
    Message,
    MessageSendParams,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
)
from a2a.utils.errors import ServerError

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.executor import CustomAgentExecutor, RaisedProtocolErrors
from llamon_agent.exceptions import GuardrailBlockedError


def _context() -> RequestContext:
    message = Message(
        role=Role.user, parts=[Part(root=TextPart(text="x"))], message_id=str(uuid.uuid4())
    )
    return RequestContext(
        request=MessageSendParams(message=message),
        call_context=ServerCallContext(state={"method": "message/send"}),
    )


async def _drain(queue: EventQueue) -> list[Event]:
    events: list[Event] = []
    while True:
        try:
            events.append(await queue.dequeue_event(no_wait=True))
        except asyncio.QueueEmpty:
            return events


def _data(task: Task) -> dict[str, object]:
    assert task.status.message is not None
    return next(
        dict(p.root.data) for p in task.status.message.parts if isinstance(p.root, DataPart)
    )


async def _guardrail_agent(ctx: AgentContext) -> str:
    await ctx.add_artifact({"draft": "unsafe"}, "draft")
    raise GuardrailBlockedError("blocked")


async def test_the_guardrail_end_is_the_task_without_its_artifacts() -> None:
    queue = EventQueue()
    await CustomAgentExecutor(_guardrail_agent).execute(_context(), queue)
    last = (await _drain(queue))[-1]
    assert isinstance(last, Task)
    assert last.status.state == TaskState.failed
    assert last.artifacts is None
    assert _data(last)["errorCode"] == "GUARDRAIL_BLOCKED"


class _ClosingQueue(EventQueue):
    """A queue whose reader goes away as soon as the first artifact is published."""

    async def enqueue_event(self, event: Event) -> None:
        await super().enqueue_event(event)
        if not isinstance(event, Task | TaskStatusUpdateEvent):
            await self.close(immediate=True)


async def test_the_guardrail_end_reaches_the_store_when_nobody_reads_the_queue() -> None:
    store = InMemoryTaskStore()
    context = _context()
    await CustomAgentExecutor(_guardrail_agent, task_store=store).execute(context, _ClosingQueue())
    saved = await store.get(str(context.task_id))
    assert saved is not None
    assert saved.status.state == TaskState.failed
    assert _data(saved)["errorCode"] == "GUARDRAIL_BLOCKED"


async def test_shutdown_ends_a_running_task_in_the_store_and_the_run_publishes_no_more() -> None:
    store = InMemoryTaskStore()
    started, release = asyncio.Event(), asyncio.Event()

    async def agent(ctx: AgentContext) -> str:
        started.set()
        await release.wait()
        return "too late"

    executor = CustomAgentExecutor(agent, task_store=store)
    context, queue = _context(), EventQueue()
    run = asyncio.create_task(executor.execute(context, queue))
    await started.wait()
    assert await executor.shutdown() == [str(context.task_id)]
    release.set()
    await run
    saved = await store.get(str(context.task_id))
    assert saved is not None
    assert saved.status.state == TaskState.failed
    assert _data(saved)["errorReason"] == "worker_shutdown"
    finals = [e for e in await _drain(queue) if isinstance(e, TaskStatusUpdateEvent) and e.final]
    assert finals == []


async def test_shutdown_leaves_an_ended_run_alone() -> None:
    async def agent(ctx: AgentContext) -> str:
        return "ok"

    executor = CustomAgentExecutor(agent)
    queue = EventQueue()
    await executor.execute(_context(), queue)
    assert await executor.shutdown() == []
    last = (await _drain(queue))[-1]
    assert isinstance(last, TaskStatusUpdateEvent)
    assert last.status.state == TaskState.completed


def test_a_raised_protocol_error_is_taken_once() -> None:
    errors = RaisedProtocolErrors()
    error = ServerError(error=InvalidParamsError())
    errors.put("t1", error)
    assert errors.pop(None) is None
    assert errors.pop("t1") is error
    assert errors.pop("t1") is None


def test_errors_nobody_takes_are_bounded_oldest_first() -> None:
    # A non-blocking message/send never takes its error: the channel must not grow.
    errors = RaisedProtocolErrors(limit=3)
    raised = {f"t{i}": ServerError(error=InvalidParamsError()) for i in range(5)}
    for task_id, error in raised.items():
        errors.put(task_id, error)
    assert len(errors) == 3
    assert errors.pop("t0") is None
    assert errors.pop("t1") is None
    assert errors.pop("t4") is raised["t4"]
    errors.put("t2", raised["t2"])  # put again: now the newest
    errors.put("t5", raised["t0"])
    errors.put("t6", raised["t1"])
    assert errors.pop("t3") is None
    assert errors.pop("t2") is raised["t2"]


async def test_a_non_blocking_send_leaves_no_error_behind_past_the_limit() -> None:
    async def agent(ctx: AgentContext) -> str:
        raise ServerError(error=InvalidParamsError(message="no such order"))

    executor = CustomAgentExecutor(agent)
    executor.protocol_errors = RaisedProtocolErrors(limit=4)
    for _ in range(10):  # nobody takes these errors
        await executor.execute(_context(), EventQueue())
    assert len(executor.protocol_errors) == 4


async def test_the_executor_keeps_what_the_agent_raised_for_the_handler() -> None:
    async def agent(ctx: AgentContext) -> str:
        raise ServerError(error=InvalidParamsError(message="no such order"))

    executor = CustomAgentExecutor(agent)
    context = _context()
    await executor.execute(context, EventQueue())
    error = executor.protocol_errors.pop(str(context.task_id))
    assert error is not None
    assert isinstance(error.error, InvalidParamsError)
    assert executor.pop_protocol_error(str(context.task_id)) is None
