"""``llamon card``: check an Agent Card the way a client agent's LLM will read it.

``llamon card lint SOURCE`` loads the card from a file or an http(s) URL (a base URL is
resolved through ``/.well-known/agent-card.json``, then ``/.well-known/agent.json``),
prints every finding as a table (``--json``: one JSON document) and exits with

* ``0`` -- no error findings (warnings are allowed),
* ``1`` -- at least one error finding,
* ``2`` -- the card could not be loaded (the reason goes to stderr, or into the JSON).

The main ``llamon`` command mounts ``card_app`` as ``llamon card``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from llamon_agent.a2a.card import CardFinding, CardLoadError, lint_agent_card, load_agent_card

__all__ = ["EXIT_ERRORS", "EXIT_LOAD_FAILED", "EXIT_OK", "card_app", "lint_command"]

EXIT_OK = 0
EXIT_ERRORS = 1
EXIT_LOAD_FAILED = 2

card_app = typer.Typer(
    name="card",
    help="Agent Card tools: lint a card from a file or URL.",
    no_args_is_help=True,
    add_completion=False,
)


@card_app.callback()
def _card_root() -> None:
    """Agent Card tools."""


def _counts(findings: Sequence[CardFinding]) -> tuple[int, int]:
    errors = sum(1 for finding in findings if finding.severity == "error")
    return errors, len(findings) - errors


def _report(source: str, findings: Sequence[CardFinding]) -> dict[str, object]:
    errors, warnings = _counts(findings)
    return {
        "source": source,
        "ok": errors == 0,
        "errors": errors,
        "warnings": warnings,
        "findings": [finding.to_dict() for finding in findings],
    }


def _print_table(console: Console, source: str, findings: Sequence[CardFinding]) -> None:
    errors, warnings = _counts(findings)
    if findings:
        table = Table(title=f"agent card findings: {escape(source)}")
        for column in ("severity", "rule", "path", "message"):
            table.add_column(column, overflow="fold")
        for finding in findings:
            style = "red" if finding.severity == "error" else "yellow"
            table.add_row(
                f"[{style}]{finding.severity}[/{style}]",
                finding.rule,
                escape(finding.path),
                escape(finding.message),
            )
        console.print(table)
    verdict = "[red]FAIL[/red]" if errors else "[green]OK[/green]"
    summary = f"{escape(source)}: {errors} error(s), {warnings} warning(s)"
    console.print(f"{verdict} {summary}", highlight=False)


@card_app.command("lint")
def lint_command(
    source: Annotated[str, typer.Argument(help="Card file path, or http(s) URL of card/agent.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    timeout: Annotated[float, typer.Option(help="HTTP timeout in seconds.")] = 5.0,
) -> None:
    """Lint an Agent Card: exit 0 without errors, 1 with errors, 2 if it cannot be loaded."""
    console = Console()
    try:
        card = load_agent_card(source, timeout=timeout)
    except CardLoadError as exc:
        if as_json:
            document = {"source": source, "ok": False, "loadError": str(exc)}
            console.print_json(json.dumps(document, ensure_ascii=False))
        else:
            Console(stderr=True).print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_LOAD_FAILED) from exc
    findings = lint_agent_card(card)
    if as_json:
        console.print_json(json.dumps(_report(source, findings), ensure_ascii=False))
    else:
        _print_table(console, source, findings)
    raise typer.Exit(EXIT_ERRORS if _counts(findings)[0] else EXIT_OK)
