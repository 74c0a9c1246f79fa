"""``GET /tasks/{id}/events``: one task's runner events as Server-Sent Events.

What a caller sees: with the agent's credentials (the same ``AuthConfig`` as every A2A
request; without them the usual 401), for a task it owns, a ``text/event-stream`` of
the task's ``RunnerEvent``\\s -- first those the server still keeps (the last
``PER_TASK`` of each of the last ``TASKS`` tasks), then the live ones -- one SSE event
each (``event:`` the type, ``data:`` ``json.dumps(asdict(event))``), ending after the
event that ends the task's turn (``task.completed``, ``task.failed``,
``task.canceled``, ``task.rejected``, ``task.input-required``, ``task.auth-required``).
Another caller's task answers exactly as an unknown one: ``404 {"error":
"task_not_found"}``. A task that ended before its events were kept (another replica,
a restart) gives what is kept and ends at once. A listener that reads too slowly to
keep up (``LISTENER_QUEUE`` events behind) is ended; the run never waits for it.

The route exists when ``create_app(..., events=bus)`` is given a bus; its
``TaskEventLog`` is an inline subscriber of that bus (``bus.subscribe_inline``: O(1),
never blocking), ``app.state.llamon_task_events``.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from typing import Final

from a2a.server.apps.jsonrpc.jsonrpc_app import DefaultCallContextBuilder
from a2a.server.tasks import TaskStore
from a2a.types import TaskState
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from llamon_agent.core.events import RunnerEvent, event_to_json

__all__ = [
    "END_TYPES",
    "EVENTS_PATH",
    "LISTENER_QUEUE",
    "PER_TASK",
    "TASKS",
    "TaskEventLog",
    "task_events_route",
]

EVENTS_PATH: Final = "/tasks/{task_id}/events"
PER_TASK: Final = 256
"""Events kept per task for a late listener (the oldest go first)."""
TASKS: Final = 256
"""Tasks whose events are kept (the least recently active go first)."""
LISTENER_QUEUE: Final = 1024
"""Live events one SSE listener may be behind before it is ended."""
ENDED_GRACE: Final = 0.5
"""Seconds a listener of a task stored as ended waits for its last events to arrive."""
KEEPALIVE: Final = 15.0
"""Seconds between SSE comments on a quiet stream (proxies keep it open)."""

END_TYPES: Final = frozenset(
    f"task.{state.value}"
    for state in (
        TaskState.completed,
        TaskState.failed,
        TaskState.canceled,
        TaskState.rejected,
        TaskState.input_required,
        TaskState.auth_required,
    )
)
"""Event types after which a task's event stream ends (its turn is over)."""

_FINAL_STATES: Final = frozenset(
    (
        TaskState.completed,
        TaskState.failed,
        TaskState.canceled,
        TaskState.rejected,
        TaskState.input_required,
        TaskState.auth_required,
    )
)
_ENDED: Final = None  # what a listener's queue receives when it must stop


class _TaskEvents:
    """One task's kept events, and its live listeners (a set once someone listens)."""

    __slots__ = ("events", "listeners")

    def __init__(self, per_task: int) -> None:
        self.events: deque[RunnerEvent] = deque(maxlen=per_task)
        self.listeners: set[asyncio.Queue[RunnerEvent | None]] | None = None


class TaskEventLog:
    """The recent events of recent tasks, and their live listeners (a bus subscriber)."""

    def __init__(self, *, per_task: int = PER_TASK, tasks: int = TASKS) -> None:
        self.per_task = per_task
        self.tasks = tasks
        self._tasks: OrderedDict[str, _TaskEvents] = OrderedDict()

    def __call__(self, event: RunnerEvent) -> None:
        """Keep ``event`` under its task and hand it to the task's listeners."""
        task_id = event.task_id
        if not task_id:
            return
        entry = self._tasks.get(task_id)
        if entry is None:
            entry = self._tasks[task_id] = _TaskEvents(self.per_task)
            if len(self._tasks) > self.tasks:
                _, old = self._tasks.popitem(last=False)
                for queue in old.listeners or ():
                    _stop(queue)
        else:
            self._tasks.move_to_end(task_id)
        entry.events.append(event)
        listeners = entry.listeners
        if listeners:
            for queue in tuple(listeners):
                try:
                    queue.put_nowait(event)
                except asyncio.QueueFull:
                    listeners.discard(queue)
                    _stop(queue)

    def kept(self, task_id: str) -> tuple[RunnerEvent, ...]:
        """The events kept for ``task_id``, oldest first."""
        entry = self._tasks.get(task_id)
        return tuple(entry.events) if entry is not None else ()

    async def follow(self, task_id: str, *, ended: bool = False) -> AsyncIterator[RunnerEvent]:
        """The kept events of ``task_id``, then live ones, up to the one that ends its
        turn. ``ended``: the task's turn is already over (its stored state is final), so
        nothing more is waited for after the kept events."""
        entry = self._tasks.get(task_id)
        if entry is None:
            entry = self._tasks[task_id] = _TaskEvents(self.per_task)
        queue: asyncio.Queue[RunnerEvent | None] = asyncio.Queue(maxsize=LISTENER_QUEUE)
        kept = tuple(entry.events)  # no await between this and registering: no gap
        if entry.listeners is None:
            entry.listeners = set()
        entry.listeners.add(queue)
        try:
            for event in kept:
                yield event
            if kept and kept[-1].type in END_TYPES:
                return
            # a task stored as ended: its last events may still be on their way, briefly
            wait = ENDED_GRACE if ended else None
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), wait)
                except TimeoutError:
                    return
                if item is None:
                    return
                yield item
                if item.type in END_TYPES:
                    return
        finally:
            entry.listeners.discard(queue)


def _stop(queue: asyncio.Queue[RunnerEvent | None]) -> None:
    while True:
        try:
            queue.put_nowait(_ENDED)
            return
        except asyncio.QueueFull:
            queue.get_nowait()  # make room for the stop: the listener is ended anyway


def _sse(event: RunnerEvent) -> bytes:
    return f"event: {event.type}\ndata: {event_to_json(event)}\n\n".encode()


async def _with_keepalive(events: AsyncIterator[RunnerEvent]) -> AsyncIterator[bytes]:
    iterator = aiter(events)
    next_event: asyncio.Task[RunnerEvent] | None = None
    try:
        while True:
            if next_event is None:
                next_event = asyncio.ensure_future(anext(iterator))
            done, _ = await asyncio.wait({next_event}, timeout=KEEPALIVE)
            if not done:
                yield b": keepalive\n\n"
                continue
            try:
                event = next_event.result()
            except StopAsyncIteration:
                return
            next_event = None
            yield _sse(event)
    finally:
        if next_event is not None and not next_event.done():
            next_event.cancel()
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()


def task_events_route(log: TaskEventLog, task_store: TaskStore) -> Route:
    """The ``GET /tasks/{task_id}/events`` route over ``log``; ownership read through
    ``task_store`` (the request handler's ``OwnedTaskStore``)."""
    contexts = DefaultCallContextBuilder()

    async def task_events(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        task = await task_store.get(task_id, contexts.build(request))
        if task is None:  # unknown, or another caller's: the same answer
            return JSONResponse({"error": "task_not_found"}, status_code=404)
        ended = task.status.state in _FINAL_STATES
        return StreamingResponse(
            _with_keepalive(log.follow(task_id, ended=ended)),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    return Route(EVENTS_PATH, task_events, methods=["GET"])
