"""``llamon lab``: check and run Quality Lab case files, print their JSON Schema.

``llamon lab check PATH...`` loads every case file in the paths (files, or directories
searched for ``.json``/``.yaml``/``.yml``) and prints a table of the cases, or every
problem found, one per line on stderr. ``--json`` prints one JSON document instead. Exit
codes:

* ``0`` -- every case is valid,
* ``2`` -- at least one problem (or YAML files without the ``lab`` extra).

``llamon lab run PATH... --target module:agent | --url URL`` runs the cases (see
``lab.runner``) with a progress bar, prints a summary table by outcome and reason, writes
the reports asked for (``--report-json``, ``--junit``, ``--html``) and exits:

* ``0`` -- every counted case passed,
* ``1`` -- at least one case failed, was refused or could not run,
* ``2`` -- the case files, the target or an option is wrong (nothing ran).

``llamon lab schema`` prints the case file's JSON Schema. The main ``llamon`` command
mounts ``lab_app`` as ``llamon lab``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from llamon_agent.core.settings import LAB_API_KEY_ENV, LAB_BEARER_TOKEN_ENV
from llamon_agent.lab.cases import Case, CaseFileError, CaseProblem, load_cases
from llamon_agent.lab.learn_cli import register_learn_commands
from llamon_agent.lab.results import CaseResult, LabReport
from llamon_agent.lab.schema import render_schema

__all__ = [
    "EXIT_FAILED",
    "EXIT_INVALID",
    "EXIT_OK",
    "check_command",
    "lab_app",
    "run_command",
    "schema_command",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2

lab_app = typer.Typer(
    name="lab",
    help="Quality Lab: check and run case files, learn cases from failures, print the schema.",
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


def _problem(message: str) -> typer.Exit:
    err = Console(stderr=True, soft_wrap=True)
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return typer.Exit(EXIT_INVALID)


def _tags(options: list[str]) -> list[str]:
    """The tags of ``--tags`` options (each a tag or a comma-separated list), in order."""
    found = [tag.strip() for option in options for tag in option.split(",") if tag.strip()]
    return list(dict.fromkeys(found))


def _selected(cases: list[Case], tags: list[str]) -> list[Case]:
    wanted = set(_tags(tags))
    if not wanted:
        return cases
    return [case for case in cases if wanted & set(case.tags)]


def _credential(api_key: str | None, bearer_token: str | None) -> Any:
    from llamon_agent.client.auth import ApiKey, Bearer

    if api_key and bearer_token:
        raise _problem("give --api-key or --bearer-token, not both")
    if api_key:
        return ApiKey(api_key)
    return Bearer(bearer_token) if bearer_token else None


def _target(target: str | None, url: str | None, card: str | None) -> tuple[object, Any]:
    from llamon_agent.a2a.serve import load_agent, load_card

    if target is not None and url is not None:
        raise _problem("give --target or --url, not both")
    if target is None and url is None:
        raise _problem("give the agent to run: --target module:attribute or --url URL")
    if url is not None:
        if card is not None:
            raise _problem("--card is for --target (an agent at a URL serves its own card)")
        return None, None
    try:
        agent = load_agent(str(target))  # module names resolve from the current directory
        return agent, load_card(card) if card is not None else None
    except ValueError as exc:
        raise _problem(str(exc)) from exc


def _cleanup_tools(spec: str | None) -> Any:
    from llamon_agent.a2a.serve import load_target

    if spec is None:
        return None
    try:
        return load_target(spec)
    except (ValueError, OSError) as exc:
        raise _problem(f"cannot load --cleanup-tools {spec!r}: {exc}") from exc


@lab_app.command("run")
def run_command(
    paths: Annotated[list[Path], typer.Argument(help="Case files or directories of them.")],
    target: Annotated[
        str | None, typer.Option(help="The agent to run in process: module:attribute.")
    ] = None,
    url: Annotated[str | None, typer.Option(help="The A2A agent to call, by base URL.")] = None,
    card: Annotated[
        str | None, typer.Option(help="--target's card: module:attribute or a JSON file.")
    ] = None,
    tags: Annotated[
        list[str] | None, typer.Option("--tags", help="Run only cases with one of these tags.")
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Cases run at once (at least 1).")] = 1,
    repeat: Annotated[int, typer.Option(help="Runs of each case (at least 1).")] = 1,
    timeout: Annotated[float, typer.Option(min=0.001, help="Seconds per case.")] = 120.0,
    cleanup_tools: Annotated[
        str | None,
        typer.Option(help="What cleanup steps call: module:attribute (a tool registry)."),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar=LAB_API_KEY_ENV, help="--url's API key.")
    ] = None,
    bearer_token: Annotated[
        str | None, typer.Option(envvar=LAB_BEARER_TOKEN_ENV, help="--url's bearer token.")
    ] = None,
    report_json: Annotated[
        Path | None, typer.Option("--report-json", help="Write the JSON report here.")
    ] = None,
    junit: Annotated[Path | None, typer.Option(help="Write a JUnit XML report here.")] = None,
    html: Annotated[Path | None, typer.Option(help="Write the HTML report here.")] = None,
    proposals: Annotated[
        Path | None,
        typer.Option(help="Also run the learned cases in shadow mode from this proposal file."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """Run cases against an agent: exit 0 when every case passed, 1 when one did not,
    2 when nothing could run."""
    try:
        cases = load_cases(*paths)
    except CaseFileError as exc:
        raise _fail(False, exc.problems) from exc
    except ImportError as exc:
        raise _fail(False, [], str(exc)) from exc
    for name, value in (("--concurrency", concurrency), ("--repeat", repeat)):
        if value < 1:
            raise _problem(f"{name} must be at least 1, got {value}")
    chosen = _selected(cases, tags or [])
    if not chosen:
        raise _problem(f"no case has any of the tags {', '.join(_tags(tags or []))}")
    agent, agent_card = _target(target, url, card)
    shadow = _shadow_cases(proposals)
    report = asyncio.run(
        _run(
            chosen,
            agent=agent,
            url=url,
            card=agent_card,
            auth=_credential(api_key, bearer_token),
            cleanup_tools=_cleanup_tools(cleanup_tools),
            timeout=timeout,
            concurrency=concurrency,
            repeat=repeat,
            shadow=shadow,
            progress=not quiet,
        )
    )
    if report is None:
        raise typer.Exit(EXIT_INVALID)
    if proposals is not None:
        _record_shadow(proposals, report)
    from llamon_agent.lab.reports import summary_table, write_reports

    console = Console()
    _print_results(console, report)
    console.print(summary_table(report))
    write_reports(report, json=report_json, junit=junit, html=html)
    for label, path in (("JSON", report_json), ("JUnit", junit), ("HTML", html)):
        if path is not None:
            console.print(f"{label} report: {escape(str(path))}", highlight=False)
    counts = report.counts()
    line = ", ".join(f"{count} {outcome}" for outcome, count in counts.items() if count)
    if report.ok:
        console.print(f"[green]OK[/green] {line or 'no case'}", highlight=False)
        raise typer.Exit(EXIT_OK)
    console.print(f"[red]FAIL[/red] {line}", highlight=False)
    raise typer.Exit(EXIT_FAILED)


def _print_results(console: Console, report: LabReport) -> None:
    for result in report.results:
        if result.passed:
            continue
        head = f"[red]{result.outcome.upper()}[/red] {escape(result.case)}"
        if result.shadow:
            head += " [dim](shadow)[/dim]"
        console.print(head, highlight=False)
        if result.message:
            console.print(f"  {escape(result.message)}", highlight=False)
        if result.failure is not None:
            record = ", ".join(f"{k}={v}" for k, v in result.failure.items() if k != "message")
            console.print(f"  failure: {escape(record)}", highlight=False)
        if result.triage is not None:
            console.print(f"  look first: {escape(str(result.triage['lookFirst']))}")
            console.print(f"  fix: {escape(str(result.triage['fix']))}")


async def _run(
    cases: list[Case],
    *,
    agent: object,
    url: str | None,
    progress: bool,
    concurrency: int,
    repeat: int,
    shadow: list[Case],
    **options: Any,
) -> LabReport | None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from llamon_agent.client.errors import RemoteAgentError
    from llamon_agent.lab.runner import Lab

    total = (len(cases) + len(shadow)) * repeat
    err = Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[last]}"),
        console=err,
        disable=not progress or not err.is_terminal,  # off a terminal it left a blank line
        transient=True,
    )
    shown = bar if progress and err.is_terminal else nullcontext()  # nothing printed off it
    try:
        async with Lab(agent, url=url, **options) as lab:
            with shown, quiet_logs():
                job = bar.add_task("cases", total=total, last="")

                def advance(result: CaseResult) -> None:
                    bar.update(job, advance=1, last=f"{result.outcome} {result.case}")

                return await lab.run(
                    cases,
                    concurrency=concurrency,
                    repeat=repeat,
                    shadow=shadow,
                    on_result=advance,
                )
    except RemoteAgentError as exc:  # the URL's card could not be read
        Console(stderr=True).print(
            f"[red]error:[/red] cannot reach the agent at the URL: "
            f"{escape(exc.code.value)} {escape(exc.reason)}",
            highlight=False,
        )
        return None


@contextmanager
def quiet_logs() -> Iterator[None]:
    """While cases run, keep the log lines of the agent under test (a line per task, a
    warning per injected transport failure ...) out of the terminal: the results say what
    happened; only errors are shown. The levels are put back afterwards."""
    levels = dict.fromkeys(("llamon_agent", "a2a", "httpx", "mcp", "uvicorn"), logging.ERROR)
    # a2a-sdk logs a run of the in-process agent that ends in an exception (an injected
    # task-store failure ...) as an ERROR with the exception's traceback and text; the
    # case's result already says what the caller saw
    levels[_A2A_RUN_LOGGER] = logging.CRITICAL
    before = {name: logging.getLogger(name).level for name in levels}
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, level in before.items():
            logging.getLogger(name).setLevel(level)


_A2A_RUN_LOGGER = "a2a.server.request_handlers.default_request_handler"


def _shadow_cases(path: Path | None) -> list[Case]:
    if path is None:
        return []
    from llamon_agent.lab.proposals import ProposalStore

    return ProposalStore(path).shadow_cases()


def _record_shadow(path: Path, report: LabReport) -> None:
    from llamon_agent.lab.proposals import ProposalStore

    store = ProposalStore(path)
    for result in report.results:
        if result.shadow:
            store.record(result.case, result.passed)
