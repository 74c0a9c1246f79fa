"""``llamon lab``: check Quality Lab case files and print their JSON Schema.

``llamon lab check PATH...`` loads every case file in the paths (files, or directories
searched for ``.json``/``.yaml``/``.yml``) and prints a table of the cases, or every
problem found, one per line on stderr. ``--json`` prints one JSON document instead. Exit
codes:

* ``0`` -- every case is valid,
* ``2`` -- at least one problem (or YAML files without the ``lab`` extra).

``llamon lab schema`` prints the case file's JSON Schema. The main ``llamon`` command
mounts ``lab_app`` as ``llamon lab``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from llamon_agent.lab.cases import Case, CaseFileError, CaseProblem, load_cases
from llamon_agent.lab.learn_cli import register_learn_commands
from llamon_agent.lab.schema import render_schema

__all__ = ["EXIT_INVALID", "EXIT_OK", "check_command", "lab_app", "schema_command"]

EXIT_OK = 0
EXIT_INVALID = 2

lab_app = typer.Typer(
    name="lab",
    help="Quality Lab: check case files, print their JSON Schema.",
    no_args_is_help=True,
    add_completion=False,
)


@lab_app.callback()
def _lab_root() -> None:
    """Quality Lab tools."""


register_learn_commands(lab_app)  # learn, proposals, accept, reject


def _case_row(case: Case) -> dict[str, Any]:
    return {
        "name": case.label,
        "file": case.source,
        "mode": case.mode,
        "expectedTarget": case.expected_target,
        "tags": list(case.tags),
        "assertions": case.assertions.count,
        "faults": [fault.kind for fault in case.faults],
        "cleanupSteps": len(case.cleanup),
        "case": case.model_dump(mode="json", exclude_none=True),
    }


def _print_cases(console: Console, cases: list[Case]) -> None:
    table = Table(title=f"{len(cases)} case(s)")
    for column in ("name", "mode", "target", "tags", "assertions", "faults", "cleanup"):
        table.add_column(column, overflow="fold")
    for case in cases:
        table.add_row(
            escape(case.label),
            case.mode,
            escape(case.expected_target or "-"),
            escape(", ".join(case.tags) or "-"),
            str(case.assertions.count),
            escape(", ".join(fault.kind for fault in case.faults) or "-"),
            f"{len(case.cleanup)} step(s)" if case.cleanup else "-",
        )
    console.print(table)
    console.print(f"[green]OK[/green] {len(cases)} case(s) valid", highlight=False)


def _fail(as_json: bool, problems: list[CaseProblem], note: str | None = None) -> typer.Exit:
    if as_json:
        document: dict[str, Any] = {"ok": False, "errors": [p.to_dict() for p in problems]}
        if note:
            document["error"] = note
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        err = Console(stderr=True, soft_wrap=True)
        for problem in problems:
            err.print(f"[red]error:[/red] {escape(str(problem))}", highlight=False)
        if note:
            err.print(f"[red]error:[/red] {escape(note)}", highlight=False)
        err.print(f"[red]FAIL[/red] {len(problems) or 1} problem(s)", highlight=False)
    return typer.Exit(EXIT_INVALID)


@lab_app.command("check")
def check_command(
    paths: Annotated[list[Path], typer.Argument(help="Case files or directories of them.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Load and validate case files: exit 0 when every case is valid, 2 otherwise."""
    try:
        cases = load_cases(*paths)
    except CaseFileError as exc:
        raise _fail(as_json, exc.problems) from exc
    except ImportError as exc:  # YAML files without the lab extra
        raise _fail(as_json, [], str(exc)) from exc
    if as_json:
        document = {"ok": True, "cases": [_case_row(case) for case in cases]}
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        _print_cases(Console(), cases)
    raise typer.Exit(EXIT_OK)


@lab_app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of a case file."""
    sys.stdout.write(render_schema())
