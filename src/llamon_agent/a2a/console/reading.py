"""What the console pages show, read from the stores: never a write, never a prune.

* ``ConsoleSources``: the task store, the failure store and how to read a task's events.
* ``failure_filter(params)``: the ``FailureQuery`` of a failures page's ``code``,
  ``since`` and ``until`` parameters (``since`` defaults to ``24h``; durations and ISO
  times as ``llamon failures --since``); ``BadParameter`` names the parameter otherwise.
* ``failures_view``, ``task_view``: the data of the failures page and of a task's page.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

from a2a.server.tasks import TaskStore
from a2a.types import DataPart, FilePart, Task, TextPart

from llamon_agent.a2a.console.chart import Chart, failure_chart
from llamon_agent.a2a.events_route import TaskEventLog
from llamon_agent.a2a.stores.failures import FailureQuery, FailureStore, StoredFailure
from llamon_agent.a2a.stores.failures_cli import operator_action, parse_since
from llamon_agent.a2a.stores.failures_tasks import error_data_of, live_tasks
from llamon_agent.a2a.stores.task_events import TaskEventStore
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.events import EventBus, RunnerEvent

__all__ = [
    "DEFAULT_SINCE",
    "SINCE_CHOICES",
    "BadParameter",
    "ConsoleSources",
    "EventReader",
    "FailureFilter",
    "failure_filter",
    "failures_view",
    "live_view",
    "moment_text",
    "pretty_json",
    "served_event_reader",
    "task_view",
]

EventReader = Callable[[str], Awaitable[Sequence[RunnerEvent]]]
"""A task id -> the task's kept events, oldest first."""

_BUS_FLUSH_WITHIN: Final = 0.5
"""Seconds a task page waits for the serving process's events to reach the store."""


def served_event_reader(
    store: TaskEventStore | None, bus: EventBus | None, log: TaskEventLog | None
) -> EventReader | None:
    """Where a served app's console reads a task's events: the task event store (after
    the events this process published so far were handed to it and written, so a task page
    shows every event published before it was opened), else the bus's per-task log of
    recent events (``log``), else nowhere (``None``: the page says none are kept)."""
    if store is not None:
        kept = store

        async def from_store(task_id: str) -> Sequence[RunnerEvent]:
            if bus is not None:
                await bus.flush(within=_BUS_FLUSH_WITHIN)
            await kept.flush()
            return await kept.for_task(task_id)

        return from_store
    if log is not None:
        recent = log

        async def from_log(task_id: str) -> Sequence[RunnerEvent]:
            return recent.kept(task_id)

        return from_log
    return None


DEFAULT_SINCE: Final = "24h"
SINCE_CHOICES: Final = ("1h", "6h", "24h", "7d", "30d")
"""The ranges the failures page offers (any ``llamon failures --since`` value works)."""
BUCKETS: Final = 24
RECENT: Final = 50
LIVE: Final = 100


class BadParameter(ValueError):
    """A page parameter the console cannot use; ``parameter`` names it."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


@dataclass(frozen=True)
class ConsoleSources:
    """Where the console reads: tasks, failures, and (``None``: none kept) events."""

    task_store: TaskStore
    failures: FailureStore
    events: EventReader | None = None


@dataclass(frozen=True)
class FailureFilter:
    """A failures page's filter: the query and the values to show back in the form."""

    query: FailureQuery
    code: str = ""
    since: str = DEFAULT_SINCE
    until: str = ""


def failure_filter(params: Mapping[str, str], now: datetime | None = None) -> FailureFilter:
    """The filter for ``code``/``since``/``until``; ``BadParameter`` naming a bad one."""
    code = params.get("code", "").strip()
    since = params.get("since", "").strip() or DEFAULT_SINCE
    until = params.get("until", "").strip()
    if code and code not in ErrorCode.__members__:
        known = ", ".join(member.value for member in ErrorCode)
        raise BadParameter("code", f"code: unknown errorCode {code!r}; use one of {known}")
    try:
        start = parse_since(since, option="since", now=now)
        end = parse_since(until, option="until", now=now) if until else None
    except ValueError as exc:
        parameter = "until" if str(exc).startswith("until") else "since"
        raise BadParameter(parameter, str(exc)) from None
    if end is not None and end <= start:
        raise BadParameter("until", "until: must be after since")
    query = FailureQuery(since=start, until=end, code=code or None, limit=RECENT)
    return FailureFilter(query, code, since, until)


@dataclass(frozen=True)
class ReasonGroup:
    """How many failures had ``reason`` (of one errorCode) and what an operator does."""

    reason: str
    count: int
    action: str


@dataclass(frozen=True)
class CodeGroup:
    """One errorCode's failures, by reason."""

    code: str
    count: int
    reasons: list[ReasonGroup]


