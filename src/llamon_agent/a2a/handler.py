"""The request handler: a2a-sdk's ``DefaultRequestHandler`` with llamon's two promises.

1. A request the agent cannot take is refused *before* a task exists
   (``CustomAgentExecutor._validate_request``).
2. Every JSON-RPC error a caller receives carries ``ProtocolErrorData`` in ``error.data``
   and a scrubbed message -- including a2a-sdk's own (task not found, not cancelable) and
   whatever else a request raises outside the agent (a task store that failed: classified
   by the one table, e.g. ``database_unavailable``). Every method runs in
   ``with as_protocol_errors():`` (``llamon_agent.a2a.protocol``), the one translator.
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

A repeated send is answered, not run (``llamon_agent.a2a.sent``): a ``message/send`` or
``message/stream`` without a ``taskId`` whose ``messageId`` the same caller sent in the
same context within the idempotency window answers the task that message started -- as
it is now (a blocking send waits for its run to end; a stream follows the run, or gets
the task) -- and the agent does not run again. So does a message continuing a task whose
history holds it already (a retried answer to ``input-required``).

One run per task, one end per run (``task_locks``): a second ``message/send`` or
``message/stream`` on a task that is running a request already is refused with
``task_busy`` (-32041, retriable) instead of starting a second agent, and ``tasks/cancel``
and the run decide the task's end once -- the cancel answers the state the task really
ended in (``canceled``, or -32002 naming the state that won), and ``tasks/get`` agrees.
Across replicas sharing a task store, an answer to a paused task first claims it there
(``stores.paused_claim``: stored ``working``, stamped with this worker, only while it is
still paused), so of two answers reaching two replicas one runs and the other gets
``task_busy`` (or -32602 naming the terminal state if the task ended first); a message
on a task stored ``submitted``/``working`` with no run here (another replica runs it)
gets ``task_busy`` too.

A fault plan in a ``message/send`` / ``message/stream`` request's params metadata (a
server with fault injection allowed: ``CustomAgentExecutor.fault_plan``, the one reader)
is made active (``core.faults.fault_scope``) once the request is admitted and before its
run starts, so the agent's task and the task store's writes for the request inherit it; a
malformed plan is refused like any bad request (-32602 ``invalid_fault_plan``).

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
import contextlib
import functools
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, cast

from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventConsumer, EventQueue
from a2a.server.events.queue_manager import NoTaskQueue
from a2a.server.tasks import ResultAggregator, TaskManager, TaskStore
from a2a.types import (
    DeleteTaskPushNotificationConfigParams,
    GetTaskPushNotificationConfigParams,
    InvalidParamsError,
    ListTaskPushNotificationConfigParams,
    Message,
    MessageSendParams,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import ServerError
from a2a.utils.helpers import append_artifact_to_task
from a2a.utils.task import apply_history_length

from llamon_agent.a2a.executor import CustomAgentExecutor
from llamon_agent.a2a.ownership import OwnedTaskStore, masked_push_config
from llamon_agent.a2a.parts import application_error_to_parts
from llamon_agent.a2a.protocol import as_protocol_errors, push_not_supported
from llamon_agent.a2a.queues import LlamonQueueManager, abandon_queue
from llamon_agent.a2a.run_events import read_events, watch_agent
from llamon_agent.a2a.sdk_spans import SdkRequestHandler
from llamon_agent.a2a.sent import DEFAULT_WINDOW, SentKey, SentMessages
from llamon_agent.a2a.states import PAUSED_STATES, TERMINAL_STATES
from llamon_agent.a2a.stores.guard import GuardedTaskStore, guard_task_store
from llamon_agent.a2a.stores.sent_lookup import SENT_METADATA_KEY
from llamon_agent.a2a.stores.workers import WORKER_METADATA_KEY
from llamon_agent.a2a.task_locks import RunClaim, TaskClaims, task_busy
from llamon_agent.core.errors import error_data_for_exception
from llamon_agent.core.faults import FaultPlan, fault_scope
from llamon_agent.core.telemetry import tracer_provider_set

if TYPE_CHECKING:
    from llamon_agent.a2a.relay import EventRelay

__all__ = ["LlamonRequestHandler"]

_Stopped = Callable[[Exception], Awaitable[None]]

_append_artifact: Callable[[Task, TaskArtifactUpdateEvent], None] = getattr(
    append_artifact_to_task, "__wrapped__", append_artifact_to_task
)
"""a2a-sdk's ``append_artifact_to_task`` without its tracing wrapper."""

logger = logging.getLogger("llamon_agent.a2a")

REMOTE_CANCEL_WAIT: Final = 10.0
"""Seconds a cancel of a task another replica runs waits for the run's end to arrive."""
RUN_END_WAIT: Final = 30.0
"""Seconds a cancel waits for the run it ended (or lost to) to have its end stored."""
CLOSE_WAIT: Final = 10.0
"""Seconds a stopping server waits for its cancelled background tasks to end."""
_CLAIM_TRIES: Final = 3
"""How often a repeat waits for another request starting the same send before it runs."""
STORED_END_POLL: Final = 0.05
"""Seconds between reads of a task whose run on another replica ended, until it is stored."""
_STARTED_STATES: Final = frozenset({TaskState.submitted, TaskState.working})
"""A stored task in one of these with no run here is running on another replica."""
CLAIM_GRACE: Final = 10.0
"""Seconds a finished run's claim waits for its reader to store the end before it is let go."""
COALESCED_MAX: Final = 16
"""At most this many events in a row wait for a next event's save (a stream holds them)."""


