"""``llamon lab learn``, ``proposals``, ``accept`` and ``reject``: learned regression cases.

* ``llamon lab learn [--from-report R.json ...] [--home DIR | --database-url URL]
  [--proposals P] [--read-only TOOL ...] [--json]`` finds failures that later succeeded
  for the same input (``lab.learn``) in the store ``llamon serve`` writes (read when no
  report is given, or when ``--home``/``--database-url`` is) and in lab reports, and
  stores a proposal for each new input (in shadow mode) in the proposals file (default
  ``<home>/lab/proposals.json``). It prints the new proposals, the refused candidates
  (their reason and the two runs' ids only: never their input) and those already known.
* ``llamon lab proposals [--json]`` lists every proposal with its status and streak.
* ``llamon lab accept ID --into FILE [--min-streak K]`` appends the proposal's case to
  the case file once it passed K (default 3) times in a row; before that it is refused
  with ``insufficient_repeated_success``.
* ``llamon lab reject ID --reason TEXT`` rejects it (``promotion_rejected``), for good.

Exit codes, as for the other lab commands: ``0`` done; ``1`` the promotion gate refused
(``accept``), or the store cannot be opened (``learn``); ``2`` a usage problem (an
unknown id, a report or file that cannot be read, a case file that does not load).
Every message starts with ``llamon lab <command>:`` and names what was wrong.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any, Final, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from llamon_agent.a2a.stores.failures_cli import with_store
from llamon_agent.core.settings import database_url_setting
from llamon_agent.lab.learn import (
    STORE_SCAN_LIMIT,
    Candidate,
    Proposal,
    find_report_candidates,
    find_store_candidates,
    propose,
)
from llamon_agent.lab.proposals import (
    DEFAULT_MIN_STREAK,
    PromotionRefused,
    ProposalError,
    ProposalStore,
    default_proposals_path,
)

__all__ = [
    "EXIT_OK",
    "EXIT_PROBLEM",
    "EXIT_REFUSED",
    "accept_command",
    "learn_command",
    "proposals_command",
    "register_learn_commands",
    "reject_command",
]

EXIT_OK: Final = 0
EXIT_REFUSED: Final = 1
EXIT_PROBLEM: Final = 2

ProposalsPath = Annotated[
    Path | None,
    typer.Option("--proposals", help="The proposals file (default <home>/lab/proposals.json)."),
]
Home = Annotated[
    Path | None,
    typer.Option("--home", help="Directory of tasks.db (default LLAMON_HOME or ~/.llamon)."),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


def _fail(command: str, message: str, code: int) -> NoReturn:
    typer.echo(f"llamon lab {command}: {message}", err=True)
    raise typer.Exit(code)


def _store(proposals: Path | None, home: Path | None) -> ProposalStore:
    return ProposalStore(proposals if proposals is not None else default_proposals_path(home))


def _read_reports(paths: list[Path]) -> list[dict[str, Any]]:
    reports: list[dict[str, Any]] = []
    for path in paths:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            _fail("learn", f"--from-report {path}: no such file.", EXIT_PROBLEM)
        except (OSError, UnicodeDecodeError) as exc:
            _fail("learn", f"--from-report {path}: cannot be read ({type(exc).__name__}).", 2)
        except json.JSONDecodeError as exc:
            _fail(
                "learn",
                f"--from-report {path}: not valid JSON (line {exc.lineno}, column {exc.colno}).",
                EXIT_PROBLEM,
            )
        if not isinstance(document, dict) or not isinstance(document.get("results"), list):
            _fail(
                "learn",
                f"--from-report {path}: not a lab report (no 'results' list).",
                EXIT_PROBLEM,
            )
        reports.append(document)
    return reports


def _target(proposal: Proposal) -> str:
    case = proposal.case or {}
    return str(case.get("expected_target") or "-")


def _message_shown(proposal: Proposal) -> str:
    """The case's message (it passed the security boundary unchanged to be stored)."""
    case = proposal.case or {}
    if case.get("query"):
        return json.dumps(case["query"], ensure_ascii=False)
    return json.dumps(case.get("parts") or [], ensure_ascii=False)


def _runs(proposal: Proposal) -> str:
    source = proposal.source
    failed, succeeded = source.get("failed", "?"), source.get("succeeded", "?")
    return f"{source.get('kind', '?')}: {failed} then {succeeded}"


