"""``llamon triage TASK_ID``, ``--failure ID`` and ``--reason R``: what to do about a failure.

What the operator sees:

* ``llamon triage TASK_ID [--home DIR | --database-url DSN]``: the task's failure
  record(s) as the store kept them (errorCode, reason, stage, tool or node, incident id,
  the record's id, message, evidence; every text already scrubbed), the triage guide's row
  for the reason (symptom, where to look first, the fix), the reason catalog's entry
  (operator action, retryable, meaning) and the task's related kept events (those with a
  failure, those of the failing tool or node, and the task's own ``task.*`` events;
  ``--all-events``: every kept event). ``--json`` prints the same as one JSON document.
* ``llamon triage --failure ID``: the same for one failure record, by the id
  ``llamon failures`` shows: its task, that record only (a line says which of the task's
  records it is, and names the others' ids), and the events related to it. ``--json``
  adds ``failureId`` and ``taskFailureIds`` (every record of the task, oldest first).
* ``llamon triage --reason R``: the guide row and the catalog entry, without a store.
* ``--guide FILE`` (repeatable) and ``LLAMON_TRIAGE_GUIDE``: more guide rows, which add to
  or replace the shipped ones by reason (see ``llamon_agent.core.triage``).
* Exit status: 0 when a failure (or the reason) was shown; 1 when the task or the failure
  id is not in the store, the task has no failure record (one line says so and gives its
  state), or the store cannot be opened; 2 for bad input (an unknown ``--reason``, with
  close matches; a ``--failure`` that is not a whole number; a guide file that cannot be
  read; not exactly one of a task id, ``--failure`` and ``--reason``).
"""

from __future__ import annotations

import asyncio
import difflib
import json
import re
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from a2a.types import Task
from rich.console import Console

from llamon_agent.a2a.stores.failures import StoredFailure
from llamon_agent.a2a.stores.failures_cli import (
    AsJson,
    DatabaseUrl,
    Home,
    event_json,
    failure_json,
    print_events,
    read_task,
    with_store,
)
from llamon_agent.a2a.stores.open import Stores
from llamon_agent.core.catalog import ReasonSpec, reason_catalog, reason_spec
from llamon_agent.core.events import RunnerEvent
from llamon_agent.core.triage import TriageGuide, TriageGuideError, TriageRow, triage_guide

__all__ = ["catalog_json", "related_events", "triage_command"]


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(f"llamon triage: {message}", err=True)
    raise typer.Exit(code)


def catalog_json(spec: ReasonSpec) -> dict[str, object]:
    """A catalog entry as JSON (``reason``, ``stage``, ``errorCode``, ``retryable``,
    ``operatorAction``, ``meaning``)."""
    return {
        "reason": spec.reason,
        "stage": str(spec.stage),
        "errorCode": spec.error_code.value,
        "retryable": spec.retryable,
        "operatorAction": spec.operator_action,
        "meaning": spec.meaning,
    }


def related_events(events: list[RunnerEvent], failures: list[StoredFailure]) -> list[RunnerEvent]:
    """The events that tell a failure's story: every ``task.*`` event, every event that
    carries a failure (``failure_reason`` or ``error_code``), and every event of a failing
    tool or node; in the order they happened."""
    tools = {row.tool for row in failures if row.tool}
    nodes = {row.node for row in failures if row.node}
    return [
        event
        for event in events
        if event.type.startswith("task.")
        or "failure_reason" in event.trace_metadata
        or "error_code" in event.trace_metadata
        or (event.tool is not None and event.tool in tools)
        or (event.node is not None and event.node in nodes)
    ]


def _guide(files: list[Path]) -> TriageGuide:
    try:
        return triage_guide(files)
    except TriageGuideError as exc:
        _fail(f"{exc}.", 2)


def _known_reasons(guide: TriageGuide) -> list[str]:
    return list(dict.fromkeys([spec.reason for spec in reason_catalog()] + guide.reasons()))


def _advice(
    guide: TriageGuide, reason: str, error_code: str
) -> tuple[TriageRow | None, str | None]:
    """The row to show for ``reason`` and how it matched (``reason`` or ``errorCode``)."""
    found = guide.row_for(reason, error_code)
    if found is None:
        return None, None
    row, own = found
    return row, ("reason" if own else "errorCode")