class _RunManager(TaskManager):
    """a2a-sdk's ``TaskManager`` for one run: once the run's final event is stored, the
    run's claim is let go (the task takes a next request at once). A task the run's
    message starts is stamped ``sent`` (``llamon.sent``) on every save.

    While ``coalescing`` (its reader shows nobody a state before the next save), a state
    that the run goes on from (``submitted``/``working``, an artifact) is not saved when
    the run's next event is already queued: the next save stores both. ``unsaved`` counts
    the events waiting (at most ``COALESCED_MAX``), ``flush`` saves them when no next
    event came. A run's end and a paused state are saved at once, and so is every state
    of a run whose request set a webhook (``pushes_each_state``): it is told each one.
    """

    def __init__(
        self,
        claims: TaskClaims,
        task_store: TaskStore,
        params: MessageSendParams,
        context: ServerCallContext | None,
        sent: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            task_id=params.message.task_id,
            context_id=params.message.context_id,
            task_store=task_store,
            initial_message=params.message,
            context=context,
        )
        self.claims = claims
        self.claim: RunClaim | None = None
        self.sent = sent
        self.stored: Callable[[str], None] | None = None  # told the task's id once saved
        self.queue: EventQueue | None = None  # the run's events, read by this manager's reader
        self.coalescing = False
        self.unsaved = 0  # events whose state waits for the next save
        self.pushes_each_state = False  # the request set a webhook: each state is saved

    async def _save_task(self, task: Task) -> None:
        if self.sent is not None and SENT_METADATA_KEY not in (task.metadata or {}):
            task.metadata = {**(task.metadata or {}), SENT_METADATA_KEY: self.sent}
        if self._coalesce(task):
            self._current_task, self.unsaved = task, self.unsaved + 1
            return
        await self._store(task)

    def _coalesce(self, task: Task) -> bool:
        """Whether saving ``task`` waits for the next event (see the class)."""
        return (
            self.coalescing
            and not self.pushes_each_state
            and self.unsaved < COALESCED_MAX
            and task.status.state in _STARTED_STATES
            and self.queue is not None
            and not self.queue.queue.empty()
        )

    async def flush(self) -> None:
        """Save the state that waits for a next event, if one does (none came)."""
        if self.unsaved and self._current_task is not None:
            await self._store(self._current_task)

    async def _store(self, task: Task) -> None:
        await super()._save_task(task)
        self.unsaved = 0
        if self.stored is not None:
            stored, self.stored = self.stored, None
            stored(task.id)

    async def save_task_event(
        self, event: Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent
    ) -> Task | None:
        if isinstance(event, TaskArtifactUpdateEvent) and not tracer_provider_set():
            task: Task | None = await self._save_artifact(event)
        else:
            task = await super().save_task_event(event)
        if self.claim is not None and _is_final(event):
            self.claims.finish(self.claim)
        return task

    async def _save_artifact(self, event: TaskArtifactUpdateEvent) -> Task:
        """a2a-sdk's ``save_task_event`` of an artifact event, with the bare
        ``append_artifact_to_task``: a2a-sdk's wraps it in a span, which records nothing
        while no tracer provider is set."""
        if self.task_id and self.task_id != event.task_id:
            message = f"Task in event doesn't match TaskManager {self.task_id} : {event.task_id}"
            raise ServerError(error=InvalidParamsError(message=message))
        self.task_id = self.task_id or event.task_id
        if self.context_id and self.context_id != event.context_id:
            message = (
                f"Context in event doesn't match TaskManager {self.context_id} : {event.context_id}"
            )
            raise ServerError(error=InvalidParamsError(message=message))
        self.context_id = self.context_id or event.context_id
        task = await self.ensure_task(event)
        _append_artifact(task, event)
        await self._save_task(task)
        return task


