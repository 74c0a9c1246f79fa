"""The ``llamon`` command.

``llamon errors`` prints the error model: the eight error codes, the exception mapping
table (including your registered rows when ``--import`` names your module), the JSON-RPC
code table and the reason catalog. ``--json`` prints the same as one JSON document.
"""

from __future__ import annotations

import importlib
import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

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


@app.callback()
def _root() -> None:
    """llamon-agent command line."""


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