def _print_advice(
    reason: str, row: TriageRow | None, matched: str | None, spec: ReasonSpec | None
) -> None:
    if row is None:
        typer.echo(f"triage ({reason}): the guide has no row for this reason.")
    elif matched == "errorCode":
        typer.echo(f"triage ({reason}: no row of its own; the {row.reason} row)")
    else:
        typer.echo(f"triage ({reason})")
    if row is not None:
        typer.echo(f"  symptom:     {row.symptom}")
        typer.echo(f"  look first:  {row.look_first}")
        typer.echo(f"  fix:         {row.fix}")
    if spec is None:
        typer.echo(f"catalog: {reason!r} is not in the reason catalog.")
        return
    retry = "yes" if spec.retryable else "no"
    typer.echo(f"operator action: {spec.operator_action}")
    typer.echo(
        f"catalog: {spec.error_code.value} at stage {spec.stage}, retryable {retry}; {spec.meaning}"
    )


def _triage_json(row: TriageRow | None, matched: str | None) -> dict[str, str] | None:
    return {**row.to_dict(), "matched": matched or ""} if row is not None else None


def _reason_only(reason: str, guide: TriageGuide, as_json: bool) -> None:
    spec = reason_spec(reason)
    if guide.row(reason) is None and spec is None:
        known = _known_reasons(guide)
        close = difflib.get_close_matches(reason, known, n=3, cutoff=0.6)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        _fail(f"--reason {reason!r} is not a known reason{hint} (`llamon errors` lists them).", 2)
    row, matched = _advice(guide, reason, spec.error_code.value if spec else "")
    if as_json:
        document = {
            "reason": reason,
            "triage": _triage_json(row, matched),
            "catalog": catalog_json(spec) if spec else None,
        }
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    _print_advice(reason, row, matched, spec)


def _failure_lines(row: StoredFailure) -> None:
    typer.echo(
        f"failure: {row.error_code} / {row.reason}  stage {row.stage}"
        f"  tool/node {row.tool or row.node or '-'}  incident {row.incident_id or '-'}"
        f"  id {'-' if row.id is None else row.id}"
    )
    typer.echo(f"  message:  {row.message}")
    typer.echo("  evidence: " + json.dumps(dict(row.evidence), ensure_ascii=False, default=str))


_WHOLE_NUMBER = re.compile(r"[0-9]+")
_ONE_OF = "give exactly one of: a task id, --failure ID, --reason R."


def _failure_id(value: str) -> int:
    """``--failure``'s value as a number; exit 2 (bad input) if it is not a whole number."""
    text = value.strip()
    if not _WHOLE_NUMBER.fullmatch(text):
        _fail(
            f"--failure {value!r} is not a failure id (a whole number: the id column of"
            " `llamon failures`).",
            2,
        )
    return int(text)


_TaskRead = tuple[Task | None, list[StoredFailure], list[RunnerEvent]]


async def _read_failure(stores: Stores, failure_id: int) -> tuple[StoredFailure, _TaskRead] | None:
    """The failure ``failure_id`` and its task as ``read_task`` reads it; ``None``: no row."""
    assert stores.failures is not None  # noqa: S101 - open_stores gives one
    row = await stores.failures.get(failure_id)
    if row is None:
        return None
    return row, await read_task(stores, row.task_id)


def _oldest_first(failures: list[StoredFailure]) -> list[StoredFailure]:
    return sorted(failures, key=lambda row: (row.timestamp, row.id or 0))


def _which(row: StoredFailure, of_task: list[StoredFailure]) -> str:
    """The line saying which of its task's failure records ``row`` is."""
    if len(of_task) == 1:
        return f"failure {row.id}: the only failure record of this task"
    position = next(i for i, other in enumerate(of_task, 1) if other.id == row.id)
    others = ", ".join(str(other.id) for other in of_task if other.id != row.id)
    return (
        f"failure {row.id}: {position} of {len(of_task)} failure records of this task"
        f" (oldest first; the others: {others})"
    )