@dataclass(frozen=True)
class FailuresView:
    """The failures page: the chart, the groups and the newest failures."""

    chart: Chart
    groups: list[CodeGroup]
    recent: list[StoredFailure]
    actions: dict[str, str] = field(default_factory=dict)


async def failures_view(failures: FailureStore, chosen: FailureFilter) -> FailuresView:
    """Read the failures page's data for ``chosen``."""
    query = chosen.query
    histogram = await failures.histogram(query, buckets=BUCKETS)
    groups: list[CodeGroup] = []
    for counted in await failures.group_by("error_code", query):
        if counted.value is None:
            continue
        by_reason = await failures.group_by("reason", replace(query, code=counted.value))
        reasons = [
            ReasonGroup(r.value, r.count, operator_action(r.value) or "-")
            for r in by_reason
            if r.value is not None
        ]
        groups.append(CodeGroup(counted.value, counted.count, reasons))
    recent = (await failures.query(query)).rows
    actions = {row.reason: operator_action(row.reason, row.operator_action) for row in recent}
    return FailuresView(failure_chart(histogram), groups, recent, actions)


@dataclass(frozen=True)
class LiveTask:
    """A running task's row."""

    id: str
    context_id: str
    state: str
    updated: str
    artifacts: int


async def live_view(store: TaskStore) -> list[LiveTask]:
    """The running tasks, newest first."""
    return [
        LiveTask(
            task.id,
            task.context_id,
            task.status.state.value,
            _moment(task.status.timestamp),
            len(task.artifacts or []),
        )
        for task in await live_tasks(store, limit=LIVE)
    ]


@dataclass(frozen=True)
class ArtifactView:
    """One artifact: its name and each part as text (data parts as indented JSON)."""

    name: str
    parts: list[tuple[str, str]]


@dataclass(frozen=True)
class EventView:
    """One event of a task's timeline."""

    time: str
    type: str
    stage: str
    where: str
    details: str


@dataclass(frozen=True)
class TaskView:
    """A task's page."""

    task: Task
    state: str
    updated: str
    artifacts: list[ArtifactView]
    error: list[tuple[str, str]] | None
    failures: list[StoredFailure]
    actions: dict[str, str]
    events: list[EventView] | None
    trace_id: str


def pretty_json(value: object) -> str:
    """``value`` as indented JSON text (anything not JSON as its ``str``)."""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)


def _moment(stamp: str | float | None) -> str:
    if stamp is None or stamp == "":
        return "-"
    try:
        moment = (
            datetime.fromtimestamp(stamp, UTC)
            if isinstance(stamp, float | int)
            else datetime.fromisoformat(stamp)
        )
    except (ValueError, OverflowError, OSError):
        return str(stamp)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _part_text(part: Any) -> tuple[str, str]:
    root = part.root
    if isinstance(root, TextPart):
        return "text", root.text
    if isinstance(root, DataPart):
        return "data", pretty_json(root.data)
    if isinstance(root, FilePart):
        file = root.file
        return "file", f"{getattr(file, 'name', None) or '-'} ({file.mime_type or '-'})"
    return "part", "-"


def _event(event: RunnerEvent) -> EventView:
    where = " ".join(
        f"{label}={value}"
        for label, value in (("tool", event.tool), ("node", event.node), ("step", event.step_id))
        if value
    )
    details: dict[str, object] = dict(event.trace_metadata)
    if event.extra:
        details["extra"] = dict(event.extra)
    shown = pretty_json(details) if details else ""
    return EventView(_moment(event.time), event.type, event.stage, where or "-", shown)


def _trace_id(events: Sequence[RunnerEvent]) -> str:
    for event in events:
        trace = event.trace_metadata.get("trace_id")
        if isinstance(trace, str) and trace:
            return trace
    return "-"


async def task_view(sources: ConsoleSources, task_id: str) -> TaskView | None:
    """A task's page, or ``None`` when the store has no such task."""
    task = await sources.task_store.get(task_id)
    if task is None:
        return None
    error = error_data_of(task)
    failures = (await sources.failures.query(FailureQuery(task_id=task_id))).rows
    events = None if sources.events is None else list(await sources.events(task_id))
    return TaskView(
        task=task,
        state=task.status.state.value,
        updated=_moment(task.status.timestamp),
        artifacts=[
            ArtifactView(a.name or a.artifact_id, [_part_text(p) for p in a.parts])
            for a in task.artifacts or []
        ],
        error=None
        if error is None
        else [(k, v if isinstance(v, str) else pretty_json(v)) for k, v in error.items()],
        failures=failures,
        actions={row.reason: operator_action(row.reason, row.operator_action) for row in failures},
        events=None if events is None else [_event(e) for e in events],
        trace_id=_trace_id(events or []),
    )


def moment_text(moment: datetime) -> str:
    """A stored time as the pages show it (UTC, seconds)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
