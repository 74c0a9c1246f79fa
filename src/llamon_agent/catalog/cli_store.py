"""Opening the catalog's store for a ``llamon catalog`` command, with one line on failure.

``catalog_store(command, database_url, home)`` is an async context manager giving the
opened ``CatalogStore`` (closed on exit). A store that cannot be opened prints one line
``llamon catalog <command>: ...`` on stderr and exits with status 2, never a traceback:
a URL that is neither SQLite nor PostgreSQL, a database written by a newer llamon (the line
names both schema versions), a PostgreSQL server that refuses the connection, rejects the
login or lacks the database, a SQLite file that is corrupt or cannot be written. No line
repeats the database URL, a password or a database host.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from llamon_agent.catalog.store import CatalogStore, open_catalog_store
from llamon_agent.cli_errors import store_problem
from llamon_agent.core.settings import DATABASE_URL_ENV, HOME_ENV, llamon_home

__all__ = ["DatabaseUrl", "Home", "catalog_store", "fail", "store_description"]

DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar=DATABASE_URL_ENV,
        help="PostgreSQL DSN of the catalog (default: SQLite catalog.db under --home).",
    ),
]
Home = Annotated[
    Path | None,
    typer.Option("--home", envvar=HOME_ENV, help="Directory of catalog.db (default ~/.llamon)."),
]

SQLITE_FILENAME = "catalog.db"


def fail(command: str, message: str, code: int) -> NoReturn:
    """Print ``llamon catalog <command>: <message>`` on stderr and exit with ``code``."""
    typer.echo(f"llamon catalog {command}: {message}", err=True)
    raise typer.Exit(code)


def store_description(database_url: str | None, home: Path | None) -> str:
    """What the operator is told the catalog stores in: the SQLite file's path, or
    ``PostgreSQL`` (never the URL, which may hold a password and names the host)."""
    if database_url and not database_url.startswith("sqlite"):
        return "PostgreSQL"
    return f"SQLite {((home or llamon_home()) / SQLITE_FILENAME).absolute()}"


def _problem(exc: BaseException, database_url: str | None, home: Path | None) -> str:
    """One line saying why the store could not be opened and what to do."""
    if isinstance(exc, ValueError):  # another scheme; a schema newer than this llamon's
        return str(exc).rstrip(".") + "."
    postgres = bool(database_url) and not str(database_url).startswith("sqlite")
    if postgres:
        known = store_problem(exc, home="")
        if known is not None:
            return " ".join(part.strip() for part in known.splitlines())
        return (
            f"cannot open the PostgreSQL catalog named in --database-url "
            f"({type(exc).__name__}). Check that the server runs and the URL is right."
        )
    where = store_description(database_url, home)
    detail = str(exc).splitlines()[0] if isinstance(exc, OSError | sqlite3.Error) else ""
    return (
        f"cannot open the catalog database ({where}: {type(exc).__name__}"
        f"{': ' + detail if detail else ''}). Point --home (or LLAMON_HOME) at a writable "
        "directory, or move a damaged catalog.db away."
    )


@asynccontextmanager
async def catalog_store(
    command: str, database_url: str | None, home: Path | None
) -> AsyncIterator[CatalogStore]:
    """The catalog's store, opened for ``command`` (see the module docstring)."""
    try:
        if home is not None:
            await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
        store = await open_catalog_store(database_url or None, home=home)
    except ImportError as exc:
        fail(command, str(exc), 2)
    except Exception as exc:
        fail(command, _problem(exc, database_url, home), 2)
    try:
        yield store
    finally:
        await store.close()
