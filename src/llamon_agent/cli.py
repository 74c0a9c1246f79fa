"""The ``llamon`` command.

* ``llamon demo`` serves the example agent on the embedded default and shows, for each
  kind of answer, what an A2A client receives.
* ``llamon serve module:agent`` serves your agent (``--card``, ``--store``, ``--api-key`` ...).
* ``llamon card lint URL|FILE`` checks an agent card against seed 002's advice.
* ``llamon errors`` prints the error model: the eight error codes, the exception mapping
  table (with your rows when ``--import`` names your module), the JSON-RPC code table and
  the reason catalog; ``--json`` prints it as one JSON document.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from llamon_agent.a2a.card_cli import card_app
from llamon_agent.a2a.stores import MemoryLimits, StoreKind
from llamon_agent.core.catalog import reason_catalog
from llamon_agent.core.classify import registered_rules
from llamon_agent.core.codes import JSON_RPC_CODE_TO_ERROR_CODE, ErrorCode

__all__ = ["app", "main"]

app = typer.Typer(
    name="llamon",
    help="llamon-agent: A2A agents whose every failure is a structured, safe value.",
    no_args_is_help=True,
    add_completion=False,
)


app.add_typer(card_app, name="card", help="Build and check agent cards.")


@app.callback()
def _root() -> None:
    """llamon-agent command line."""


@app.command("demo")
def demo_command(
    store: Annotated[
        str, typer.Option(help="Task store: sqlite (embedded default), memory or postgres.")
    ] = "sqlite",
) -> None:
    """Serve the example agent and show each kind of answer a client receives."""
    import asyncio

    from llamon_agent.demo import print_results, run_demo

    results = asyncio.run(run_demo(store=_store_kind(store)))
    print_results(results)
    if not all(result.expected for result in results):
        raise typer.Exit(1)


def _store_kind(value: str) -> StoreKind:
    if value not in ("sqlite", "memory", "postgres"):
        raise typer.BadParameter(f"{value!r}: use sqlite, memory or postgres", param_hint="--store")
    return value  # type: ignore[return-value]


def _memory_limits(
    kind: str, max_finished: int | None, max_finished_age: float | None
) -> MemoryLimits | None:
    """``MemoryLimits`` from the two options (unset ones keep their defaults)."""
    if max_finished is None and max_finished_age is None:
        return None
    if kind != "memory":
        raise typer.BadParameter(
            f"--max-finished/--max-finished-age bound the memory store; the store is {kind}",
            param_hint="--store",
        )
    defaults = MemoryLimits()
    try:
        return MemoryLimits(
            max_finished=defaults.max_finished if max_finished is None else max_finished,
            max_finished_age=max_finished_age
            if max_finished_age is not None
            else defaults.max_finished_age,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


@app.command("serve")
def serve_command(
    target: Annotated[str, typer.Argument(help="The agent: 'module:attr' or 'file.py:attr'.")],
    card: Annotated[
        str | None, typer.Option(help="The card: 'module:attr', 'file.py:attr' or a JSON file.")
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8000,
    store: Annotated[str, typer.Option(help="sqlite (default), memory or postgres.")] = "sqlite",
    database_url: Annotated[
        str | None, typer.Option(envvar="LLAMON_DATABASE_URL", help="PostgreSQL DSN.")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="LLAMON_API_KEY",
            help="Require this API key (prefer the env var: arguments show in ps).",
        ),
    ] = None,
    bearer_token: Annotated[
        str | None,
        typer.Option(envvar="LLAMON_BEARER_TOKEN", help="Require this bearer token."),
    ] = None,
    no_reconcile: Annotated[
        bool, typer.Option("--no-reconcile", help="Do not end tasks a crash left working.")
    ] = False,
    no_gc_freeze: Annotated[
        bool,
        typer.Option("--no-gc-freeze", help="Do not gc.freeze() the startup heap (p99 tuning)."),
    ] = False,
    max_finished: Annotated[
        int | None,
        typer.Option(help="--store memory: finished tasks kept (default 10000)."),
    ] = None,
    max_finished_age: Annotated[
        float | None,
        typer.Option(help="--store memory: seconds a finished task is kept (default 3600)."),
    ] = None,
) -> None:
    """Serve an agent over A2A (JSON-RPC) until stopped."""
    import asyncio

    from a2a.types import AgentCard

    from llamon_agent.a2a.auth import AuthConfig
    from llamon_agent.a2a.serve import ServeOptions, load_target, serve_agent

    kind = "postgres" if database_url and store == "sqlite" else store
    try:
        agent = load_target(target)
        agent_card: AgentCard | None = None
        if card is not None:
            if card.endswith(".json") and ":" not in card:
                agent_card = AgentCard.model_validate_json(Path(card).read_text(encoding="utf-8"))
            else:
                agent_card = load_target(card)
    except (ValueError, OSError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    if api_key and bearer_token:
        raise typer.BadParameter("give --api-key or --bearer-token, not both")
    secret = api_key or bearer_token
    try:
        if agent_card is not None:
            auth = AuthConfig.from_card(agent_card, *([secret] if secret else []))
            if secret and auth is None:
                raise ValueError(
                    "a credential was given but the card declares no security scheme; "
                    "declare it in the card (auth=AuthSpec.api_key()/bearer())"
                )
        elif api_key:
            auth = AuthConfig.api_key(api_key)
        else:
            auth = AuthConfig.bearer(bearer_token) if bearer_token else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    options = ServeOptions(
        host=host,
        port=port,
        store=_store_kind(kind),
        database_url=database_url,
        auth=auth,
        reconcile=not no_reconcile,
        gc_freeze=not no_gc_freeze,
        memory_limits=_memory_limits(kind, max_finished, max_finished_age),
    )

    def ready(url: str) -> None:
        typer.echo(f"llamon: serving {target} at {url} (store: {options.store})", err=True)

    asyncio.run(serve_agent(agent, agent_card, options, on_ready=ready))


_CODE_MEANINGS = {
    ErrorCode.INVALID_INPUT: "input missing, malformed or off-schema; fix the request",
    ErrorCode.AUTH_REQUIRED: "authentication or permission needed; log in, then retry",
    ErrorCode.NOT_FOUND: "task expired or resource absent; start over",
    ErrorCode.UPSTREAM_UNAVAILABLE: "MCP / RAG / DB / LLM failure; often retriable",
    ErrorCode.UPSTREAM_TIMEOUT: "an external dependency timed out; retry with backoff",
    ErrorCode.RATE_LIMITED: "quota or rate limit; wait retryAfterMs or back off",
    ErrorCode.GUARDRAIL_BLOCKED: "blocked by a safety policy; artifacts withheld",
    ErrorCode.INTERNAL_ERROR: "anything unknown; report the incident id",
}


def _error_model() -> dict[str, object]:
    return {
        "errorCodes": [
            {"code": code.value, "meaning": meaning} for code, meaning in _CODE_MEANINGS.items()
        ],
        "exceptionMapping": [
            {
                "exception": row.key,
                "errorCode": row.code,
                "errorReason": row.reason,
                "retriable": row.retriable,
                "note": row.note,
            }
            for row in registered_rules()
        ],
        "jsonRpcCodes": [
            {"jsonRpcCode": number, "errorCode": code.value}
            for number, code in JSON_RPC_CODE_TO_ERROR_CODE.items()
        ],
        "reasons": [
            {
                "reason": spec.reason,
                "stage": str(spec.stage),
                "errorCode": spec.error_code.value,
                "retryable": spec.retryable,
                "operatorAction": spec.operator_action,
                "meaning": spec.meaning,
            }
            for spec in reason_catalog()
        ],
    }


@app.command("errors")
def errors_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    imports: Annotated[
        list[str] | None,
        typer.Option("--import", help="Import a module first (to show its registered rows)."),
    ] = None,
) -> None:
    """Print the errorCode table, the exception mapping, JSON-RPC codes and reason catalog."""
    for module in imports or []:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            message = f"cannot import {module!r}: {exc}"
            raise typer.BadParameter(message, param_hint="--import") from exc
    console = Console()
    if as_json:
        console.print_json(json.dumps(_error_model(), ensure_ascii=False))
        return

    codes = Table(title="errorCode (clients branch on these)")
    codes.add_column("errorCode", style="bold")
    codes.add_column("meaning")
    for code, meaning in _CODE_MEANINGS.items():
        codes.add_row(code.value, meaning)

    mapping = Table(title="exception -> errorCode (core/classify.py, first match in MRO order)")
    for column in ("exception", "errorCode", "errorReason", "retriable", "note"):
        mapping.add_column(column)
    for row in registered_rules():
        mapping.add_row(row.key, row.code, row.reason, row.retriable, row.note)

    rpc = Table(title="JSON-RPC / A2A code -> errorCode")
    rpc.add_column("code", justify="right")
    rpc.add_column("errorCode")
    for number, code in JSON_RPC_CODE_TO_ERROR_CODE.items():
        rpc.add_row(str(number), code.value)

    reasons = Table(title="reason catalog (core/catalog.py)")
    for column in ("reason", "stage", "errorCode", "retryable", "operator action"):
        reasons.add_column(column)
    for spec in reason_catalog():
        reasons.add_row(
            spec.reason,
            str(spec.stage),
            spec.error_code.value,
            str(spec.retryable).lower(),
            spec.operator_action,
        )

    for table in (codes, mapping, rpc, reasons):
        console.print(table)


def main() -> None:
    """Entry point of the ``llamon`` console script."""
    app()
