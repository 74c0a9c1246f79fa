"""``llamon catalog publish``: publish a card (a file, or an agent's URL) to a catalog.

What the operator sees: on success, ``name@version (change)`` on stdout, then each lint
warning (``warning: rule at path: message``) on stderr; ``(already published)`` when the
identical card was already that version. A refusal is one line on stderr, ``llamon catalog
publish: errorCode/errorReason: message`` (each lint finding of a card refused by lint on a
line of its own after it), exit status 1. A card file that cannot be read or is not a JSON
object, a catalog URL that is not http(s), or a key variable that is not set, is one line
naming the option, exit status 2. The key is read from the environment variable
``--key-env`` names (default ``LLAMON_CATALOG_KEY``), never from the command line
(arguments show in ``ps``).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from llamon_agent.catalog.cli_store import fail
from llamon_agent.core.settings import CATALOG_KEY_ENV

if TYPE_CHECKING:
    from llamon_agent.client.catalog_wire import PublishResult

__all__ = ["publish_command", "read_card", "refusal_line"]


def read_card(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; ``ValueError`` naming the file otherwise."""
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"--card {str(path)!r}: {exc.strerror or type(exc).__name__}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"--card {str(path)!r} is not JSON ({exc})") from None
    if not isinstance(card, dict):
        raise ValueError(f"--card {str(path)!r} holds a JSON {type(card).__name__}, not an object")
    return card


def publish_command(
    url: Annotated[str, typer.Option("--url", help="The catalog's base URL.")],
    card: Annotated[
        Path | None, typer.Option("--card", metavar="FILE", help="The agent card (JSON).")
    ] = None,
    agent_url: Annotated[
        str | None,
        typer.Option(
            "--agent-url", help="The agent's base URL: the catalog fetches its card itself."
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="Catalog name (default: the card's name as a slug).")
    ] = None,
    key_env: Annotated[
        str, typer.Option("--key-env", metavar="VAR", help="Environment variable with the key.")
    ] = CATALOG_KEY_ENV,
) -> None:
    """Publish an agent's card to a catalog (from a file, or fetched from the agent)."""
    from llamon_agent.client.catalog import CatalogClient
    from llamon_agent.exceptions import ConfigValidationError, LlamonError

    if (card is None) == (agent_url is None):
        fail("publish", "give exactly one of --card FILE or --agent-url URL.", 2)
    key = os.environ.get(key_env)
    if not key:
        fail("publish", f"--key-env {key_env}: the variable is not set (a publisher key).", 2)
    try:
        body = read_card(card) if card is not None else None
        client = CatalogClient(url, auth=key, cache_dir=False)
    except ValueError as exc:
        fail("publish", f"{exc}.", 2)
    except ConfigValidationError as exc:
        fail("publish", f"--url: {exc}.", 2)

    async def publish() -> PublishResult:
        async with client:
            return await client.publish(body, url=agent_url, name=name)

    try:
        result = asyncio.run(publish())
    except LlamonError as exc:
        fail("publish", refusal_line(exc), 1)
    entry = result.entry
    change = result.change if result.created else "already published"
    typer.echo(f"{entry.name}@{entry.version} ({change})")
    for finding in result.warnings:
        typer.echo(f"warning: {finding.rule} at {finding.path}: {finding.message}", err=True)


def refusal_line(exc: Exception) -> str:
    """``errorCode/errorReason: message`` for a refused publish, then one ``error: rule at
    path: message`` line per lint finding of a refused card."""
    from llamon_agent.core.classify import classify_exception

    classified = classify_exception(exc)
    reason = getattr(exc, "error_reason", None) or classified.reason
    message = str(exc)
    if message.startswith("publish"):  # the client's subject: "publish[ of 'name']: ..."
        message = message.partition(": ")[2] or message
    lines = [f"{classified.code.value}/{reason}: {message}"]
    for finding in getattr(exc, "findings", ()):
        lines.append(f"  {finding.severity}: {finding.rule} at {finding.path}: {finding.message}")
    return "\n".join(lines)
