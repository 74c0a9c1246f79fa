"""``llamon triage TASK_ID`` and ``llamon triage --reason R``: what to do about a failure.

What the operator sees:

* ``llamon triage TASK_ID [--home DIR | --database-url DSN]``: the task's failure
  record(s) as the store kept them (errorCode, reason, stage, tool or node, incident id,
  message, evidence; every text already scrubbed), the triage guide's row for the reason
  (symptom, where to look first, the fix), the reason catalog's entry (operator action,
  retryable, meaning) and the task's related kept events (those with a failure, those of
  the failing tool or node, and the task's own ``task.*`` events; ``--all-events``: every
  kept event). ``--json`` prints the same as one JSON document.
* ``llamon triage --reason R``: the guide row and the catalog entry, without a store.
* ``--guide FILE`` (repeatable) and ``LLAMON_TRIAGE_GUIDE``: more guide rows, which add to
  or replace the shipped ones by reason (see ``llamon_agent.core.triage``).
* Exit status: 0 when a failure (or the reason) was shown; 1 when the task is not in the
  store, it has no failure record (one line says so and gives its state), or the store
  cannot be opened; 2 for bad input (an unknown ``--reason``, with close matches; a guide
  file that cannot be read; a task id and ``--reason`` together, or neither).
"""

from __future__ import annotations

import asyncio
import difflib
import json
from pathlib import Path
from typing import Annotated, NoReturn

import typer
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
    )
    typer.echo(f"  message:  {row.message}")
    typer.echo("  evidence: " + json.dumps(dict(row.evidence), ensure_ascii=False, default=str))


def triage_command(
    task_id: Annotated[
        str | None, typer.Argument(help="The failed task's id (or use --reason).")
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
    if (task_id is None) == (reason is None):
        _fail("give a task id or --reason R (one of them).", 2)
    guide = _guide(list(guide_files or []))
    if reason is not None:
        _reason_only(reason, guide, as_json)
        return
    assert task_id is not None  # noqa: S101 - checked above
    wanted = task_id
    task, failures, events = asyncio.run(
        with_store("triage", database_url, home, lambda stores: read_task(stores, wanted))
    )
    if task is None and not failures:
        _fail(f"no task {task_id!r} in this store.", 1)
    state = task.status.state.value if task is not None else "-"
    if not failures:
        _fail(f"task {task_id} has no failure record (state {state}); nothing to triage.", 1)
    failures = sorted(failures, key=lambda row: row.timestamp)
    shown = events if all_events else related_events(events, failures)
    if as_json:
        document = {
            "task": {"id": task_id, "state": state},
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
    for row in failures:
        _failure_lines(row)
        spec = reason_spec(row.reason)
        _print_advice(row.reason, *_advice(guide, row.reason, row.error_code), spec)
        if spec is None and row.operator_action:
            typer.echo(f"operator action (as recorded): {row.operator_action}")
    if not all_events and events:
        typer.echo(f"related events: {len(shown)} of {len(events)} kept (--all-events: every one)")
    print_events(Console(), shown)
