"""``llamon failures``, ``llamon tasks`` and ``llamon task ID``: what a store holds.

What the operator sees:

* ``llamon failures [--since 1h] [--code C] [--reason R] [--tool T] ... [--by reason]``:
  the newest failures as a table (id, time, task, agent, errorCode, reason, stage, tool or
  node, incident id, and the operator action the reason catalog gives), or with ``--by``
  counts by one column; ``--json`` prints the same as one JSON document. The id is
  what ``llamon triage --failure ID`` takes.
* ``llamon tasks [--state failed]``: the newest tasks, with a failed one's errorCode and
  reason. ``llamon task ID``: its status, artifacts, the error data the caller received,
  the failure record the store kept, the trace id of its run (when OpenTelemetry was
  recording) and its runner events in order (time, type, stage, node or tool, reason or
  errorCode); ``--json`` prints them all, the events as ``--events-jsonl`` writes them.
* The store is the one ``llamon serve`` writes: ``--database-url`` (or
  ``LLAMON_DATABASE_URL``) for PostgreSQL, else ``tasks.db`` under ``--home`` (or
  ``LLAMON_HOME``, ``~/.llamon``). Reading never prunes or changes a row.
* Bad input (an unknown errorCode, a ``--since`` that is not a duration or a time) is one
  line naming the option, exit status 2; a store that cannot be opened, exit status 1;
  never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Final, NoReturn, TypeVar

import typer
from a2a.types import Task
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from llamon_agent.a2a.stores.failures import (
    GROUP_FIELDS,
    FailureCount,
    FailureQuery,
    FailureRetention,
    StoredFailure,
)
from llamon_agent.a2a.stores.failures_tasks import TASK_STATES, error_data_of, recent_tasks
from llamon_agent.a2a.stores.open import SQLITE_FILENAME, Stores, open_stores
from llamon_agent.a2a.stores.retention import EventRetention
from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.events import RunnerEvent, event_to_json
from llamon_agent.core.scrub import scrub_text
from llamon_agent.core.settings import DATABASE_URL_ENV, HOME_ENV, llamon_home

__all__ = [
    "SHOWN_EVENTS",
    "event_json",
    "failure_json",
    "failures_command",
    "operator_action",
    "parse_since",
    "print_events",
    "read_task",
    "task_command",
    "tasks_command",
    "with_store",
]

T = TypeVar("T")

_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_BY_ALIASES: Final = {"code": "error_code", "errorCode": "error_code"}
_KEEP_ALL: Final = FailureRetention(max_age=None, max_rows=None)
"""Reading never prunes: the serving process applies the retention."""
_KEEP_ALL_EVENTS: Final = EventRetention(max_age=None, max_rows=None)
SHOWN_EVENTS: Final = 1000
"""The most events ``llamon task ID`` shows (the newest)."""

DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url", envvar=DATABASE_URL_ENV, help="PostgreSQL DSN of the shared store."
    ),
]
Home = Annotated[
    Path | None,
    typer.Option("--home", envvar=HOME_ENV, help="Directory of tasks.db (default ~/.llamon)."),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


def _fail(command: str, message: str, code: int) -> NoReturn:
    typer.echo(f"llamon {command}: {message}", err=True)
    raise typer.Exit(code)


def parse_since(value: str, *, option: str = "--since", now: datetime | None = None) -> datetime:
    """``value`` as a UTC time: a duration before ``now`` (``90s``, ``15m``, ``1h``, ``2d``,
    ``1w``) or an ISO 8601 time (naive: UTC). ``ValueError`` naming ``option`` otherwise."""
    moment = now or datetime.now(UTC)
    match = _DURATION.match(value)
    if match:
        return moment - timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(
            f"{option} {value!r} is neither a duration (30s, 15m, 1h, 2d, 1w) nor an ISO time"
            " (2026-11-30T12:00:00Z)"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def operator_action(reason: str, stored: str | None = None) -> str:
    """What an operator should do about ``reason``: the catalog's word, else what the
    failure carried (a reason from another agent), else ``""``."""
    spec = reason_spec(reason)
    return spec.operator_action if spec is not None else (stored or "")


async def with_store(
    command: str,
    database_url: str | None,
    home: Path | None,
    use: Callable[[Stores], Awaitable[T]],
) -> T:
    """Open the store ``llamon serve`` writes (PostgreSQL at ``database_url``, else the
    SQLite file under ``home``), only to read (nothing is pruned), run ``use`` on it and
    close it; a store that cannot be found or opened prints one line naming ``command``
    and exits with status 1."""
    try:
        if database_url:
            stores = await open_stores(
                "postgres",
                dsn=database_url,
                failure_retention=_KEEP_ALL,
                events_retention=_KEEP_ALL_EVENTS,
            )
        else:
            directory = home if home is not None else llamon_home()
            if not (directory / SQLITE_FILENAME).is_file():
                _fail(
                    command,
                    f"no task store at {directory / SQLITE_FILENAME}.\n"
                    f"  Pass --home (or set {HOME_ENV}) to the directory `llamon serve` used,"
                    f" or --database-url for PostgreSQL.",
                    1,
                )
            stores = await open_stores(
                "sqlite",
                home=directory,
                failure_retention=_KEEP_ALL,
                events_retention=_KEEP_ALL_EVENTS,
            )
    except typer.Exit:
        raise
    except ImportError as exc:
        _fail(command, str(exc), 1)
    except ValueError as exc:  # a DSN that is not PostgreSQL's; a newer schema (masked)
        _fail(command, f"{exc}.", 2 if database_url else 1)
    except Exception as exc:
        detail = scrub_text(str(exc).splitlines()[0] if str(exc) else "", max_length=200)
        _fail(command, f"cannot open the task store ({type(exc).__name__}: {detail}).", 1)
    try:
        return await use(stores)
    finally:
        await stores.close()


def _print_uncut(console: Console, table: Table) -> None:
    """Print ``table`` no narrower than its cells (a pipe is 80 columns wide)."""
    needed = Measurement.get(console, console.options.update_width(10_000), table).maximum
    console.width = max(console.width, needed)
    console.print(table)


def _short_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


# --- llamon failures ---------------------------------------------------------------------------


def failure_json(row: StoredFailure) -> dict[str, object]:
    """A stored failure as ``--json`` prints it, with the catalog's operator action."""
    line = row.to_dict()
    line["operatorAction"] = operator_action(row.reason, row.operator_action)
    return line


