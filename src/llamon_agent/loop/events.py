"""Transport-neutral events of a loop run (runner events).

``run_loop(..., on_event=handler)`` calls ``handler(event)`` (sync or async) as the run
goes. Forward ``dataclasses.asdict(event)`` to SSE, logs or Quality Lab results; every
field is JSON-ready and already passed the security boundary. Event types:

==================  ==========  ==================================================
type                stage       when
==================  ==========  ==================================================
``run.started``     tool_loop   before the first model call
``model.completed`` model_call  a model call answered (``tool_call_count``, retries)
``step.started``    tool_loop   a tool call is about to be dispatched
``step.completed``  tool_loop   the tool returned a successful result
``step.failed``     (record's)  the call failed; ``trace_metadata.failure_reason``
``run.completed``   tool_loop   the model gave its final answer
``run.failed``      (record's)  a terminal failure or an escalation ended the run
==================  ==========  ==================================================

``step_id`` is the tool call's id. Consumers read the fields they know and keep the rest
when forwarding; new fields and event types are additive. A handler that raises is
logged and ignored: observing a run never changes it.

``LoopEvent`` is ``llamon_agent.core.events.RunnerEvent``, the event every runtime emits.
Inside an A2A task (or any ``event_scope``) the run's events also go to that scope's
``EventBus``, stamped with the task's ids.

An ``EventSink`` is where one run's events go: the runner makes one per run and hands it
to its ``ToolDispatcher``, which emits the ``step.*`` events into it.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable
from typing import TypeAlias

from llamon_agent.core.events import (
    EventBus,
    EventCallback,
    RunnerEvent,
    current_scope,
    failure_metadata,
)

__all__ = ["EventHandler", "EventSink", "LoopEvent", "failure_metadata"]

logger = logging.getLogger("llamon_agent.loop")

LoopEvent: TypeAlias = RunnerEvent
"""One thing that happened in a run (see the module docstring for the types)."""

EventHandler: TypeAlias = EventCallback
"""Receives each ``LoopEvent``; may be a plain or an ``async`` function."""


class EventSink:
    """Where one run's ``LoopEvent``\\s go: ``emit`` stamps them with ``run_id``.

    ``handler`` may be a plain or an ``async`` function, called in line; ``bus`` (default:
    the bus of the ``event_scope`` around the sink's creation) gets each event queued,
    with the scope's task and context ids. With neither, events are dropped (a hot path
    tests ``observed`` and skips building them). A handler that raises is logged
    (warning, the exception's type only) and ignored: ``emit`` never raises (but for
    cancellation).
    """

    __slots__ = ("bus", "context_id", "handler", "run_id", "task_id")

    def __init__(
        self,
        handler: EventHandler | None = None,
        *,
        run_id: str = "",
        bus: EventBus | None = None,
    ) -> None:
        self.handler = handler
        self.run_id = run_id
        scope = current_scope()
        self.bus = bus if bus is not None else (scope.bus if scope is not None else None)
        self.task_id = scope.task_id if scope is not None else None
        self.context_id = scope.context_id if scope is not None else None

    @property
    def observed(self) -> bool:
        """Whether an event emitted now reaches anyone (a handler, or a bus subscriber)."""
        return self.handler is not None or (self.bus is not None and self.bus.active)

    def post(
        self,
        type_: str,
        stage: str,
        *,
        round_number: int,
        tool: str | None = None,
        step_id: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> Awaitable[None] | None:
        """``emit`` without a coroutine when there is no handler: the event is built and
        published at once; what is returned (the handler's call) must be awaited."""
        bus = self.bus
        live = bus is not None and bus.active
        handler = self.handler
        if handler is None and not live:
            return None
        event = RunnerEvent(
            type_,
            stage,
            self.run_id,
            round_number,
            tool,
            step_id,
            metadata,
            self.task_id,
            self.context_id,
        )
        if live and bus is not None:
            bus.publish(event)
        return None if handler is None else self._handle(handler, event)

    async def emit(
        self,
        type_: str,
        stage: str,
        *,
        round_number: int,
        tool: str | None = None,
        step_id: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> None:
        """Send one event of this run to the handler (see the module docstring)."""
        pending = self.post(
            type_, stage, round_number=round_number, tool=tool, step_id=step_id, metadata=metadata
        )
        if pending is not None:
            await pending

    @staticmethod
    async def _handle(handler: EventHandler, event: RunnerEvent) -> None:
        try:
            maybe = handler(event)
            if inspect.isawaitable(maybe):
                await maybe
        except Exception as exc:
            logger.warning(
                "on_event handler raised %s on %s; ignored", type(exc).__name__, event.type
            )
