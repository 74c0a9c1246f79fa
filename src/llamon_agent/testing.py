"""Helpers for testing your agents' answers without a server.

``stub_executor_run`` runs ``CustomAgentExecutor`` once, in process, and returns the
events a client would receive, in order::

    events = await stub_executor_run(agent_dispatch_raises=ComponentInvokeError("MCP down"))
    failed = next(
        e for e in reversed(events)
        if isinstance(e, TaskStatusUpdateEvent) and e.status.state.value == "failed"
    )

Re-export it from your ``tests/conftest.py`` to import it from there in your tests.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.events.event_consumer import QueueClosed
from a2a.types import DataPart, Message, MessageSendParams, Part, Role, Task, TextPart

from llamon_agent.a2a.agent import AgentContext, AgentOutput
from llamon_agent.a2a.executor import CustomAgentExecutor

__all__ = ["stub_executor_run"]


async def stub_executor_run(
    *,
    agent: object | None = None,
    agent_dispatch_raises: BaseException | None = None,
    agent_returns: AgentOutput = "ok",
    text: str = "hello",
    data: dict[str, Any] | None = None,
    streaming: bool = False,
    task: Task | None = None,
) -> list[Event]:
    """Run the executor once and return every event it published, in order.

    Without ``agent``, a stub agent raises ``agent_dispatch_raises`` (when given) or
    returns ``agent_returns``. ``streaming=True`` runs the ``message/stream`` path;
    ``task`` continues an existing (e.g. input-required) task.
    """
    if agent is None:

        async def stub(ctx: AgentContext) -> AgentOutput:
            if agent_dispatch_raises is not None:
                raise agent_dispatch_raises
            return agent_returns

        agent = stub
    parts = [Part(root=TextPart(text=text))]
    if data is not None:
        parts.append(Part(root=DataPart(data=data)))
    message = Message(
        role=Role.user,
        parts=parts,
        message_id=str(uuid.uuid4()),
        task_id=task.id if task else None,
        context_id=task.context_id if task else None,
    )
    method = "message/stream" if streaming else "message/send"
    context = RequestContext(
        request=MessageSendParams(message=message),
        task_id=task.id if task else None,
        context_id=task.context_id if task else None,
        task=task,
        call_context=ServerCallContext(state={"method": method}),
    )
    queue = EventQueue()
    await CustomAgentExecutor(agent).execute(context, queue)
    events: list[Event] = []
    while True:
        try:
            events.append(await queue.dequeue_event(no_wait=True))
        except (asyncio.QueueEmpty, QueueClosed):
            break
        queue.task_done()
    await queue.close(immediate=True)
    return events