def _count_json(by: str, count: FailureCount) -> dict[str, object]:
    line: dict[str, object] = {"value": count.value, "count": count.count}
    if by == "reason" and count.value is not None:
        line["operatorAction"] = operator_action(count.value)
    return line


def failures_command(
    since: Annotated[
        str | None,
        typer.Option(help="Only failures newer than this: 15m, 1h, 2d or an ISO time."),
    ] = None,
    until: Annotated[str | None, typer.Option(help="Only failures older than this.")] = None,
    code: Annotated[str | None, typer.Option(help="errorCode, e.g. UPSTREAM_TIMEOUT.")] = None,
    reason: Annotated[str | None, typer.Option(help="Reason, e.g. tool_timeout.")] = None,
    stage: Annotated[str | None, typer.Option(help="Stage, e.g. tool_call.")] = None,
    tool: Annotated[str | None, typer.Option(help="Tool name.")] = None,
    agent: Annotated[str | None, typer.Option(help="Agent (card name).")] = None,
    node: Annotated[str | None, typer.Option(help="Flow node.")] = None,
    task: Annotated[str | None, typer.Option("--task", help="One task's failures.")] = None,
    by: Annotated[
        str | None,
        typer.Option(help=f"Count by one column: {', '.join(GROUP_FIELDS)} (or code)."),
    ] = None,
    limit: Annotated[int, typer.Option(help="Rows to show (1-1000).")] = 50,
    as_json: AsJson = False,
    database_url: DatabaseUrl = None,
    home: Home = None,
) -> None:
    """List failed tasks' failures (newest first), or count them with --by."""
    try:
        query = FailureQuery(
            since=parse_since(since) if since else None,
            until=parse_since(until, option="--until") if until else None,
            code=code,
            reason=reason,
            stage=stage,
            tool=tool,
            agent=agent,
            node=node,
            task_id=task,
            limit=limit,
        )
    except ValueError as exc:
        message = str(exc)
        if message.startswith("code:"):
            message = "--code" + message.removeprefix("code:")
        elif message.startswith("limit"):
            message = "--" + message
        _fail("failures", f"{message}.", 2)
    group = _BY_ALIASES.get(by, by) if by else None
    if group is not None and group not in GROUP_FIELDS:
        _fail("failures", f"--by {by!r}: use one of {', '.join(GROUP_FIELDS)} (or code).", 2)

    async def read(stores: Stores) -> tuple[list[StoredFailure], list[FailureCount]]:
        assert stores.failures is not None  # noqa: S101 - open_stores gives one
        if group is not None:
            return [], await stores.failures.group_by(group, query)
        return (await stores.failures.query(query)).rows, []

    rows, counts = asyncio.run(with_store("failures", database_url, home, read))
    console = Console()
    if group is not None:
        if as_json:
            document = {"by": group, "counts": [_count_json(group, c) for c in counts]}
            typer.echo(json.dumps(document, ensure_ascii=False, indent=2))
            return
        _print_counts(console, group, counts)
        return
    if as_json:
        document = {"failures": [failure_json(row) for row in rows]}
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    _print_failures(console, rows)