class _Reader(ResultAggregator):
    """a2a-sdk's ``ResultAggregator`` for one request's task that reports when reading
    the task's events fails (``stopped``) before the failure reaches the request.

    Where the request shows nothing before the run's end (a blocking send) or shows an
    event only once it is stored (a stream: events read together are stored by one save,
    then sent), its manager coalesces the saves of events read together
    (``_RunManager.coalescing``). A non-blocking send's first answer and the events read
    after it in the background are each saved as they come. The events are read with
    ``run_events.read_events`` (a2a-sdk's reading, without a timer per waiting event), the
    agent's task watched with ``run_events.watch_agent``.
    """

    def __init__(
        self,
        task_manager: _RunManager,
        producer: asyncio.Task[Any],
        stopped: _Stopped,
        ended: Callable[[], None],
    ) -> None:
        super().__init__(task_manager)
        self._manager = task_manager
        self._producer = producer  # the agent's task
        self._stopped = stopped
        self.superseded = False  # the event being sent was stored with a later one
        self._ended = ended  # the run's events are all read: its end (if any) is stored

    @contextlib.asynccontextmanager
    async def _coalesced(self, on: bool = True) -> AsyncIterator[None]:
        """Coalesce the manager's saves (``on``) while the block reads events; then save
        the state still waiting, if any (a failure there is the block's)."""
        self._manager.coalescing = on
        try:
            yield
        finally:
            self._manager.coalescing = False
        await self._manager.flush()

    @contextlib.asynccontextmanager
    async def _reporting_stop(self) -> AsyncIterator[None]:
        """Report an ``Exception`` of the block to ``stopped``, then let it go on. A client
        that left a stream (``GeneratorExit``) is no failure: a2a-sdk reads on."""
        try:
            yield
        except Exception as exc:
            await self._stopped(exc)
            raise

    async def consume_and_break_on_interrupt(
        self,
        consumer: EventConsumer,
        blocking: bool = True,
        event_callback: Callable[[], Awaitable[None]] | None = None,
    ) -> tuple[Task | Message | None, bool, asyncio.Task[Any] | None]:
        watch_agent(consumer, self._producer)
        # a non-blocking send answers its first event: each is saved as it comes
        async with self._reporting_stop(), self._coalesced(blocking):
            result = await self._read_until_answer(consumer, blocking, event_callback)
        if result[2] is None:  # nothing is read on in the background
            self._ended()
        return result

    async def _read_until_answer(
        self,
        consumer: EventConsumer,
        blocking: bool,
        event_callback: Callable[[], Awaitable[None]] | None,
    ) -> tuple[Task | Message | None, bool, asyncio.Task[Any] | None]:
        """a2a-sdk's ``ResultAggregator.consume_and_break_on_interrupt`` over ``read_events``:
        the run's events up to its end -- or, for a non-blocking send or at
        ``auth-required``, up to the first, the rest read on in the background."""
        events = read_events(consumer)
        async for event in events:
            if isinstance(event, Message):
                self._message = event
                return event, False, None
            await self.task_manager.process(event)
            auth_required = (
                isinstance(event, Task | TaskStatusUpdateEvent)
                and event.status.state == TaskState.auth_required
            )
            if auth_required or not blocking:
                background = asyncio.create_task(self._continue_consuming(events, event_callback))
                return await self.task_manager.get_task(), True, background
        return await self.task_manager.get_task(), False, None

    async def _continue_consuming(
        self,
        event_stream: AsyncIterator[Event],
        event_callback: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        async with self._reporting_stop():
            await super()._continue_consuming(event_stream, event_callback)
        self._ended()

    async def consume_and_emit(self, consumer: EventConsumer) -> AsyncGenerator[Event]:
        manager, held = self._manager, list[Event]()
        watch_agent(consumer, self._producer)
        async with self._reporting_stop():
            async with self._coalesced():
                async for event in read_events(consumer):
                    await manager.process(event)
                    if manager.unsaved:  # held as it is now: a2a-sdk changes it in place
                        held.append(event.model_copy(deep=True))
                        continue
                    held.append(event)
                    for stored in self._sent(held):
                        yield stored
            for stored in self._sent(held):
                yield stored
        self._ended()

    def _sent(self, held: list[Event]) -> Iterator[Event]:
        """The events ``held``, stored by one save; all but the last are ``superseded``."""
        for index, event in enumerate(held):
            self.superseded = index < len(held) - 1
            yield event
        self.superseded = False
        held.clear()

    async def consume_all(self, consumer: EventConsumer) -> Task | Message | None:
        watch_agent(consumer, self._producer)
        async with self._reporting_stop(), self._coalesced():
            result = await self._read_all(consumer)
        self._ended()
        return result

    async def _read_all(self, consumer: EventConsumer) -> Task | Message | None:
        """a2a-sdk's ``ResultAggregator.consume_all`` over ``read_events``."""
        async for event in read_events(consumer):
            if isinstance(event, Message):
                self._message = event
                return event
            await self.task_manager.process(event)
        return await self.task_manager.get_task()


class LlamonRequestHandler(SdkRequestHandler):
    """``DefaultRequestHandler`` + request validation + ProtocolErrorData on every error.

    ``task_store`` is used through ``guard_task_store`` (outages classified, refused
    terminal writes retried), by the executor too when it was given the same store;
    requests read and write it through ``OwnedTaskStore`` (tasks belong to their
    caller); queues come from ``LlamonQueueManager`` unless given. ``idempotency_window``:
    seconds a repeated send is answered with the task it started (``0``: never);
    ``sent`` holds them (``SentMessages``; its ``clock`` may be replaced).
    ``relay`` (``llamon_agent.a2a.relay``; ``None``: none): every event of the runs this
    handler executes is posted to it, and a ``tasks/resubscribe`` of a task that is
    running elsewhere (in the shared store, not ended, no run here) follows its events
    there, as do a repeated ``message/stream`` and a repeated blocking ``message/send``
    (which then answers the task as stored with the run's end).
    A ``tasks/cancel`` of such a task stores nothing here: it asks every replica
    through the relay to cancel it and answers the end the run's events then carry
    (``canceled``, or -32002 naming the state that came first), waiting at most
    ``remote_cancel_wait`` seconds (then ``UPSTREAM_TIMEOUT`` / ``cancel_unconfirmed``,
    retriable); ``start_listening`` makes this handler cancel, as a local ``tasks/cancel``
    does, the runs it holds that another replica was asked to cancel.
    """

    agent_executor: CustomAgentExecutor
    task_store: OwnedTaskStore

    def __init__(
        self,
        agent_executor: CustomAgentExecutor,
        task_store: TaskStore,
        *,
        idempotency_window: float = DEFAULT_WINDOW,
        relay: EventRelay | None = None,
        remote_cancel_wait: float = REMOTE_CANCEL_WAIT,
        **kwargs: Any,
    ) -> None:
        post = relay.post if relay is not None else None
        kwargs.setdefault("queue_manager", LlamonQueueManager(post))
        self.relay = relay
        self.remote_cancel_wait = remote_cancel_wait
        self._listener: asyncio.Task[None] | None = None
        guarded = guard_task_store(task_store)
        super().__init__(agent_executor, OwnedTaskStore(guarded), **kwargs)
        self.guarded_store: GuardedTaskStore = guarded
        self.sent = SentMessages(guarded, idempotency_window)
        self._producer_claims: dict[asyncio.Task[Any], RunClaim] = {}
        self._closed = False  # set by aclose: the server stopped
        if agent_executor.task_store is task_store:  # one guard, one set of pending ends
            agent_executor.task_store = guarded

    async def aclose(self) -> None:
        """Cancel what still runs in the background as the server stops -- the consumer of
        a stream whose client left, a run the shutdown already ended -- and wait for it
        (at most ``CLOSE_WAIT`` seconds), so no task is left pending when the event loop
        closes."""
        self._closed = True
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        for _ in range(3):  # a cancelled one may start another (a stream's consumer)
            pending = [
                task
                for task in (*self._background_tasks, *self._running_agents.values())
                if not task.done()
            ]
            if not pending:
                return
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=CLOSE_WAIT)

    def start_listening(self) -> None:
        """With a relay: start receiving cancel requests other replicas publish (stopped
        by ``aclose``); each one for a task running here is cancelled as a local
        ``tasks/cancel`` would, the others are ignored. Without a relay: nothing."""
        if self.relay is None or self._listener is not None:
            return
        listen = self.relay.listen_cancels(self._cancel_requested)
        self._listener = asyncio.get_running_loop().create_task(listen)

    def _cancel_requested(self, task_id: str) -> None:
        """A replica asked to cancel ``task_id``: cancel it if a run of it is here."""
        if self._closed or self._claims.running(task_id) is None:
            return
        task = asyncio.get_running_loop().create_task(self._cancel_here(task_id))
        self._track_background_task(task)

    async def _cancel_here(self, task_id: str) -> None:
        """Cancel the run of ``task_id`` here, as ``tasks/cancel`` does; its events (the
        canceled end, or the end that came first) reach the relay as the run's own."""
        try:
            await self._cancel_task(TaskIdParams(id=task_id), None, here=True)
        except Exception as exc:  # the run ended first, or the store failed: its answer
            logger.debug("task %s: a requested cancel ended with %s", task_id, type(exc).__name__)

    async def _send_push_notification_if_needed(
        self, task_id: str, result_aggregator: ResultAggregator
    ) -> None:
        """a2a-sdk's push of the task as it is now, after each event a request reads; an
        event stored by one save with a later one is not pushed (the later one is)."""
        if isinstance(result_aggregator, _Reader) and result_aggregator.superseded:
            return
        await super()._send_push_notification_if_needed(task_id, result_aggregator)

    def _track_background_task(self, task: asyncio.Task[Any]) -> None:
        """a2a-sdk's tracking of a background task; once the server stopped (``aclose``),
        one started late (a stream's consumer whose caller left as the server stopped) is
        cancelled at once, never left waiting for events that will not come."""
        super()._track_background_task(task)
        if self._closed:
            task.cancel()

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

    @property
    def _claims(self) -> TaskClaims:
        return self.agent_executor.claims

    async def _setup_message_execution(
        self, params: MessageSendParams, context: ServerCallContext | None = None
    ) -> tuple[TaskManager, str, EventQueue, ResultAggregator, asyncio.Task[Any]]:
        """a2a-sdk's setup, one run per task: a message on a task that is running a request
        already is refused with ``task_busy``; the run's claim is taken in the same
        critical section as the task's state is read (a cancel cannot slip in between)."""
        task_id = params.message.task_id
        if not task_id:  # a new task: its id is made below, nobody else knows it
            return await self._start_run(params, context)
        async with self._claims.locked(task_id):
            if self._claims.running(task_id) is not None:
                raise task_busy()
            return await self._start_run(params, context)

    async def _start_run(
        self, params: MessageSendParams, context: ServerCallContext | None
    ) -> tuple[TaskManager, str, EventQueue, ResultAggregator, asyncio.Task[Any]]:
        """a2a-sdk 0.3's ``_setup_message_execution``, with the run's claim, its own queue
        and a ``_Reader`` that reports a failed read of the events; a task it starts is
        stamped with its message (``sent``)."""
        key = self.sent.key(params.message, context)  # before a2a-sdk fills the context
        stamp = self.sent.stamp(key) if key is not None else None
        manager = _RunManager(self._claims, self.task_store, params, context, stamp)
        task: Task | None = await manager.get_task()
        paused: Task | None = None  # the paused task as read, once this request claimed it
        if task:
            state = task.status.state
            if state in TERMINAL_STATES:
                raise _in_terminal_state(task.id, state)
            if state in _STARTED_STATES:  # no run here (checked under the lock): elsewhere
                raise task_busy()
            before = task.model_copy(deep=True) if state in PAUSED_STATES else None
            task = manager.update_with_message(params.message, task)
            if before is not None:
                await self._resume(task, before.status.state, context)
                paused = before
        elif params.message.task_id:
            raise _specified_not_found(params.message.task_id)
        try:
            request_context = await self._request_context_builder.build(
                params=params,
                task_id=task.id if task else None,
                context_id=params.message.context_id,
                task=task,
                context=context,
            )
            task_id = cast("str", request_context.task_id)
            if key is not None and stamp is not None and task is None:
                manager.stored = functools.partial(self.sent.started, key, stamp=stamp)
            configuration = params.configuration
            push = configuration.push_notification_config if configuration else None
            if self._push_config_store and push:
                await self._push_config_store.set_info(task_id, push)  # may refuse its URL
            if isinstance(self._queue_manager, LlamonQueueManager):
                queue = await self._queue_manager.create(task_id)
            else:
                queue = await self._queue_manager.create_or_tap(task_id)
        except BaseException:
            if paused is not None:
                await self._unclaim(paused, context)
            raise
        claim = self._claims.begin(task_id, str(request_context.context_id), queue)
        manager.claim, manager.queue = claim, queue
        manager.pushes_each_state = push is not None
        producer = asyncio.create_task(self._run_event_stream(request_context, queue))
        claim.producer = producer
        self._producer_claims[producer] = claim
        await self._register_producer(task_id, producer)

        async def stopped(exc: Exception) -> None:
            # TaskManager.task_id is set once the task is in the store (or it existed)
            known = manager.task_id is not None
            await self._reader_stopped(task_id, queue, producer, exc, stored=known)
            self._claims.finish(claim)

        reader = _Reader(manager, producer, stopped, lambda: self._claims.finish(claim))
        return manager, task_id, queue, reader, producer

    async def _resume(
        self, task: Task, paused: TaskState, context: ServerCallContext | None
    ) -> None:
        """Claim the paused ``task`` for the run starting here: stored ``working`` and
        stamped with this worker only if it is still ``paused`` in the shared store
        (``paused_claim``), so of two answers racing on two replicas one runs. A request
        that loses is refused: -32602 naming the state if the task ended meanwhile
        (a2a-sdk's answer to a message on an ended task), else ``task_busy``. ``task``
        itself stays paused: the agent learns from it that it resumes."""
        task.metadata = {
            **(task.metadata or {}),
            WORKER_METADATA_KEY: self.agent_executor.worker_id,
        }
        status = TaskStatus(state=TaskState.working, timestamp=_now())
        resumed = task.model_copy(update={"status": status}, deep=True)
        if await self.task_store.claim_paused(resumed, paused, context):
            return
        stored = await self.task_store.get(task.id, context)
        if stored is None:
            raise _specified_not_found(task.id)
        if stored.status.state in TERMINAL_STATES:
            raise _in_terminal_state(task.id, stored.status.state)
        logger.info("task %s: resumed by another request first", task.id)
        raise task_busy()

    async def _unclaim(self, paused: Task, context: ServerCallContext | None) -> None:
        """The request that claimed ``paused`` is refused before its run starts (a push
        config the policy refuses ...): store the task as it was, so the next answer
        resumes it. A store that refuses leaves it ``working`` (answering ``task_busy``)
        until this worker's next start ends it (``reconcile_orphaned_tasks``)."""
        try:
            await self.task_store.save(paused, context)
        except Exception as exc:
            logger.warning(
                "task %s: not stored paused again after its answer was refused (%s)",
                paused.id,
                type(exc).__name__,
            )

    async def _cleanup_producer(self, producer_task: asyncio.Task[Any], task_id: str) -> None:
        """Once the run's agent has stopped: close its queue and forget it, leaving a next
        run of the same task alone; its claim is let go if its reader did not already."""
        try:
            await producer_task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this cleanup itself is cancelled: the server stops (``aclose``)
            logger.debug("task %s: the agent was cancelled", task_id)
        claim = self._producer_claims.pop(producer_task, None)
        if isinstance(self._queue_manager, LlamonQueueManager) and claim is not None:
            if claim.queue is not None:
                await self._queue_manager.release(task_id, claim.queue)
        else:
            with contextlib.suppress(NoTaskQueue):  # closed by an earlier cleanup
                await self._queue_manager.close(task_id)
        async with self._running_agents_lock:
            if self._running_agents.get(task_id) is producer_task:
                del self._running_agents[task_id]
        if claim is not None and not claim.done.is_set():
            try:  # its reader stores the end it is reading, then lets go
                await asyncio.wait_for(claim.done.wait(), CLAIM_GRACE)
            except TimeoutError:
                logger.warning("task %s: its run ended without its end being stored", task_id)
                self._claims.finish(claim)

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

    async def _admit(self, params: MessageSendParams, context: ServerCallContext | None) -> None:
        """Refuse a message before a task exists: the executor's checks, then the caller's
        right to the task or context it names."""
        self.agent_executor._validate_request(params)
        unknown_context = self.task_store.check_message(params.message, context)
        if unknown_context is not None:  # rare: a client-named context not remembered
            await self.task_store.check_context(unknown_context, context)

    async def _continued_already(
        self, message: Message, context: ServerCallContext | None
    ) -> Task | None:
        """The task ``message`` continues when it holds this message already (a retried
        answer to ``input-required``), else ``None``."""
        if not message.task_id:
            return None
        task = await self.task_store.get(message.task_id, context)
        if task is None or not any(m.message_id == message.message_id for m in task.history or ()):
            return None
        return task

    async def _earlier_task(
        self, message: Message, key: SentKey | None, context: ServerCallContext | None
    ) -> tuple[Task | None, asyncio.Future[str | None] | None]:
        """The task this message started or continued already (a repeat), as the caller
        may read it, or ``None`` when it is no repeat or the task is gone; and the claim on
        ``key`` this request holds to start it (release it when done).

        A repeat of a send that is still starting waits for its task to be stored."""
        if key is None:
            return await self._continued_already(message, context), None
        if self.sent.window <= 0:
            return None, None  # repeats are not looked for
        task_id = await self.sent.earlier(key)
        for _ in range(_CLAIM_TRIES):
            if task_id is not None:
                break
            mine, starting = self.sent.claim(key)
            if mine:
                return None, starting
            with contextlib.suppress(TimeoutError):
                task_id = await asyncio.wait_for(asyncio.shield(starting), RUN_END_WAIT)
        if task_id is None:
            return None, None
        return await self.task_store.get(task_id, context), None

    async def _send_again(
        self, task: Task, params: MessageSendParams, context: ServerCallContext | None
    ) -> Task:
        """A repeated message/send's answer: ``task`` now, or once its run ends when the
        send is blocking (as a first blocking send waits) -- the run here, or, with a
        relay, the run another replica holds: its events are followed to its end, and the
        answer is the task as stored with that end (``_stored_after_end``)."""
        blocking = not (params.configuration and params.configuration.blocking is False)
        if blocking and task.status.state not in TERMINAL_STATES | PAUSED_STATES:
            claim = self._claims.running(task.id)
            if claim is not None:
                await claim.done.wait()
            elif self.relay is not None:
                elsewhere = await self._running_elsewhere(task.id, context)
                if elsewhere is not None:
                    async for _event in self._follow_relay(self.relay, elsewhere, context):
                        pass  # only its end matters: the answer is the stored task
                    return apply_history_length(
                        await self._stored_after_end(task, context), _history_length(params)
                    )
            # read again either way: a run that ended after ``task`` was read has let its
            # claim go only once its final state is stored
            task = await self.task_store.get(task.id, context) or task
        logger.info("task %s: a repeated message answered with its task", task.id)
        return apply_history_length(task, _history_length(params))

    async def _stored_after_end(self, task: Task, context: ServerCallContext | None) -> Task:
        """``task`` as stored once its run on another replica ended: the relay carries the
        run's end before that replica has stored it, so the store is read again (every
        ``STORED_END_POLL`` seconds, at most ``RUN_END_WAIT``) until it holds an end."""
        deadline = asyncio.get_running_loop().time() + RUN_END_WAIT
        while True:
            stored = await self.task_store.get(task.id, context)
            if stored is None:
                raise ServerError(error=TaskNotFoundError())
            ended = stored.status.state in TERMINAL_STATES | PAUSED_STATES
            if ended or asyncio.get_running_loop().time() > deadline:
                logger.info("task %s: a repeated message answered with its task", task.id)
                return stored
            await asyncio.sleep(STORED_END_POLL)

    async def _stream_again(
        self, task: Task, context: ServerCallContext | None
    ) -> AsyncGenerator[Event]:
        """A repeated message/stream's events: ``task``, then those of its run while it
        runs (as ``tasks/resubscribe``: with a relay, a run on another replica is followed
        there), ending with its end."""
        logger.info("task %s: a repeated message answered with its task", task.id)
        yield task
        if task.status.state in TERMINAL_STATES:
            return
        if self.relay is not None and self._claims.running(task.id) is None:
            elsewhere = await self._running_elsewhere(task.id, context)
            if elsewhere is not None:
                async for event in self._follow_relay(self.relay, elsewhere, context):
                    yield event
                return
        if self._claims.running(task.id) is not None:
            with contextlib.suppress(ServerError):  # the run ended before it was followed
                async for event in super().on_resubscribe_to_task(
                    TaskIdParams(id=task.id), context
                ):
                    event = _stream_event(event)
                    yield event
                    if isinstance(event, TaskStatusUpdateEvent) and event.final:
                        return
        end = await self._stored_end(task.id, context, task.status)
        if end is not None:
            yield end

    async def _stored_end(
        self, task_id: str, context: ServerCallContext | None, seen: TaskStatus | None
    ) -> TaskStatusUpdateEvent | None:
        """The final status-update of ``task_id`` as stored once its run (if any) has let
        go, for a stream that followed it without reading its end; ``None`` when the
        stored status is ``seen`` (nothing new), not an end, or the task is gone."""
        claim = self._claims.running(task_id)
        if claim is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(claim.done.wait(), RUN_END_WAIT)
        stored = await self.task_store.get(task_id, context)
        if stored is None or stored.status == seen:
            return None
        if stored.status.state not in TERMINAL_STATES | PAUSED_STATES:
            return None  # still running elsewhere (another process): nothing ended here
        return TaskStatusUpdateEvent(
            task_id=stored.id, context_id=stored.context_id, status=stored.status, final=True
        )

    async def on_message_send(
        self, params: MessageSendParams, context: ServerCallContext | None = None
    ) -> Message | Task:
        """message/send: validate, run (or answer a repeat), and surface a protocol
        error the agent raised."""
        with as_protocol_errors():
            await self._admit(params, context)
            plan = self.agent_executor.fault_plan(params.metadata)
            if plan is None:
                result = await self._send(params, context)
            else:
                with fault_scope(plan):
                    result = await self._send(params, context)
        if isinstance(result, Task):
            error = self.agent_executor.protocol_errors.pop(result.id)
            if error is not None:
                raise error
        return result

    async def _send(
        self, params: MessageSendParams, context: ServerCallContext | None
    ) -> Message | Task:
        """message/send once admitted: answer a repeat, else run."""
        key = self.sent.key(params.message, context)
        earlier, held = await self._earlier_task(params.message, key, context)
        if earlier is not None:
            return await self._send_again(earlier, params, context)
        try:
            return await super().on_message_send(params, context)
        finally:
            if key is not None and held is not None:
                self.sent.release(key, held)

    async def on_message_send_stream(
        self, params: MessageSendParams, context: ServerCallContext | None = None
    ) -> AsyncGenerator[Event]:
        """message/stream: as message/send, event by event."""
        with as_protocol_errors():
            await self._admit(params, context)
            plan = self.agent_executor.fault_plan(params.metadata)
        if plan is None:
            async for event in self._stream(params, context):
                yield event
            return
        scope = fault_scope(plan)
        scope.__enter__()  # left below: a stream is read by one task, the scope spans it
        try:
            async for event in self._stream(params, context):
                yield event
        finally:
            _leave(scope)

    async def _stream(
        self, params: MessageSendParams, context: ServerCallContext | None
    ) -> AsyncGenerator[Event]:
        """message/stream once admitted: a repeat's events, else the run's."""
        with as_protocol_errors():
            key = self.sent.key(params.message, context)
            earlier, held = await self._earlier_task(params.message, key, context)
            if earlier is not None:
                async for event in self._stream_again(earlier, context):
                    yield event
                return
            try:
                async for item in super().on_message_send_stream(params, context):
                    event = _stream_event(item)
                    if (
                        isinstance(event, TaskStatusUpdateEvent)
                        and event.final
                        and event.status.state == TaskState.failed
                    ):
                        error = self.agent_executor.protocol_errors.pop(event.task_id)
                        if error is not None:
                            raise error
                    yield event
            finally:
                if key is not None and held is not None:
                    self.sent.release(key, held)

    async def on_get_task(
        self, params: TaskQueryParams, context: ServerCallContext | None = None
    ) -> Task | None:
        """tasks/get."""
        with as_protocol_errors():
            return await super().on_get_task(params, context)

    async def on_cancel_task(
        self, params: TaskIdParams, context: ServerCallContext | None = None
    ) -> Task | None:
        """tasks/cancel: the task's true end -- ``canceled``, or TaskNotCancelable (-32002,
        ProtocolErrorData) naming the state it ended in."""
        with as_protocol_errors():
            return await self._cancel_task(params, context)

    async def _cancel_task(
        self, params: TaskIdParams, context: ServerCallContext | None, *, here: bool = False
    ) -> Task:
        """End ``params.id`` canceled, deciding against its run in the task's critical section.

        A task nothing runs is ended in the store at once. A running one is ended through
        its run's claim: if the cancel wins, the agent is cancelled and the run publishes
        nothing more; either way the answer waits until the run's end is stored, and is
        that end. A run that ended with a new question before the cancel reached it leaves
        a paused task, which is then canceled like any. With a relay and unless ``here``, a
        task running on another replica is cancelled there (``_cancel_elsewhere``).
        """
        if self.relay is not None and not here:
            elsewhere = await self._running_elsewhere(params.id, context)
            if elsewhere is not None:
                return await self._cancel_elsewhere(self.relay, elsewhere, context)
        for _ in range(3):
            task = await self.task_store.get(params.id, context)
            if task is None:
                raise ServerError(error=TaskNotFoundError())
            async with self._claims.locked(task.id):
                claim = self._claims.running(task.id)
                if claim is None:
                    return await self._cancel_idle(params.id, context)
                won = await self._cancel_run(claim, task)
            try:
                await asyncio.wait_for(claim.done.wait(), RUN_END_WAIT)
            except TimeoutError:
                logger.warning("task %s: its end was not stored in time", task.id)
            stored = await self.task_store.get(params.id, context)
            if stored is None:
                raise ServerError(error=TaskNotFoundError())
            state = stored.status.state
            if won and state != TaskState.canceled:  # the end is decided, not yet stored
                status = TaskStatus(state=TaskState.canceled, timestamp=_now())
                return stored.model_copy(update={"status": status})
            if won:
                return stored
            if state in TERMINAL_STATES:
                raise _not_cancelable(state)
        raise _not_cancelable(state)

    async def _cancel_elsewhere(
        self, relay: EventRelay, task: Task, context: ServerCallContext | None
    ) -> Task:
        """Cancel ``task``, run by another replica: request it through the relay and answer
        the end its run's events carry (waiting at most ``remote_cancel_wait`` seconds)."""
        latest = await relay.last(task.id)
        if latest is not None and _ends_run(latest[1]):
            return await self._remote_end(task.id, context, latest[1])
        after = latest[0] if latest is not None else "0-0"
        await relay.request_cancel(task.id)

        async def ended() -> bool:
            stored = await self.task_store.get(task.id, context)
            return stored is None or stored.status.state in TERMINAL_STATES | PAUSED_STATES

        end: Event | None = None
        try:
            async with asyncio.timeout(self.remote_cancel_wait):
                follow = relay.follow(task.id, after, idle=ended)
                events = cast("AsyncGenerator[tuple[str, Event]]", follow)
                async with contextlib.aclosing(events):
                    async for _, event in events:
                        if _ends_run(event):
                            end = event
        except TimeoutError:
            from llamon_agent.a2a.relay import CancelUnconfirmedError  # the redis extra's

            raise CancelUnconfirmedError from None
        return await self._remote_end(task.id, context, end)

    async def _remote_end(
        self, task_id: str, context: ServerCallContext | None, end: Event | None
    ) -> Task:
        """The answer to a cancel of a run that ended elsewhere with ``end`` (``None``: its
        end is the stored one): the canceled task, else -32002 naming the state that came
        first; a run that ended with a question leaves a paused task, canceled here."""
        stored = await self.task_store.get(task_id, context)
        if stored is None:
            raise ServerError(error=TaskNotFoundError())
        status = stored.status
        if isinstance(end, TaskStatusUpdateEvent | Task):
            status = end.status
        elif isinstance(end, Message):
            status = TaskStatus(state=TaskState.completed, timestamp=_now())
        if status.state in PAUSED_STATES:
            return await self._cancel_idle(task_id, context)
        if status.state != TaskState.canceled:
            raise _not_cancelable(status.state)
        if stored.status.state != TaskState.canceled:  # the end is known, not yet stored
            return stored.model_copy(update={"status": status})
        return stored

    async def _cancel_run(self, claim: RunClaim, task: Task) -> bool:
        """Ask ``claim``'s run to end canceled; ``True`` when this cancel won (the agent is
        then cancelled), ``False`` when the run's own end came first."""
        already = claim.ended
        context = RequestContext(None, task_id=task.id, context_id=task.context_id, task=task)
        await self.agent_executor.cancel(context, claim.queue or EventQueue())
        won = not already and claim.ended_by == TaskState.canceled
        if won and claim.producer is not None:
            claim.producer.cancel()
        return won

    async def _cancel_idle(self, task_id: str, context: ServerCallContext | None) -> Task:
        """Cancel a task no run holds (paused, or left by a stopped worker), in the store."""
        task = await self.task_store.get(task_id, context)
        if task is None:
            raise ServerError(error=TaskNotFoundError())
        if task.status.state in TERMINAL_STATES:
            raise _not_cancelable(task.status.state)
        queue = EventQueue()
        request = RequestContext(None, task_id=task.id, context_id=task.context_id, task=task)
        await self.agent_executor.cancel(request, queue)
        manager = TaskManager(
            task_id=task.id,
            context_id=task.context_id,
            task_store=self.task_store,
            initial_message=None,
            context=context,
        )
        while True:  # what cancel published; nothing else writes to this queue
            try:
                event = await queue.dequeue_event(no_wait=True)
            except asyncio.QueueEmpty:
                break
            queue.task_done()
            await manager.process(event)
        await queue.close(immediate=True)
        result = await manager.get_task()
        state = result.status.state if result is not None else task.status.state
        if result is None or state != TaskState.canceled:
            raise _not_cancelable(state)
        return result

    async def on_resubscribe_to_task(
        self, params: TaskIdParams, context: ServerCallContext | None = None
    ) -> AsyncGenerator[Event]:
        """tasks/resubscribe; a task another replica runs is followed through the relay."""
        with as_protocol_errors():
            if self.relay is not None:
                elsewhere = await self._running_elsewhere(params.id, context)
                if elsewhere is not None:
                    async for event in self._follow_relay(self.relay, elsewhere, context):
                        yield event
                    return
            last: TaskStatus | None = None
            async for item in super().on_resubscribe_to_task(params, context):
                event = _stream_event(item)
                yield event
                if isinstance(event, TaskStatusUpdateEvent):
                    if event.final:
                        return
                    last = event.status
            end = await self._stored_end(params.id, context, last)
            if end is not None:  # the run ended as the stream attached: its stored end
                yield end

    async def _running_elsewhere(
        self, task_id: str, context: ServerCallContext | None
    ) -> Task | None:
        """``task_id`` when no run of it is here and the store holds it not ended (nor
        paused): another replica runs it; else ``None``."""
        if await self._queue_manager.get(task_id) is not None:
            return None
        task = await self.task_store.get(task_id, context)
        if task is None or task.status.state in TERMINAL_STATES | PAUSED_STATES:
            return None
        return task

    async def _follow_relay(
        self, relay: EventRelay, task: Task, context: ServerCallContext | None
    ) -> AsyncGenerator[Event]:
        """The events of ``task``'s run on another replica from now on, read from the
        relay, ending with its end (the stored one, if the relay never carries it)."""
        latest = await relay.last(task.id)
        if latest is not None and _ends_run(latest[1]):
            yield _stream_event(latest[1])  # it ended as this request came in
            return

        async def ended() -> bool:
            stored = await self.task_store.get(task.id, context)
            return stored is None or stored.status.state in TERMINAL_STATES | PAUSED_STATES

        after = latest[0] if latest is not None else "0-0"
        last: TaskStatus | None = task.status
        async for _, item in relay.follow(task.id, after, idle=ended):
            event = _stream_event(item)
            yield event
            if isinstance(event, TaskStatusUpdateEvent):
                if event.final:
                    return
                last = event.status
        end = await self._stored_end(task.id, context, last)
        if end is not None:
            yield end

    async def on_set_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext | None = None
    ) -> TaskPushNotificationConfig:
        """tasks/pushNotificationConfig/set; without a push store: -32003 (not supported).
        The answer masks the token and URL credentials."""
        if self._push_config_store is None:
            raise push_not_supported()
        with as_protocol_errors():
            config = await super().on_set_task_push_notification_config(params, context)
            return masked_push_config(config)

    async def on_get_task_push_notification_config(
        self,
        params: TaskIdParams | GetTaskPushNotificationConfigParams,
        context: ServerCallContext | None = None,
    ) -> TaskPushNotificationConfig:
        """tasks/pushNotificationConfig/get: the token and URL credentials masked."""
        if self._push_config_store is None:
            raise push_not_supported()
        with as_protocol_errors():
            config = await super().on_get_task_push_notification_config(params, context)
            return masked_push_config(config)

    async def on_list_task_push_notification_config(
        self, params: ListTaskPushNotificationConfigParams, context: ServerCallContext | None = None
    ) -> list[TaskPushNotificationConfig]:
        """tasks/pushNotificationConfig/list: tokens and URL credentials masked."""
        if self._push_config_store is None:
            raise push_not_supported()
        with as_protocol_errors():
            configs = await super().on_list_task_push_notification_config(params, context)
            return [masked_push_config(config) for config in configs]

    async def on_delete_task_push_notification_config(
        self,
        params: DeleteTaskPushNotificationConfigParams,
        context: ServerCallContext | None = None,
    ) -> None:
        """tasks/pushNotificationConfig/delete."""
        if self._push_config_store is None:
            raise push_not_supported()
        with as_protocol_errors():
            await super().on_delete_task_push_notification_config(params, context)