def triage_command(
    task_id: Annotated[
        str | None,
        typer.Argument(help="The failed task's id (or use --failure or --reason)."),
    ] = None,
    failure: Annotated[
        str | None,
        typer.Option(
            "--failure",
            metavar="ID",
            help="Triage one failure record by its id (the id column of `llamon failures`).",
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="Show the guide row and catalog entry of this reason."),
    ] = None,
    guide_files: Annotated[
        list[Path] | None,
        typer.Option(
            "--guide", help="A TOML file of more triage rows (repeatable; wins by reason)."
        ),
    ] = None,
    all_events: Annotated[
        bool, typer.Option("--all-events", help="Show every kept event, not only related.")
    ] = False,
    as_json: AsJson = False,
    database_url: DatabaseUrl = None,
    home: Home = None,
) -> None:
    """Show a failed task's failure, the triage guide's row, the operator action and events."""
    if sum(given is not None for given in (task_id, failure, reason)) != 1:
        _fail(_ONE_OF, 2)
    failure_id = _failure_id(failure) if failure is not None else None
    guide = _guide(list(guide_files or []))
    if reason is not None:
        _reason_only(reason, guide, as_json)
        return
    if failure_id is not None:
        _triage_failure(failure_id, guide, all_events, as_json, database_url, home)
        return
    assert task_id is not None  # noqa: S101 - checked above
    wanted = task_id
    task, failures, events = asyncio.run(
        with_store("triage", database_url, home, lambda stores: read_task(stores, wanted))
    )
    if task is None and not failures:
        _fail(f"no task {task_id!r} in this store.", 1)
    if not failures:
        state = task.status.state.value if task is not None else "-"
        _fail(f"task {task_id} has no failure record (state {state}); nothing to triage.", 1)
    _show(task_id, task, _oldest_first(failures), events, guide, all_events, as_json=as_json)


def _triage_failure(
    failure_id: int,
    guide: TriageGuide,
    all_events: bool,
    as_json: bool,
    database_url: str | None,
    home: Path | None,
) -> None:
    """``llamon triage --failure ID``: that record with its task's state and events."""
    found = asyncio.run(
        with_store("triage", database_url, home, lambda s: _read_failure(s, failure_id))
    )
    if found is None:
        _fail(f"no failure {failure_id} in this store (`llamon failures` lists the ids).", 1)
    row, (task, of_task, events) = found
    if all(other.id != row.id for other in of_task):  # past the task's first page of records
        of_task = [*of_task, row]
    of_task = _oldest_first(of_task)
    extra: dict[str, object] = {
        "failureId": row.id,
        "taskFailureIds": [other.id for other in of_task],
    }
    which = _which(row, of_task)
    _show(
        row.task_id,
        task,
        [row],
        events,
        guide,
        all_events,
        as_json=as_json,
        extra=extra,
        which=which,
    )


def _show(
    task_id: str,
    task: Task | None,
    failures: list[StoredFailure],
    events: list[RunnerEvent],
    guide: TriageGuide,
    all_events: bool,
    *,
    as_json: bool,
    extra: dict[str, object] | None = None,
    which: str | None = None,
) -> None:
    """Print ``failures`` of the task with their advice and the related ``events``
    (``extra``: more top-level JSON keys; ``which``: a line after the task's)."""
    state = task.status.state.value if task is not None else "-"
    shown = events if all_events else related_events(events, failures)
    if as_json:
        document = {
            "task": {"id": task_id, "state": state},
            **(extra or {}),
            "failures": [
                {
                    **failure_json(row),
                    "triage": _triage_json(*_advice(guide, row.reason, row.error_code)),
                    "catalog": (catalog_json(spec) if (spec := reason_spec(row.reason)) else None),
                }
                for row in failures
            ],
            "events": [event_json(event) for event in shown],
            "eventsKept": len(events),
        }
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    typer.echo(f"task {task_id}  state {state}")
    if which is not None:
        typer.echo(which)
    for row in failures:
        _failure_lines(row)
        spec = reason_spec(row.reason)
        _print_advice(row.reason, *_advice(guide, row.reason, row.error_code), spec)
        if spec is None and row.operator_action:
            typer.echo(f"operator action (as recorded): {row.operator_action}")
    if not all_events and events:
        typer.echo(f"related events: {len(shown)} of {len(events)} kept (--all-events: every one)")
    print_events(Console(), shown)
