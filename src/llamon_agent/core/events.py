"""Runner events: one transport-neutral event model for every runtime, and its bus.

Every runtime -- the A2A executor, the tool loop, flows, MCP tools, model calls and the
caller side -- emits the same ``RunnerEvent`` (see docs/operations.md, "Events", for the
table of types). ``dataclasses.asdict(event)`` is JSON-ready; every field already passed
the security boundary (``core.scrub``).

An ``EventBus`` hands each event to its subscribers: in-process callbacks (plain or
``async``) and JSON-lines writers. Each subscriber reads from its own bounded queue,
drained by its own task, so a slow, blocked or raising subscriber never slows or fails
the run: when its queue is full the event is dropped for it and its ``dropped`` counter
grows; a callback that raises is logged (its exception type only) and counted in
``failed``. With no subscriber a bus costs one attribute test (``bus.active``), and
emitters build no event.

Where events go: the A2A server runs each task inside ``event_scope(bus, task_id=...,
context_id=...)``, so a tool loop, a flow or an MCP tool running inside that task emits
into the server's bus, stamped with the task's ids, without any wiring.
"""

from __future__ import annotations

import _json
import asyncio
import contextlib
import inspect
import json
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field, fields
from json.encoder import encode_basestring_ascii
from typing import IO, Final, TypeAlias

from llamon_agent.core.failures import FailureRecord
from llamon_agent.core.scrub import scrub_evidence, scrub_forwarded, scrub_public_text

__all__ = [
    "DEFAULT_QUEUE_SIZE",
    "JSONL_FLUSH_EVERY",
    "EventBus",
    "EventCallback",
    "EventScope",
    "RunnerEvent",
    "Subscription",
    "current_scope",
    "emit",
    "event_scope",
    "event_to_json",
    "failure_metadata",
    "observed",
]

logger = logging.getLogger("llamon_agent.events")

DEFAULT_QUEUE_SIZE: Final = 1024
"""Events a subscriber may have waiting before further ones are dropped for it."""

JSONL_FLUSH_EVERY: Final = 0.05
"""Seconds between two flushes of a JSON-lines subscriber's stream (at most)."""

_now: Final = time.time

_FAILURE_KEYS: Final = ("failure_reason", "error_code", "retryable", "message", "http_status")


