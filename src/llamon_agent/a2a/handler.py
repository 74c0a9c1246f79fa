"""The request handler: a2a-sdk's ``DefaultRequestHandler`` with llamon's two promises.

1. A request the agent cannot take is refused *before* a task exists
   (``CustomAgentExecutor._validate_request``).
2. Every JSON-RPC error a caller receives carries ``ProtocolErrorData`` in ``error.data``
   and a scrubbed message -- including a2a-sdk's own (task not found, not cancelable) and
   whatever else a request raises outside the agent (a task store that failed: classified
   by the one table, e.g. ``database_unavailable``; see ``protocol_error_for_exception``).
   A stream that hits one ends with that JSON-RPC error event instead of a cut connection.

A stream ends with a status-update: a ``Task`` the executor publishes to end a task
(the guardrail's replacement without artifacts, stored as such) reaches a stream as its
final ``status-update`` (``final: true``) instead -- a client already holds the task, and
a2a-sdk's client refuses a second ``Task`` in one stream. Every queue tapped for
``tasks/resubscribe`` gets its own copy of each event (``LlamonQueueManager``).

Tasks belong to their caller: a2a-sdk reads and writes tasks through ``OwnedTaskStore``,
so every method on another caller's task (or a ``message/send`` naming its task or
context) answers -32001 exactly as for a task that does not exist, and push config
answers mask the token and URL credentials (``llamon_agent.a2a.ownership``).

And two repairs:

* A failure is answered as soon as it happens. a2a-sdk notices an executor that raises
  only when its event consumer next polls (every 0.5 s); the executor never raises for an
  agent's failure, and if it raises all the same, ``_run_event_stream`` ends the task
  failed at once (``CustomAgentExecutor.fail_unexpected``) -- whatever it raised, even a
  ``KeyboardInterrupt`` or ``SystemExit``, which never leave the task to stop the process.
* A task whose events can no longer be read ends alone. When reading them fails (the
  task store refused a write: down, or unable to encode the task), the request gets the
  classified error, and ``_reader_stopped`` drops the task's unread events (so nothing
  waits for them: a2a-sdk would otherwise wait forever, holding the lock every new
  request needs), stops the agent and ends the task ``failed`` with the same error in
  the store -- at once, or once the store answers again (``GuardedTaskStore``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventConsumer, EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import ResultAggregator, TaskManager, TaskStore
from a2a.types import (
    DeleteTaskPushNotificationConfigParams,
    GetTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigParams,
    Message,
    MessageSendParams,
    Role,
    Task,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from llamon_agent.a2a.executor import TERMINAL_STATES, CustomAgentExecutor
from llamon_agent.a2a.ownership import OwnedTaskStore, masked_push_config
from llamon_agent.a2a.protocol import protocol_error_for_exception, push_not_supported
from llamon_agent.a2a.queues import LlamonQueueManager, abandon_queue
from llamon_agent.a2a.store_guard import GuardedTaskStore, guard_task_store
from llamon_agent.core.error_data import application_error_to_parts
from llamon_agent.core.errors import error_data_for_exception

__all__ = ["LlamonRequestHandler"]

_Stopped = Callable[[Exception], Awaitable[None]]


class _Reader(ResultAggregator):
    """a2a-sdk's ``ResultAggregator`` for one request's task that reports when reading
    the task's events fails (``stopped``) before the failure reaches the request."""

    def __init__(self, task_manager: TaskManager, stopped: _Stopped) -> None:
        super().__init__(task_manager)
        self._stopped = stopped

    async def consume_and_break_on_interrupt(
        self,
        consumer: EventConsumer,
        blocking: bool = True,
        event_callback: Callable[[], Awaitable[None]] | None = None,
    ) -> tuple[Task | Message | None, bool, asyncio.Task[Any] | None]:
        try:
            return await super().consume_and_break_on_interrupt(consumer, blocking, event_callback)
        except Exception as exc:
            await self._stopped(exc)
            raise

    async def _continue_consuming(
        self,
        event_stream: AsyncIterator[Event],
        event_callback: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        try:
            await super()._continue_consuming(event_stream, event_callback)
        except Exception as exc:
            await self._stopped(exc)
            raise

    async def consume_and_emit(self, consumer: EventConsumer) -> AsyncGenerator[Event]:
        try:
            async for event in super().consume_and_emit(consumer):
                yield event
        except Exception as exc:  # a client that left (GeneratorExit) is read on by a2a
            await self._stopped(exc)
            raise

    async def consume_all(self, consumer: EventConsumer) -> Task | Message | None:
        try:
            return await super().consume_all(consumer)
        except Exception as exc:
            await self._stopped(exc)
            raise


class LlamonRequestHandler(DefaultRequestHandler):
    """``DefaultRequestHandler`` + request validation + ProtocolErrorData on every error.

    ``task_store`` is used through ``guard_task_store`` (outages classified, refused
    terminal writes retried), by the executor too when it was given the same store;
    requests read and write it through ``OwnedTaskStore`` (tasks belong to their
    caller); queues come from ``LlamonQueueManager`` unless given.
    """

    agent_executor: CustomAgentExecutor
    task_store: OwnedTaskStore

    def __init__(
        self, agent_executor: CustomAgentExecutor, task_store: TaskStore, **kwargs: Any
    ) -> None:
        kwargs.setdefault("queue_manager", LlamonQueueManager())
        guarded = guard_task_store(task_store)
        super().__init__(agent_executor, OwnedTaskStore(guarded), **kwargs)
        self.guarded_store: GuardedTaskStore = guarded
        if agent_executor.task_store is task_store:  # one guard, one set of pending ends
            agent_executor.task_store = guarded

    async def _run_event_stream(self, request: RequestContext, queue: EventQueue) -> None:
        """Run the executor, then close the queue; a raise ends the task failed at once.

        Only a real cancellation (tasks/cancel, a stopped reader) passes through; anything
        else the executor raises -- ``KeyboardInterrupt`` and ``SystemExit`` included --
        ends the task failed and never escapes this task to stop the process.
        """
        try:
            await self.agent_executor.execute(request, queue)
        except BaseException as exc:
            task = asyncio.current_task()
            if isinstance(exc, asyncio.CancelledError) and task and task.cancelling():
                raise
            if not await self.agent_executor.fail_unexpected(request, queue, exc):
                if isinstance(exc, Exception):
                    raise
                raise RuntimeError(f"the executor raised {type(exc).__name__}") from exc
        await queue.close()

    async def _setup_message_execution(
        self, params: MessageSendParams, context: ServerCallContext | None = None
    ) -> tuple[TaskManager, str, EventQueue, ResultAggregator, asyncio.Task[Any]]:
        """a2a-sdk's setup, with a ``_Reader`` that reports a failed read of the events."""
        manager, task_id, queue, _, producer = await super()._setup_message_execution(
            params, context
        )

        async def stopped(exc: Exception) -> None:
            # TaskManager.task_id is set once the task is in the store (or it existed)
            known = manager.task_id is not None
            await self._reader_stopped(task_id, queue, producer, exc, stored=known)

        return manager, task_id, queue, _Reader(manager, stopped), producer

    async def _reader_stopped(
        self,
        task_id: str,
        queue: EventQueue,
        producer: asyncio.Task[Any],
        exc: Exception,
        *,
        stored: bool,
    ) -> None:
        """Reading ``task_id``'s events failed with ``exc``: end that task alone.

        Its unread events are dropped and later ones are not kept (nothing waits for a
        queue nobody reads), the agent is cancelled without publishing, and a task the
        store holds (``stored``) ends ``failed`` with ``exc``'s classified error --
        written in the background, at once or, while the store is down, once it answers
        again. A task never stored is left alone: nobody was given its id.
        """
        self.agent_executor.abandon(task_id)
        await abandon_queue(queue)
        producer.cancel()
        if not stored:
            return
        data = error_data_for_exception(exc)
        message = Message(
            role=Role.agent,
            parts=application_error_to_parts(data),
            message_id=str(uuid.uuid4()),
            task_id=task_id,
        )
        status = TaskStatus(
            state=TaskState.failed, message=message, timestamp=datetime.now(UTC).isoformat()
        )
        await self.guarded_store.end_task(task_id, status, now=False)

    async def on_message_send(
        self, params: MessageSendParams, context: ServerCallContext | None = None
    ) -> Message | Task:
        """message/send: validate, run, and surface a protocol error the agent raised."""
        try:
            self.agent_executor._validate_request(params)
            self.task_store.check_message(params.message, context)
            result = await super().on_message_send(params, context)
        except Exception as exc:
            raise protocol_error_for_exception(exc) from None
        if isinstance(result, Task):
            error = self.agent_executor.pop_protocol_error(result.id)
            if error is not None:
                raise error
        return result

    async def on_message_send_stream(
        self, params: MessageSendParams, context: ServerCallContext | None = None
    ) -> AsyncGenerator[Event]:
        """message/stream: as message/send, event by event."""
        try:
            self.agent_executor._validate_request(params)
            self.task_store.check_message(params.message, context)
            async for item in super().on_message_send_stream(params, context):
                event = _stream_event(item)
                if (
                    isinstance(event, TaskStatusUpdateEvent)
                    and event.final
                    and event.status.state == TaskState.failed
                ):
                    error = self.agent_executor.pop_protocol_error(event.task_id)
                    if error is not None:
                        raise error
                yield event
        except Exception as exc:
            raise protocol_error_for_exception(exc) from None

    async def on_get_task(
        self, params: TaskQueryParams, context: ServerCallContext | None = None
    ) -> Task | None:
        """tasks/get."""
        try:
            return await super().on_get_task(params, context)
        except Exception as exc:
            raise protocol_error_for_exception(exc) from None

    async def on_cancel_task(
        self, params: TaskIdParams, context: ServerCallContext | None = None
    ) -> Task | None:
        """tasks/cancel: a finished task gets TaskNotCancelable with ProtocolErrorData."""
        try:
            return await super().on_cancel_task(params, context)
        except Exception as exc:
            raise protocol_error_for_exception(exc) from None

    async def on_resubscribe_to_task(
        self, params: TaskIdParams, context: ServerCallContext | None = None
    ) -> AsyncGenerator[Event]:
        """tasks/resubscribe."""
        try:
            async for event in super().on_resubscribe_to_task(params, context):
                yield _stream_event(event)
        except Exception as exc:
            raise protocol_error_for_exception(exc) from None

    async def on_set_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext | None = None
    ) -> TaskPushNotificationConfig:
        """tasks/pushNotificationConfig/set; without a push store: -32003 (not supported).
        The answer masks the token and URL credentials."""
        if self._push_config_store is None:
            raise push_not_supported()
        try:
            config = await super().on_set_task_push_notification_config(params, context)
            return masked_push_config(config)
        except Exception as exc:
            raise protocol_error_for_exception(exc) from None

    async def on_get_task_push_notification_config(
        self,
        params: TaskIdParams | GetTaskPushNotificationConfigParams,
        context: ServerCallContext | None = None,
    ) -> TaskPushNotificationConfig:
        """tasks/pushNotificationConfig/get: the token and URL credentials masked."""
        if self._push_config_store is None:
            raise push_not_supported()
        try:
            config = await super().on_get_task_push_notification_config(params, context)
            return masked_push_config(config)
        except Exception as exc:
            raise protocol_error_for_exception(exc) from None

    async def on_list_task_push_notification_config(
        self, params: ListTaskPushNotificationConfigParams, context: ServerCallContext | None = None
    ) -> list[TaskPushNotificationConfig]:
        """tasks/pushNotificationConfig/list: tokens and URL credentials masked."""
        if self._push_config_store is None:
            raise push_not_supported()
        try:
            configs = await super().on_list_task_push_notification_config(params, context)
            return [masked_push_config(config) for config in configs]
        except Exception as exc:
            raise protocol_error_for_exception(exc) from None

    async def on_delete_task_push_notification_config(
        self,
        params: DeleteTaskPushNotificationConfigParams,
        context: ServerCallContext | None = None,
    ) -> None:
        """tasks/pushNotificationConfig/delete."""
        if self._push_config_store is None:
            raise push_not_supported()
        try:
            await super().on_delete_task_push_notification_config(params, context)
        except Exception as exc:
            raise protocol_error_for_exception(exc) from None


def _stream_event(event: Event) -> Event:
    """A ``Task`` that ends the task, as the stream's final status-update."""
    if isinstance(event, Task) and event.status.state in TERMINAL_STATES:
        return TaskStatusUpdateEvent(
            task_id=event.id, context_id=event.context_id, status=event.status, final=True
        )
    return event