def _print_counts(console: Console, group: str, counts: list[FailureCount]) -> None:
    table = Table(title=f"failures by {group}")
    table.add_column(group, no_wrap=True)
    table.add_column("count", justify="right", no_wrap=True)
    if group == "reason":
        table.add_column("operator action", no_wrap=True)
    for count in counts:
        cells = [count.value or "-", str(count.count)]
        if group == "reason":
            cells.append((operator_action(count.value) if count.value else "") or "-")
        table.add_row(*cells)
    _print_uncut(console, table)


def _print_failures(console: Console, rows: list[StoredFailure]) -> None:
    if not rows:
        typer.echo("no failures match.")
        return
    table = Table(title=f"failures (newest first, {len(rows)} shown)")
    table.add_column("id", justify="right", no_wrap=True)
    for column in ("time (UTC)", "task", "agent", "errorCode", "reason", "stage", "tool/node"):
        table.add_column(column, no_wrap=True)
    table.add_column("incident", no_wrap=True)
    table.add_column("operator action", no_wrap=True)
    for row in rows:
        table.add_row(
            "-" if row.id is None else str(row.id),
            _short_time(row.time),
            row.task_id,
            row.agent or "-",
            row.error_code,
            row.reason,
            row.stage,
            row.tool or row.node or "-",
            row.incident_id or "-",
            operator_action(row.reason, row.operator_action),
        )
    _print_uncut(console, table)


# --- llamon tasks / llamon task ID ---------------------------------------------------------------


def _task_line(task: Any) -> dict[str, object]:
    data = error_data_of(task) or {}
    return {
        "id": task.id,
        "contextId": task.context_id,
        "state": task.status.state.value,
        "timestamp": task.status.timestamp,
        "errorCode": data.get("errorCode"),
        "errorReason": data.get("errorReason"),
        "artifacts": len(task.artifacts or []),
    }


def tasks_command(
    state: Annotated[
        str | None, typer.Option(help=f"Only tasks in this state: {', '.join(TASK_STATES)}.")
    ] = None,
    limit: Annotated[int, typer.Option(help="Tasks to show (1-1000).")] = 50,
    as_json: AsJson = False,
    database_url: DatabaseUrl = None,
    home: Home = None,
) -> None:
    """List the newest tasks, with a failed task's errorCode and reason."""
    if state is not None and state not in TASK_STATES:
        _fail("tasks", f"--state {state!r}: use one of {', '.join(TASK_STATES)}.", 2)
    if not 1 <= limit <= 1000:
        _fail("tasks", f"--limit {limit}: use 1 to 1000.", 2)

    async def read(stores: Stores) -> list[Any]:
        return await recent_tasks(stores, state=state, limit=limit)

    lines = [
        _task_line(task) for task in asyncio.run(with_store("tasks", database_url, home, read))
    ]
    if as_json:
        typer.echo(json.dumps({"tasks": lines}, ensure_ascii=False, indent=2))
        return
    if not lines:
        typer.echo("no tasks match.")
        return
    table = Table(title=f"tasks (newest first, {len(lines)} shown)")
    for column in ("task", "context", "state", "updated", "errorCode", "reason", "artifacts"):
        table.add_column(column, no_wrap=True)
    for line in lines:
        table.add_row(*("-" if value is None else str(value) for value in line.values()))
    _print_uncut(Console(), table)