@dataclass(slots=True)
class RunnerEvent:
    """One thing that happened in a run, a task, a flow or a call.

    ``type`` (``task.failed``, ``step.started`` ...) and ``stage`` (where: ``a2a_serve``,
    ``tool_loop``, ``flow_node`` ...) say what; ``run_id`` names one loop run, ``task_id``
    and ``context_id`` the A2A task it belongs to, ``round`` the loop round, ``tool`` and
    ``step_id`` the tool call, ``node`` the flow node. ``trace_metadata`` holds the
    details; for a failure ``failure_reason``, ``error_code``, ``retryable``, ``message``
    and ``http_status`` when known, then the failure's evidence (allow-listed). ``extra``
    holds fields this SDK does not know, received from an upstream event: kept when
    forwarded, scrubbed by value (``scrub_forwarded``) when the event is made. ``time``
    is seconds since the epoch (now, when not given; an omitted mapping is ``{}``).

    Every subscriber of a bus is handed the same event: read it, never change it (make a
    changed copy with ``dataclasses.replace``).
    """

    type: str
    stage: str
    run_id: str = ""
    round: int = 0
    tool: str | None = None
    step_id: str | None = None
    trace_metadata: Mapping[str, object] = field(default_factory=dict)
    task_id: str | None = None
    context_id: str | None = None
    node: str | None = None
    time: float = field(default_factory=time.time)
    extra: Mapping[str, object] = field(default_factory=dict)

    def __init__(
        self,
        type: str,
        stage: str,
        run_id: str = "",
        round: int = 0,
        tool: str | None = None,
        step_id: str | None = None,
        trace_metadata: Mapping[str, object] | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        node: str | None = None,
        time: float | None = None,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        # written out, not generated: events are made on hot paths (no __post_init__ call)
        self.type = type
        self.stage = stage
        self.run_id = run_id
        self.round = round
        self.tool = tool
        self.step_id = step_id
        self.trace_metadata = {} if trace_metadata is None else trace_metadata
        self.task_id = task_id
        self.context_id = context_id
        self.node = node
        self.time = _now() if time is None else time
        self.extra = scrub_forwarded(extra) if extra else {}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> RunnerEvent:
        """An event received from elsewhere (another agent's SSE, a JSON line), made safe.

        Known fields are read (text scrubbed, a wrong type replaced by its default); every
        other field goes to ``extra``, kept and scrubbed by value. In ``trace_metadata``
        the failure fields are kept by value and the rest passes the evidence allow-list.
        """
        known = {f.name for f in fields(cls)}
        extra = {k: v for k, v in data.items() if k not in known}
        upstream_extra = data.get("extra")
        if isinstance(upstream_extra, Mapping):
            extra = {**upstream_extra, **extra}
        meta = data.get("trace_metadata")
        metadata: dict[str, object] = {}
        if isinstance(meta, Mapping):
            kept = {k: meta[k] for k in _FAILURE_KEYS if k in meta}
            rest = {k: v for k, v in meta.items() if k not in _FAILURE_KEYS}
            metadata = {**scrub_forwarded(kept), **scrub_evidence(rest)}
        raw_round = data.get("round")
        raw_time = data.get("time")
        return cls(
            type=_text(data.get("type")) or "unknown",
            stage=_text(data.get("stage")) or "unknown",
            run_id=_text(data.get("run_id")) or "",
            round=raw_round
            if isinstance(raw_round, int) and not isinstance(raw_round, bool)
            else 0,
            tool=_text(data.get("tool")),
            step_id=_text(data.get("step_id")),
            trace_metadata=metadata,
            task_id=_text(data.get("task_id")),
            context_id=_text(data.get("context_id")),
            node=_text(data.get("node")),
            time=float(raw_time) if isinstance(raw_time, int | float) else time.time(),
            extra=extra,
        )


def _text(value: object) -> str | None:
    return None if value is None else scrub_public_text(str(value), max_length=200)


def _json_default(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return str(value)


_ENCODER: Final = json.JSONEncoder(default=_json_default)
"""The reference encoder: what ``event_to_json`` gives for any event (the slow path)."""

_MAPPING: Final = _json.make_encoder(
    None, _json_default, encode_basestring_ascii, None, ": ", ", ", False, False, True
)
"""json's C encoder, made once (``JSONEncoder.encode`` makes one per call), for a
non-empty ``trace_metadata`` or ``extra``; no cycle check (a cycle ends in the
reference encoder's ValueError)."""

_LIMIT: Final = 1.8e308  # above the largest float: inf, -inf and nan fail ``-_LIMIT < t < _LIMIT``


class _Unusual(Exception):
    """A field the fast path does not encode as ``json.dumps`` would: use the reference."""


def _mapping_json(value: object) -> str:
    if value.__class__ is not dict:
        raise _Unusual
    return "{}" if not value else "".join(_MAPPING(value, 0))


def _fast_json(
    event: RunnerEvent,
    _s: Callable[[str], str] = encode_basestring_ascii,
    _float: Callable[[float], str] = float.__repr__,
    _int: Callable[[int], str] = int.__repr__,
) -> str:
    """``event_to_json`` for the usual event (every field of its declared type, ``time``
    finite, the two mappings plain dicts); raises for anything else."""
    tool, step_id, task_id, context_id, node = (
        event.tool,
        event.step_id,
        event.task_id,
        event.context_id,
        event.node,
    )
    when, number = event.time, event.round
    if not -_LIMIT < when < _LIMIT or number is True or number is False:
        raise _Unusual
    meta, extra = event.trace_metadata, event.extra
    meta_json = "{}" if meta.__class__ is dict and not meta else _mapping_json(meta)
    extra_json = "{}" if extra.__class__ is dict and not extra else _mapping_json(extra)
    return (
        f'{{"type": {_s(event.type)}, "stage": {_s(event.stage)}, '
        f'"run_id": {_s(event.run_id)}, "round": {_int(number)}, '
        f'"tool": {"null" if tool is None else _s(tool)}, '
        f'"step_id": {"null" if step_id is None else _s(step_id)}, '
        f'"trace_metadata": {meta_json}, '
        f'"task_id": {"null" if task_id is None else _s(task_id)}, '
        f'"context_id": {"null" if context_id is None else _s(context_id)}, '
        f'"node": {"null" if node is None else _s(node)}, '
        f'"time": {_float(when)}, "extra": {extra_json}}}'
    )


def _reference_json(event: RunnerEvent) -> str:
    return _ENCODER.encode(
        {
            "type": event.type,
            "stage": event.stage,
            "run_id": event.run_id,
            "round": event.round,
            "tool": event.tool,
            "step_id": event.step_id,
            "trace_metadata": event.trace_metadata,
            "task_id": event.task_id,
            "context_id": event.context_id,
            "node": event.node,
            "time": event.time,
            "extra": event.extra,
        }
    )


def event_to_json(event: RunnerEvent) -> str:
    """The text of ``json.dumps(asdict(event))``: one JSON object, ASCII only (other
    characters escaped as ``json.dumps`` does), no newline; made without ``asdict``'s
    deep copy. A value JSON has no form for is written as ``json.dumps(...,
    default=...)`` would: a mapping as an object, a tuple or set as a list, anything
    else as its ``str``; a cycle raises ``ValueError``."""
    try:
        return _fast_json(event)
    except Exception:  # an unusual field (or a cycle): the reference encoder decides
        return _reference_json(event)


def failure_metadata(record: FailureRecord) -> dict[str, object]:
    """``trace_metadata`` for a failure: ``failure_reason``, ``error_code``, ``retryable``,
    ``message``, then the record's evidence (``http_status`` among it when known)."""
    return {
        "failure_reason": record.reason,
        "error_code": record.error_code.value,
        "retryable": record.retryable,
        "message": record.message,
        **record.evidence,
    }


EventCallback: TypeAlias = Callable[[RunnerEvent], Awaitable[None] | None]
"""Receives each ``RunnerEvent``; may be a plain or an ``async`` function."""


class Subscription:
    """One subscriber of an ``EventBus``: its callback, bounded queue and counters.

    A callback with a ``flush()`` method has it called each time the queue empties (a
    JSON-lines file is written once per burst of events).
    ``delivered`` counts events its callback returned from, ``failed`` those it raised
    on, ``dropped`` those never given to it because its queue was full (``maxsize``
    events waiting). ``close()`` (or ``bus.unsubscribe``) stops it; waiting events are
    dropped.
    """

    __slots__ = (
        "_asynchronous",
        "_loop",
        "_queue",
        "_scheduled",
        "_task",
        "callback",
        "closed",
        "delivered",
        "dropped",
        "failed",
        "inline",
        "maxsize",
        "name",
    )

    def __init__(
        self, callback: EventCallback, *, maxsize: int, name: str, inline: bool = False
    ) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize!r}")
        self.callback = callback
        self.inline = inline
        self.maxsize = maxsize
        self.name = name
        self.delivered = 0
        self.failed = 0
        self.dropped = 0
        self.closed = False
        self._queue: deque[RunnerEvent] = deque()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = False
        self._asynchronous = inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(
            type(callback).__call__
        )

    @property
    def pending(self) -> int:
        """Events waiting in the queue (not counting one being delivered)."""
        return len(self._queue)

    @property
    def busy(self) -> bool:
        """Events wait, or one is being delivered."""
        return bool(self._queue) or (self._task is not None and not self._task.done())

    @property
    def reader(self) -> asyncio.Task[None] | None:
        """The task delivering this subscriber's events while it has some, else None."""
        task = self._task
        return task if task is not None and not task.done() else None

    def offer(self, event: RunnerEvent) -> None:
        """Queue ``event`` (or count it dropped); never blocks, never raises."""
        if self.closed:
            return
        if self.inline:
            self._deliver_inline(event)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another thread (a sync flow node): hand it to the loop
            if self._loop is None or self._loop.is_closed():
                self.dropped += 1
                return
            self._loop.call_soon_threadsafe(self.offer, event)
            return
        self._offer(event, loop)

    def _offer(self, event: RunnerEvent, loop: asyncio.AbstractEventLoop) -> None:
        """``offer`` on the running ``loop`` (the bus found it already)."""
        if self.closed:
            return
        if self.inline:
            self._deliver_inline(event)
            return
        if len(self._queue) >= self.maxsize:
            self.dropped += 1
            return
        self._queue.append(event)
        if not self._asynchronous:  # a plain function: one loop callback per burst
            if not self._scheduled or self._loop is not loop:
                self._loop = loop
                self._scheduled = True
                loop.call_soon(self._drain_now)
            return
        task = self._task
        if task is None or task.done() or self._loop is not loop:
            # a reader per burst: it ends when the queue is empty, so none is left behind
            self._loop = loop
            self._task = loop.create_task(self._drain(), name=f"llamon-events-{self.name}")

    def _drain_now(self) -> None:
        """Deliver what waits to a plain-function subscriber (a loop callback)."""
        self._scheduled = False
        queue = self._queue
        writer = self.callback
        if isinstance(writer, _JsonLines):  # the whole burst in one write
            if queue and not self.closed:
                events = list(queue)
                queue.clear()
                failed = writer.write_all(events, self.name)
                self.delivered += len(events) - failed
                self.failed += failed
            self._after_burst()
            return
        while queue and not self.closed:
            event = queue.popleft()
            try:
                maybe = self.callback(event)
                if maybe is not None and inspect.isawaitable(maybe):  # an awaitable: async
                    self._asynchronous = True
                    self._task = asyncio.get_running_loop().create_task(self._drain(maybe))
                    return
                self.delivered += 1
            except Exception as exc:
                self._raised(exc, event)
        self._after_burst()

    def _deliver_inline(self, event: RunnerEvent) -> None:
        try:
            self.callback(event)
            self.delivered += 1
        except Exception as exc:
            self._raised(exc, event)

    def _raised(self, exc: Exception, event: RunnerEvent) -> None:
        """Count and log (by type only) a subscriber that raised on ``event``."""
        self.failed += 1
        logger.warning(
            "event subscriber %s raised %s on %s; ignored",
            self.name,
            type(exc).__name__,
            event.type,
        )

    async def _drain(self, first: Awaitable[object] | None = None) -> None:
        queue = self._queue
        if first is not None:
            try:
                await first
                self.delivered += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.failed += 1
                logger.warning("event subscriber %s raised %s", self.name, type(exc).__name__)
        while queue and not self.closed:
            event = queue.popleft()
            try:
                maybe = self.callback(event)
                if maybe is not None and inspect.isawaitable(maybe):
                    await maybe
                self.delivered += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._raised(exc, event)
        self._after_burst()

    def _after_burst(self) -> None:
        flush = getattr(self.callback, "flush", None)
        if flush is not None and not self.closed:
            try:
                flush()
            except Exception as exc:
                logger.warning(
                    "event subscriber %s: flush raised %s", self.name, type(exc).__name__
                )

    def close(self) -> None:
        """Stop delivering; what waits is dropped (not counted)."""
        self.closed = True
        self._queue.clear()
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(RuntimeError):  # its loop is gone
                task.cancel()


class _JsonLines:
    """Writes one ``json.dumps(asdict(event))`` per line to a stream (``event_to_json``),
    each burst of events in one ``write`` (``write_all``, called by its subscription);
    flushed when the subscriber's queue empties, at most every ``JSONL_FLUSH_EVERY``
    seconds (a later flush is scheduled), and at once by ``flush(force=True)``."""

    __slots__ = ("_last", "_timer", "close_after", "stream")

    def __init__(self, stream: IO[str], *, close_after: bool) -> None:
        self.stream = stream
        self.close_after = close_after
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def __call__(self, event: RunnerEvent) -> None:
        self.stream.write(event_to_json(event) + "\n")

    def write_all(self, events: list[RunnerEvent], name: str) -> int:
        """Write ``events``, one line each, in one ``write``; how many failed (an event
        that cannot be encoded is left out and logged; a failed write fails them all)."""
        try:
            lines = [_fast_json(event) for event in events]
        except Exception:  # an unusual event among them: one at a time
            lines = []
            for event in events:
                try:
                    lines.append(event_to_json(event))
                except Exception as exc:
                    logger.warning(
                        "event subscriber %s raised %s on %s; ignored",
                        name,
                        type(exc).__name__,
                        event.type,
                    )
        failed = len(events) - len(lines)
        if lines:
            lines.append("")
            try:
                self.stream.write("\n".join(lines))
            except Exception as exc:
                logger.warning(
                    "event subscriber %s raised %s on %s; ignored",
                    name,
                    type(exc).__name__,
                    events[0].type,
                )
                return len(events)
        return failed

    def flush(self, *, force: bool = False) -> None:
        wait = JSONL_FLUSH_EVERY - (time.monotonic() - self._last)
        if force or wait <= 0:
            self._flush_now()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(wait, self._flush_now)

    def _flush_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._last = time.monotonic()
        if not self.stream.closed:
            try:
                self.stream.flush()
            except Exception as exc:  # a full disk, a closed pipe: never the run's problem
                logger.warning("JSON-lines events: flush raised %s", type(exc).__name__)

    def close(self) -> None:
        self._flush_now()
        if self.close_after:
            self.stream.close()


class EventBus:
    """Fans ``RunnerEvent``\\s out to subscribers (see the module docstring).

    ``active`` is true while it has a subscriber: emitters test it before building an
    event. ``publish`` never blocks and never raises.
    """

    __slots__ = ("_loop", "_subscriptions", "active", "maxsize")

    def __init__(self, *, maxsize: int = DEFAULT_QUEUE_SIZE) -> None:
        self.maxsize = maxsize
        self.active = False
        self._subscriptions: tuple[Subscription, ...] = ()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def subscriptions(self) -> tuple[Subscription, ...]:
        """The current subscribers, in the order they subscribed."""
        return self._subscriptions

    @property
    def dropped(self) -> int:
        """Events dropped across the current subscribers (queues full)."""
        return sum(sub.dropped for sub in self._subscriptions)

    def subscribe_inline(
        self, callback: Callable[[RunnerEvent], None], *, name: str | None = None
    ) -> Subscription:
        """Call ``callback(event)`` in line, inside ``publish``: only for a plain function
        that never blocks and costs O(1) (an in-memory index such as the SSE route's
        log). It has no queue; an exception is logged and counted, never raised. An
        ``async`` function raises ``TypeError``."""
        if inspect.iscoroutinefunction(callback):
            raise TypeError("subscribe_inline takes a plain function; use subscribe()")
        label = name or getattr(callback, "__name__", None) or type(callback).__name__
        sub = Subscription(callback, maxsize=1, name=str(label), inline=True)
        self._subscriptions = (*self._subscriptions, sub)
        self.active = True
        return sub

    def subscribe(
        self, callback: EventCallback, *, maxsize: int | None = None, name: str | None = None
    ) -> Subscription:
        """Call ``callback(event)`` (plain or ``async``) for each event from now on.

        Events wait in a queue of ``maxsize`` (default: the bus's); when it is full further
        ones are dropped for this subscriber and counted in ``Subscription.dropped``.
        """
        label = name or getattr(callback, "__name__", None) or type(callback).__name__
        sub = Subscription(
            callback, maxsize=self.maxsize if maxsize is None else maxsize, name=str(label)
        )
        self._subscriptions = (*self._subscriptions, sub)
        self.active = True
        return sub

    def subscribe_jsonl(
        self,
        target: str | os.PathLike[str] | IO[str],
        *,
        maxsize: int | None = None,
    ) -> Subscription:
        """Write each event as one JSON line to ``target``: a path (appended to, created
        if missing; closed on ``unsubscribe``) or an open text stream (left open)."""
        if isinstance(target, str | os.PathLike):
            stream: IO[str] = open(target, "a", encoding="utf-8")  # noqa: SIM115 - kept open
            writer = _JsonLines(stream, close_after=True)
        else:
            writer = _JsonLines(target, close_after=False)
        return self.subscribe(writer, maxsize=maxsize, name="jsonl")

    def unsubscribe(self, subscription: Subscription) -> None:
        """Stop ``subscription`` and remove it (a JSON-lines file is closed)."""
        subscription.close()
        self._subscriptions = tuple(s for s in self._subscriptions if s is not subscription)
        self.active = bool(self._subscriptions)
        writer = subscription.callback
        if isinstance(writer, _JsonLines):
            writer.close()

    def publish(self, event: RunnerEvent) -> None:
        """Queue ``event`` for every subscriber; never blocks, never raises. From a thread
        without an event loop, the event is handed to the loop the bus last published on
        (dropped, and counted, if there is none)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            known = self._loop
            if known is not None and not known.is_closed():
                known.call_soon_threadsafe(self.publish, event)
            else:
                for sub in self._subscriptions:
                    sub.dropped += 1
            return
        self._loop = loop
        for sub in self._subscriptions:
            if sub.inline:  # straight to it (one call less on the hot path)
                if not sub.closed:
                    sub._deliver_inline(event)
                continue
            try:
                sub._offer(event, loop)
            except Exception:  # pragma: no cover - offer is written not to raise
                sub.dropped += 1

    async def flush(self, within: float = 5.0) -> bool:
        """Wait until every subscriber has been given everything published so far, then
        flush the JSON-lines files. Returns False if ``within`` seconds passed first (a
        subscriber is stuck)."""
        deadline = time.monotonic() + within
        done = True
        while True:
            loop = asyncio.get_running_loop()
            readers = [
                reader
                for sub in self._subscriptions
                if not sub.closed and (reader := sub.reader) is not None
                if reader.get_loop() is loop
            ]
            waiting = any(sub.pending for sub in self._subscriptions if not sub.closed)
            if not readers and not waiting:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                done = False
                break
            if readers:
                await asyncio.wait(readers, timeout=left)
            else:
                await asyncio.sleep(0)  # plain-function subscribers: their loop callback
        for sub in self._subscriptions:
            if isinstance(sub.callback, _JsonLines):
                sub.callback.flush(force=True)
        return done

    async def aclose(self) -> None:
        """Flush (bounded), then unsubscribe everyone."""
        await self.flush(within=1.0)  # a stuck subscriber is cancelled below
        for sub in self._subscriptions:
            self.unsubscribe(sub)


@dataclass(frozen=True, slots=True)
class EventScope:
    """The bus events go to here, and the task they belong to (``event_scope``); ``loop``
    is the event loop the scope was opened on (events emitted from a worker thread, such
    as a sync flow node's, are handed to it)."""

    bus: EventBus
    task_id: str | None = None
    context_id: str | None = None
    loop: asyncio.AbstractEventLoop | None = None


_scope: ContextVar[EventScope | None] = ContextVar("llamon_event_scope", default=None)


def current_scope() -> EventScope | None:
    """The innermost ``event_scope`` around the caller, or None."""
    return _scope.get()


class event_scope:  # noqa: N801 - used like a function: ``with event_scope(bus):``
    """Within the block (and the tasks it starts), ``emit`` sends to ``bus``, stamped with
    ``task_id`` and ``context_id``; ``as`` gives the ``EventScope``."""

    __slots__ = ("_token", "scope")

    def __init__(
        self, bus: EventBus, *, task_id: str | None = None, context_id: str | None = None
    ) -> None:
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self.scope = EventScope(bus, task_id, context_id, loop)
        self._token: Token[EventScope | None] | None = None

    def __enter__(self) -> EventScope:
        self._token = _scope.set(self.scope)
        return self.scope

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _scope.reset(self._token)
            self._token = None


def observed() -> bool:
    """Whether an event emitted here would reach anyone (test it before building one)."""
    scope = _scope.get()
    return scope is not None and scope.bus.active


def emit(
    type_: str,
    stage: str,
    *,
    run_id: str = "",
    round_number: int = 0,
    tool: str | None = None,
    step_id: str | None = None,
    node: str | None = None,
    metadata: Mapping[str, object] | None = None,
    extra: Mapping[str, object] | None = None,
) -> None:
    """Publish one event to the current scope's bus (nothing when none listens).

    ``extra``: fields of your own beyond the model's (kept by consumers that forward the
    event, scrubbed by value)."""
    scope = _scope.get()
    if scope is None or not scope.bus.active:
        return
    event = RunnerEvent(
        type_,
        str(stage),
        run_id,
        round_number,
        tool,
        step_id,
        metadata or {},
        scope.task_id,
        scope.context_id,
        node,
        extra=extra or {},
    )
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a worker thread: the scope's loop publishes it
        if scope.loop is not None and not scope.loop.is_closed():
            scope.loop.call_soon_threadsafe(scope.bus.publish, event)
        return
    scope.bus.publish(event)
