"""A plain a2a-sdk agent (not llamon), served by a2a-sdk's own handler, for tests that need
an A2A server llamon did not write.

``PlainAgent(respond)`` answers each message with a task: submitted, working, then an
``answer`` artifact with the text ``await respond(text)`` gives and completed -- or, when
``respond`` gives ``None``, ``failed`` with no status message (no error data, as any other
A2A server may fail). ``runs`` counts the messages it ran. ``plain_app(executor, card=)``
is a2a-sdk's ``DefaultRequestHandler`` over an ``InMemoryTaskStore`` and its Starlette app.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCard, Part, Task, TaskState, TaskStatus, TextPart
from starlette.applications import Starlette

from tests._support.a2a_server import make_card

__all__ = ["PlainAgent", "plain_app"]

Respond = Callable[[str], Awaitable[str | None]]


async def _echo(text: str) -> str:
    return f"plain {text}"


class PlainAgent(AgentExecutor):
    """See the module docstring; the default answers ``plain <text>``."""

    def __init__(self, respond: Respond = _echo) -> None:
        self.respond = respond
        self.runs = 0

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        self.runs += 1
        task = Task(
            id=str(context.task_id),
            context_id=str(context.context_id),
            status=TaskStatus(state=TaskState.submitted),
            history=[context.message],
        )
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        text = await self.respond(context.get_user_input())
        if text is None:
            await updater.failed()
            return
        await updater.add_artifact([Part(root=TextPart(text=text))], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def plain_app(executor: AgentExecutor, *, card: AgentCard | None = None) -> Starlette:
    """a2a-sdk's own server app for ``executor`` (card: ``make_card()`` by default)."""
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore())
    return A2AStarletteApplication(agent_card=card or make_card(), http_handler=handler).build()
