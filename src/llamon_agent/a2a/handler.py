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
``tasks/resubscribe`` gets its own copy of each event (``IsolatingQueueManager``).

And one repair: a failure is answered as soon as it happens. a2a-sdk notices an executor
that raises only when its event consumer next polls (every 0.5 s); the executor never
raises for an agent's failure, and if it raises all the same, ``_run_event_stream`` ends
the task failed at once (``CustomAgentExecutor.fail_unexpected``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import (
    DeleteTaskPushNotificationConfigParams,
    GetTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigParams,
    Message,
    MessageSendParams,
    Task,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
)

from llamon_agent.a2a.executor import TERMINAL_STATES, CustomAgentExecutor
from llamon_agent.a2a.protocol import protocol_error_for_exception, push_not_supported
from llamon_agent.a2a.queues import IsolatingQueueManager

__all__ = ["LlamonRequestHandler"]


class LlamonRequestHandler(DefaultRequestHandler):
    """``DefaultRequestHandler`` + request validation + ProtocolErrorData on every error."""

    agent_executor: CustomAgentExecutor

    def __init__(self, agent_executor: CustomAgentExecutor, **kwargs: Any) -> None:
        kwargs.setdefault("queue_manager", IsolatingQueueManager())
        super().__init__(agent_executor, **kwargs)

    async def _run_event_stream(self, request: RequestContext, queue: EventQueue) -> None:
        """Run the executor, then close the queue; a raise ends the task failed at once."""
        try:
            await self.agent_executor.execute(request, queue)
        except Exception as exc:  # CancelledError passes: tasks/cancel has its own path
            if not await self.agent_executor.fail_unexpected(request, queue, exc):
                raise
        await queue.close()

    async def on_message_send(
        self, params: MessageSendParams, context: ServerCallContext | None = None
    ) -> Message | Task:
        """message/send: validate, run, and surface a protocol error the agent raised."""
        try:
            self.agent_executor._validate_request(params)
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
        """tasks/pushNotificationConfig/set; without a push store: -32003 (not supported)."""
        if self._push_config_store is None:
            raise push_not_supported()
        try:
            return await super().on_set_task_push_notification_config(params, context)
        except Exception as exc:
            raise protocol_error_for_exception(exc) from None

    async def on_get_task_push_notification_config(
        self,
        params: TaskIdParams | GetTaskPushNotificationConfigParams,
        context: ServerCallContext | None = None,
    ) -> TaskPushNotificationConfig:
        """tasks/pushNotificationConfig/get."""
        if self._push_config_store is None:
            raise push_not_supported()
        try:
            return await super().on_get_task_push_notification_config(params, context)
        except Exception as exc:
            raise protocol_error_for_exception(exc) from None

    async def on_list_task_push_notification_config(
        self, params: ListTaskPushNotificationConfigParams, context: ServerCallContext | None = None
    ) -> list[TaskPushNotificationConfig]:
        """tasks/pushNotificationConfig/list."""
        if self._push_config_store is None:
            raise push_not_supported()
        try:
            return await super().on_list_task_push_notification_config(params, context)
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
