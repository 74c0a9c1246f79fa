"""``llamon catalog``: run the Agent Catalog, manage its keys, see and publish its agents.

What the operator sees:

* ``llamon catalog serve [--host 127.0.0.1] [--port 8700] [--database-url URL] [--home DIR]
  [--open-read] [--probe-interval 30] [--probe-timeout 5] [--probe-concurrency 8]
  [--no-probe] [--max-card-bytes N] [--log-level info]``: serves the catalog's HTTP API
  with its health prober until stopped. A store that cannot be opened is one line, exit
  status 2. Listening on an address that is not loopback while no key exists (or with
  ``--open-read``) prints a warning.
* ``llamon catalog keys add --role publisher|caller|admin --label NAME [--pattern GLOB ...]``
  prints the new key once, alone on stdout (``KEY=$(llamon catalog keys add ...)``); what
  it did goes to stderr. Only the key's SHA-256 is stored. ``keys list`` shows label, role,
  patterns and creation time (never any part of a key or its hash); ``keys revoke --label
  NAME`` removes every key with that label.
* ``llamon catalog list [--json] [--all]``: the governance view, one row per agent (see
  ``llamon_agent.catalog.governance``).
* ``llamon catalog publish --url CATALOG (--card FILE | --agent-url URL) [--name NAME]
  [--key-env VAR]``: publishes through ``CatalogClient``; prints ``name@version``, the
  change and the lint warnings; a refusal is one line with its errorCode/reason and the
  catalog's message (exit status 1).

Bad input (an unknown role, a pattern that is not a ``*``/``?`` glob of catalog names) is
one line naming the option, exit status 2.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from llamon_agent.catalog.cli_publish import publish_command
from llamon_agent.catalog.cli_serve import serve_command
from llamon_agent.catalog.cli_store import DatabaseUrl, Home, catalog_store, fail
from llamon_agent.catalog.governance import AgentRow, governance_rows, iso_time, rows_json
from llamon_agent.catalog.records import ROLES, CatalogKey, Role

__all__ = ["catalog_app", "keys_app"]

catalog_app = typer.Typer(
    no_args_is_help=True,
    help="The Agent Catalog: serve it, manage its keys, list and publish agents.",
)
keys_app = typer.Typer(no_args_is_help=True, help="The catalog's API keys (stored hashed).")
catalog_app.add_typer(keys_app, name="keys")
catalog_app.command("serve")(serve_command)
catalog_app.command("publish")(publish_command)

AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


def _role(value: str) -> Role:
    if value not in ROLES:
        fail("keys add", f"--role {value!r} is not known. Use one of: {', '.join(ROLES)}.", 2)
    return value


def _patterns(role: Role, patterns: list[str]) -> tuple[str, ...]:
    from llamon_agent.catalog.access import pattern_problem

    for pattern in patterns:
        problem = pattern_problem(pattern)
        if problem is not None:
            fail("keys add", f"--pattern: {problem}.", 2)
    if role == "admin" and patterns:
        fail("keys add", "an admin key sees and changes every name; leave out --pattern.", 2)
    if role != "admin" and not patterns:
        what = "publish" if role == "publisher" else "see and resolve"
        fail("keys add", f"a {role} key needs --pattern: the names it may {what}.", 2)
    return tuple(dict.fromkeys(patterns))


@keys_app.command("add")
def keys_add_command(
    role: Annotated[str, typer.Option(help="publisher, caller or admin.")],
    label: Annotated[
        str, typer.Option(help="Who holds the key; a publisher's label owns what it publishes.")
    ],
    pattern: Annotated[
        list[str] | None,
        typer.Option(
            "--pattern",
            metavar="GLOB",
            help="A name the key may publish (publisher) or see (caller); '*' and '?' "
            "globs; repeatable.",
        ),
    ] = None,
    database_url: DatabaseUrl = None,
    home: Home = None,
) -> None:
    """Create a key and print it once (alone on stdout); only its hash is stored."""
    from llamon_agent.catalog.access import hash_key, new_key

    checked = _role(role)
    patterns = _patterns(checked, pattern or [])
    if not label.strip():
        fail("keys add", "--label must not be empty.", 2)

    async def add() -> int:
        async with catalog_store("keys add", database_url, home) as store:
            same = [k for k in await store.list_keys() if k.label == label]
            await store.add_key(
                CatalogKey(hash_key(key), checked, label, patterns, created_at=time.time())
            )
            return len(same)

    key = new_key()
    others = asyncio.run(add())
    shown = ", ".join(patterns) if patterns else "every name"
    typer.echo(
        f"llamon catalog keys add: added {'an' if checked == 'admin' else 'a'} {checked} key "
        f"labelled {label!r} ({shown}). "
        "It is shown once, below; only its hash is stored.",
        err=True,
    )
    if others:
        typer.echo(
            f"  {others + 1} keys are now labelled {label!r}; keys revoke --label "
            f"{label} removes them all.",
            err=True,
        )
    typer.echo(key)


@keys_app.command("list")
def keys_list_command(
    as_json: AsJson = False, database_url: DatabaseUrl = None, home: Home = None
) -> None:
    """Every key: label, role, patterns and when it was created (never the key or its hash)."""

    async def read() -> list[CatalogKey]:
        async with catalog_store("keys list", database_url, home) as store:
            return await store.list_keys()

    keys = asyncio.run(read())
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        "label": k.label,
                        "role": k.role,
                        "patterns": list(k.patterns),
                        "created": iso_time(k.created_at),
                    }
                    for k in keys
                ],
                indent=2,
            )
        )
        return
    if not keys:
        typer.echo(
            "No keys. Create one: llamon catalog keys add --role admin --label NAME", err=True
        )
        return
    table = Table("label", "role", "patterns", "created")
    for k in keys:
        table.add_row(k.label, k.role, " ".join(k.patterns) or "*", iso_time(k.created_at))
    Console().print(table)


@keys_app.command("revoke")
def keys_revoke_command(
    label: Annotated[str, typer.Option(help="The label of the key(s) to remove.")],
    database_url: DatabaseUrl = None,
    home: Home = None,
) -> None:
    """Remove every key labelled ``--label``; the catalog refuses them from the next request."""

    async def revoke() -> int:
        async with catalog_store("keys revoke", database_url, home) as store:
            return await store.delete_keys(label)

    removed = asyncio.run(revoke())
    if not removed:
        fail("keys revoke", f"no key is labelled {label!r} (llamon catalog keys list).", 1)
    typer.echo(
        f"llamon catalog keys revoke: removed {removed} key(s) labelled {label!r}.", err=True
    )


@catalog_app.command("list")
def list_command(
    as_json: AsJson = False,
    show_all: Annotated[
        bool, typer.Option("--all", help="Also the agents whose every version is deleted.")
    ] = False,
    database_url: DatabaseUrl = None,
    home: Home = None,
) -> None:
    """The governance view: one row per agent (versions, latest, status, health, owner,
    last seen)."""

    async def read() -> list[AgentRow]:
        async with catalog_store("list", database_url, home) as store:
            return await governance_rows(store, include_deleted=show_all)

    agents = asyncio.run(read())
    if as_json:
        typer.echo(json.dumps(rows_json(agents), indent=2))
        return
    if not agents:
        typer.echo(
            "No agents. Publish one: llamon catalog publish --url CATALOG --card FILE", err=True
        )
        return
    table = Table("name", "versions", "latest", "status", "health", "owner", "last seen")
    for row in agents:
        versions = str(row.versions) + (f" (+{row.deleted} deleted)" if row.deleted else "")
        health = row.health + (f" {row.last_failure}" if row.last_failure else "")
        table.add_row(
            row.name,
            versions,
            row.latest or "-",
            row.status,
            health,
            row.owner,
            iso_time(row.last_seen) or "never",
        )
    Console().print(table)
