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

An ``EventSink`` is where one run's events go: the runner makes one per run and hands it
to its ``ToolDispatcher``, which emits the ``step.*`` events into it.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from llamon_agent.core.failures import FailureRecord

__all__ = ["EventHandler", "EventSink", "LoopEvent", "failure_metadata"]

logger = logging.getLogger("llamon_agent.loop")


@dataclass(frozen=True, slots=True)
class LoopEvent:
    """One thing that happened in a run (see the module docstring for the types)."""

    type: str
    stage: str
    run_id: str
    round: int = 0
    tool: str | None = None
    step_id: str | None = None
    trace_metadata: Mapping[str, object] = field(default_factory=dict)


EventHandler: TypeAlias = Callable[[LoopEvent], Awaitable[None] | None]
"""Receives each ``LoopEvent``; may be a plain or an ``async`` function."""


def failure_metadata(record: FailureRecord) -> dict[str, object]:
    """``trace_metadata`` for a failure: ``failure_reason``, code, retryable, then evidence."""
    return {
        "failure_reason": record.reason,
        "error_code": record.error_code.value,
        "retryable": record.retryable,
        "message": record.message,
        **record.evidence,
    }


class EventSink:
    """Where one run's ``LoopEvent``\\s go: ``emit`` stamps them with ``run_id``.

    ``handler`` may be a plain or an ``async`` function, or None: events are dropped (a
    hot path tests ``handler is None`` and skips building them). A handler that raises
    is logged (warning, the exception's type only) and ignored: ``emit`` never raises
    (but for cancellation).
    """

    __slots__ = ("handler", "run_id")

    def __init__(self, handler: EventHandler | None = None, *, run_id: str = "") -> None:
        self.handler = handler
        self.run_id = run_id

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
        if self.handler is None:
            return
        event = LoopEvent(type_, stage, self.run_id, round_number, tool, step_id, metadata or {})
        try:
            maybe = self.handler(event)
            if inspect.isawaitable(maybe):
                await maybe
        except Exception as exc:
            logger.warning("on_event handler raised %s on %s; ignored", type(exc).__name__, type_)