def _leave(scope: contextlib.AbstractContextManager[FaultPlan | None]) -> None:
    """Leave a stream's fault scope; a stream closed from another context (its reader
    gone, the generator finalized elsewhere) has nothing to restore there."""
    with contextlib.suppress(ValueError):
        scope.__exit__(None, None, None)


def _is_final(event: Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> bool:
    """Whether ``event`` ends its run (what a2a-sdk's consumer stops reading at)."""
    if isinstance(event, TaskStatusUpdateEvent):
        return event.final
    if isinstance(event, Task):
        return event.status.state in TERMINAL_STATES or event.status.state in PAUSED_STATES
    return False


def _ends_run(event: Event) -> bool:
    """Whether a relayed ``event`` ends its run (a message does: the run had no task)."""
    return isinstance(event, Message) or _is_final(event)


def _in_terminal_state(task_id: str, state: TaskState) -> ServerError:
    """a2a-sdk's answer to a message continuing an ended task: -32602 naming its state."""
    message = f"Task {task_id} is in terminal state: {state.value}"
    return ServerError(error=InvalidParamsError(message=message))


def _specified_not_found(task_id: str) -> ServerError:
    """a2a-sdk's answer to a message continuing a task the store does not hold: -32001."""
    message = f"Task {task_id} was specified but does not exist"
    return ServerError(error=TaskNotFoundError(message=message))


def _not_cancelable(state: TaskState) -> ServerError:
    """-32002, its message naming the state the task is in as on the wire."""
    message = f"Task cannot be canceled - current state: {state.value}"
    return ServerError(error=TaskNotCancelableError(message=message))


def _history_length(params: MessageSendParams) -> int | None:
    """The history length a send asked for (``None``: all of it)."""
    return params.configuration.history_length if params.configuration else None


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _stream_event(event: Event) -> Event:
    """A ``Task`` that ends the task, as the stream's final status-update."""
    if isinstance(event, Task) and event.status.state in TERMINAL_STATES:
        return TaskStatusUpdateEvent(
            task_id=event.id, context_id=event.context_id, status=event.status, final=True
        )
    return event