def learn_command(
    from_report: Annotated[
        list[Path] | None,
        typer.Option("--from-report", help="A lab report (JSON) to learn from; repeatable."),
    ] = None,
    home: Home = None,
    database_url: Annotated[
        str | None,
        typer.Option("--database-url", help="PostgreSQL DSN of the served agent's store."),
    ] = None,
    proposals: ProposalsPath = None,
    read_only: Annotated[
        list[str] | None,
        typer.Option(
            "--read-only",
            help="A tool without side effects (its learned cases run in execute mode).",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option(help="The newest tasks of the store to read.", min=1, max=100_000)
    ] = STORE_SCAN_LIMIT,
    as_json: AsJson = False,
) -> None:
    """Propose regression cases from failures that later succeeded for the same input."""
    paths = list(from_report or [])
    reports = _read_reports(paths)
    candidates: list[Candidate] = []
    if not paths or home is not None or database_url is not None:
        url = database_url or (database_url_setting() if home is None else None)

        async def read(stores: Any) -> list[Candidate]:
            return await find_store_candidates(stores, limit=limit)

        candidates.extend(asyncio.run(with_store("lab learn", url, home, read)))
    bases: list[Path | None] = [path.parent for path in paths]
    candidates.extend(find_report_candidates(reports, base_dirs=bases))
    store = _store(proposals, home)
    made = [propose(candidate, read_only_tools=read_only or ()) for candidate in candidates]
    try:
        new, known = store.add(made)
    except ProposalError as exc:
        _fail("learn", str(exc), EXIT_PROBLEM)
    fresh = [p for p in new if p.status == "shadow"]
    refused = [p for p in new if p.status == "refused"]
    if as_json:
        document = {
            "file": str(store.path),
            "candidates": len(candidates),
            "proposals": [p.to_dict() for p in fresh],
            "refused": [{"id": p.id, "reason": p.reason, "source": p.source} for p in refused],
            "known": [{"id": p.id, "status": p.status} for p in known],
        }
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    typer.echo(
        f"{len(candidates)} candidate(s): {len(fresh)} new proposal(s), {len(refused)}"
        f" refused, {len(known)} already known ({store.path})"
    )
    for proposal in fresh:
        case = proposal.case or {}
        reason = proposal.source.get("failure_reason") or "-"
        typer.echo(
            f"new      {proposal.id}  {case.get('mode')}  target {_target(proposal)}"
            f"  failed with {reason}  ({_runs(proposal)})"
        )
        typer.echo(f"         message: {_message_shown(proposal)}")
    for proposal in refused:
        typer.echo(
            f"refused  {proposal.id}  {proposal.reason}: the input holds what the security"
            f" boundary removes; not stored ({_runs(proposal)})"
        )
    for proposal in known:
        typer.echo(f"known    {proposal.id}  {proposal.status}")


def proposals_command(
    proposals: ProposalsPath = None,
    home: Home = None,
    as_json: AsJson = False,
) -> None:
    """List the learned proposals: status, streak of passes, runs, target."""
    store = _store(proposals, home)
    try:
        rows = store.load()
    except ProposalError as exc:
        _fail("proposals", str(exc), EXIT_PROBLEM)
    if as_json:
        document = {"file": str(store.path), "proposals": [p.to_dict() for p in rows]}
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    if not rows:
        typer.echo(f"no proposals in {store.path}.")
        return
    table = Table(title=f"{len(rows)} proposal(s) in {escape(str(store.path))}")
    for column in ("id", "status", "streak", "runs", "mode", "target", "failed with", "note"):
        table.add_column(column, no_wrap=True)
    for proposal in rows:
        case = proposal.case or {}
        note = proposal.rejection_reason or proposal.reason or proposal.accepted_into or "-"
        if proposal.status == "accepted":
            note = f"into {proposal.accepted_into}"
        table.add_row(
            proposal.id,
            proposal.status,
            str(proposal.streak),
            str(proposal.runs),
            str(case.get("mode") or "-"),
            escape(_target(proposal)),
            escape(str(proposal.source.get("failure_reason") or "-")),
            escape(note),
        )
    console = Console()
    console.width = max(console.width, 200)
    console.print(table)


def accept_command(
    proposal_id: Annotated[str, typer.Argument(metavar="ID", help="The proposal's id.")],
    into: Annotated[
        Path, typer.Option("--into", help="The case file (.yaml, .yml or .json) to add it to.")
    ],
    min_streak: Annotated[
        int, typer.Option("--min-streak", help="Passes in a row it needs.", min=1)
    ] = DEFAULT_MIN_STREAK,
    proposals: ProposalsPath = None,
    home: Home = None,
) -> None:
    """Accept a proposal into a case file, once it passed --min-streak times in a row."""
    store = _store(proposals, home)
    try:
        accepted = store.accept(proposal_id, into=into, k=min_streak)
    except PromotionRefused as exc:
        _fail("accept", f"refused ({exc.reason}): proposal {proposal_id!r} {exc}.", EXIT_REFUSED)
    except (ProposalError, ImportError) as exc:
        _fail("accept", str(exc), EXIT_PROBLEM)
    typer.echo(f"accepted {accepted.id} into {into} (passed {accepted.streak} time(s) in a row)")


def reject_command(
    proposal_id: Annotated[str, typer.Argument(metavar="ID", help="The proposal's id.")],
    reason: Annotated[str, typer.Option("--reason", help="Why it is rejected.")],
    proposals: ProposalsPath = None,
    home: Home = None,
) -> None:
    """Reject a proposal for good (promotion_rejected): its input is not proposed again."""
    store = _store(proposals, home)
    try:
        rejected = store.reject(proposal_id, reason)
    except ProposalError as exc:
        _fail("reject", str(exc), EXIT_PROBLEM)
    typer.echo(f"rejected {rejected.id} ({rejected.reason}): {rejected.rejection_reason}")


def register_learn_commands(app: typer.Typer) -> None:
    """Mount ``learn``, ``proposals``, ``accept`` and ``reject`` on the ``lab`` app."""
    app.command("learn")(learn_command)
    app.command("proposals")(proposals_command)
    app.command("accept")(accept_command)
    app.command("reject")(reject_command)