def event_json(event: RunnerEvent) -> dict[str, object]:
    """An event as ``--events-jsonl`` writes it (``type``, ``stage``, ``trace_metadata`` ...)."""
    line: dict[str, object] = json.loads(event_to_json(event))
    return line


def _trace_id(events: list[RunnerEvent]) -> str | None:
    """The OpenTelemetry trace id of the task's (last) run, when one was recording."""
    for event in reversed(events):
        trace = event.trace_metadata.get("trace_id")
        if event.type == "task.working" and isinstance(trace, str):
            return trace
    return None


def _outcome(event: RunnerEvent) -> str:
    meta = event.trace_metadata
    reason, code = meta.get("failure_reason"), meta.get("error_code")
    if reason is None and code is None:
        return "-"
    return f"{reason or '-'} / {code or '-'}"


def print_events(console: Console, events: list[RunnerEvent]) -> None:
    """A table of ``events`` (time, type, stage, node/tool, reason / errorCode), oldest
    first; one line saying none are kept when there are none."""
    if not events:
        typer.echo("no events kept for this task.")
        return
    table = Table(title=f"events (oldest first, {len(events)} shown)")
    for column in ("time (UTC)", "type", "stage", "node/tool", "reason / errorCode"):
        table.add_column(column, no_wrap=True)
    for event in events:
        moment = datetime.fromtimestamp(event.time, UTC)
        table.add_row(
            moment.strftime("%H:%M:%S.%f")[:-3],
            event.type,
            event.stage,
            event.node or event.tool or "-",
            _outcome(event),
        )
    _print_uncut(console, table)


async def read_task(
    stores: Stores, task_id: str
) -> tuple[Task | None, list[StoredFailure], list[RunnerEvent]]:
    """One task as the store kept it: the task (``None``: unknown), its failure records
    and its events (the newest ``SHOWN_EVENTS``, oldest first)."""
    assert stores.failures is not None  # noqa: S101 - open_stores gives one
    task = await stores.task_store.get(task_id)
    failures = await stores.failures.query(FailureQuery(task_id=task_id))
    events = await stores.events.for_task(task_id, limit=SHOWN_EVENTS) if stores.events else []
    return task, failures.rows, events


def task_command(
    task_id: Annotated[str, typer.Argument(help="The task id.")],
    as_json: AsJson = False,
    database_url: DatabaseUrl = None,
    home: Home = None,
) -> None:
    """Show one task: status, artifacts, the error data, the failure record and its events."""

    task, failures, events = asyncio.run(
        with_store("task", database_url, home, lambda stores: read_task(stores, task_id))
    )
    if task is None:
        _fail("task", f"no task {task_id!r} in this store.", 1)
    error = error_data_of(task)
    if as_json:
        document = {
            "task": task.model_dump(mode="json", by_alias=True, exclude_none=True),
            "errorData": error,
            "failures": [failure_json(row) for row in failures],
            "traceId": _trace_id(events),
            "events": [event_json(event) for event in events],
        }
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    typer.echo(f"task {task.id}  context {task.context_id}")
    typer.echo(f"state {task.status.state.value}  at {task.status.timestamp or '-'}")
    for artifact in task.artifacts or []:
        body = json.dumps(
            [part.root.model_dump(mode="json", exclude_none=True) for part in artifact.parts],
            ensure_ascii=False,
        )
        typer.echo(f"artifact {artifact.name or artifact.artifact_id}: {body}")
    if error is not None:
        typer.echo("error data: " + json.dumps(error, ensure_ascii=False))
    for row in failures:
        typer.echo("failure record: " + json.dumps(failure_json(row), ensure_ascii=False))
    trace = _trace_id(events)
    if trace is not None:
        typer.echo(f"trace {trace}")
    print_events(Console(), events)
