"""Reading a run's events: a2a-sdk's ``EventConsumer.consume_all``, without a timer per event.

a2a-sdk's consumer waits for every event with ``asyncio.wait_for(queue.dequeue_event(),
0.5)`` so that it can look, twice a second, whether the agent's task failed
(``EventConsumer.agent_task_callback`` sets ``_exception``). On Python before 3.12 each
such wait starts an ``asyncio`` task and a timer, even when the event is already in the
queue -- the common case: an agent publishes its events faster than one request reads
them. ``run_events`` yields the same events with the same ends: an event already waiting
is taken at once, and only an empty queue is waited on as a2a-sdk waits (a timer, then
a look at the agent's failure). A queue still empty when reading starts (the agent's task
was just started) is looked at again after one turn of the event loop, in which an agent
that does not wait for anything publishes all its events.

The events, their order, where reading stops (after the run's final event, closing the
queue at once; or at a closed, empty queue), and what is raised (the agent task's
exception) are a2a-sdk's. While a tracer provider is set, ``read_events`` reads through
a2a-sdk's own (traced) ``consume_all``, so a trace shows its span as before.

``watch_agent`` is the other half of a2a-sdk's consumer: the callback that notes the
agent task's exception, without the span a2a-sdk starts around it while no tracer
provider is set (a span that records nothing then, at the cost of a few dozen
microseconds per run).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.events import Event, EventConsumer
from a2a.types import Message, Task, TaskState, TaskStatusUpdateEvent
from pydantic import ValidationError

from llamon_agent.core.telemetry import tracer_provider_set

__all__ = ["ends_reading", "read_events", "run_events", "watch_agent"]

logger = logging.getLogger("llamon_agent.a2a")

_FINAL_TASK_STATES = frozenset(
    {
        TaskState.completed,
        TaskState.canceled,
        TaskState.failed,
        TaskState.rejected,
        TaskState.unknown,
        TaskState.input_required,
    }
)
"""A ``Task`` event in one of these ends the reading (a2a-sdk's list, as it is)."""


def ends_reading(event: Event) -> bool:
    """Whether ``event`` is the last one a request reads of its run (a2a-sdk's rule)."""
    if isinstance(event, TaskStatusUpdateEvent):
        return event.final
    if isinstance(event, Message):
        return True
    return isinstance(event, Task) and event.status.state in _FINAL_TASK_STATES


async def run_events(consumer: EventConsumer) -> AsyncGenerator[Event]:
    """The events of ``consumer``'s queue, as ``consumer.consume_all()`` yields them.

    Raises the exception of the agent's task once ``consumer`` holds one (before the next
    event is read), as a2a-sdk's consumer does.
    """
    queue = consumer.queue
    if queue.queue.empty():  # the agent's task was just started: let it publish first
        await asyncio.sleep(0)
    while True:
        if consumer._exception is not None:
            raise consumer._exception
        try:
            if queue.queue.empty():  # wait as a2a-sdk does: a timer to look again
                event = await asyncio.wait_for(queue.dequeue_event(), consumer._timeout)
            else:
                event = await queue.dequeue_event(no_wait=True)
            queue.task_done()
            if ends_reading(event):
                await queue.close(True)
                yield event
                return
            yield event
        except TimeoutError:
            continue  # look at the agent's task again
        except asyncio.QueueEmpty:
            if queue.is_closed():
                return
        except ValidationError:
            logger.exception("an event of the run could not be read")
            continue
        except Exception as exc:  # a2a-sdk's consumer: raised at the next turn
            logger.exception("reading the run's events stopped")
            consumer._exception = exc
            continue


def read_events(consumer: EventConsumer) -> AsyncGenerator[Event]:
    """The run's events: ``run_events``, or -- while a tracer provider is set -- a2a-sdk's
    ``consume_all`` with its span."""
    if tracer_provider_set():
        return consumer.consume_all()
    return run_events(consumer)


def watch_agent(consumer: EventConsumer, producer: asyncio.Task[Any]) -> None:
    """Note ``producer``'s exception in ``consumer`` when it ends, as a2a-sdk's
    ``consumer.agent_task_callback`` (which a2a-sdk added to ``producer``) does; while no
    tracer provider is set, that callback is swapped for the same one without its span."""
    if tracer_provider_set() or producer.done():
        return
    if producer.remove_done_callback(consumer.agent_task_callback):
        producer.add_done_callback(functools.partial(_agent_ended, consumer))


def _agent_ended(consumer: EventConsumer, producer: asyncio.Task[Any]) -> None:
    """a2a-sdk's ``EventConsumer.agent_task_callback``, as it is."""
    if not producer.cancelled() and producer.done():
        consumer._exception = producer.exception()
