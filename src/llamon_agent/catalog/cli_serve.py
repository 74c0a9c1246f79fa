"""``llamon catalog serve``: the Agent Catalog's HTTP API with its health prober.

What the operator sees: the store opens first (SQLite ``catalog.db`` under ``--home``, or
PostgreSQL at ``--database-url``); a store that cannot be opened is one line on stderr, exit
status 2, and nothing listens. Then, on stderr, a warning when the address is not loopback
while no key exists (every ``/v0`` route would refuse every request; create one with
``llamon catalog keys add``) or with ``--open-read`` (anyone reaching the address reads
every name), and ``llamon: catalog serving at URL (store: ...)`` once the socket listens.
The prober checks each active version every ``--probe-interval`` seconds (backing off on
failures, the wait doubling up to ``MAX_BACKOFF``), at most ``--probe-concurrency`` at a
time, each within ``--probe-timeout``; ``--no-probe`` serves without it (health stays
``unknown``). SIGINT/SIGTERM stop it.
"""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from llamon_agent.a2a.console import is_loopback
from llamon_agent.a2a.serve import bind_socket
from llamon_agent.a2a.serve_logging import LOG_LEVELS, serve_log_config
from llamon_agent.catalog.cli_store import (
    DatabaseUrl,
    Home,
    catalog_store,
    fail,
    store_description,
)
from llamon_agent.catalog.store import CatalogStore
from llamon_agent.cli_errors import listen_problem

if TYPE_CHECKING:
    from llamon_agent.catalog.health import HealthProber

__all__ = ["MAX_BACKOFF", "exposure_warnings", "serve_command"]

MAX_BACKOFF: Final = 600.0
"""The longest wait between two probes of a failing version, in seconds (at least the
interval)."""


def exposure_warnings(host: str, *, keys: int, open_read: bool) -> list[str]:
    """The warnings for serving on ``host`` with ``keys`` stored keys and ``open_read``."""
    if is_loopback(host):
        return []
    warnings: list[str] = []
    if open_read:
        warnings.append(
            f"warning: --open-read on {host}: anyone who reaches this address can search and "
            "resolve every agent."
        )
    if keys == 0:
        warnings.append(
            f"warning: listening on {host} with no key configured: every /v0 request is "
            "refused until you add one (llamon catalog keys add --role admin --label NAME)."
        )
    return warnings


async def _serve(
    store: CatalogStore,
    sock: socket.socket,
    *,
    open_read: bool,
    max_card_bytes: int | None,
    probe: dict[str, float] | None,
    log_level: str,
    ready: str,
) -> None:
    import uvicorn

    from llamon_agent.catalog.app import create_catalog_app
    from llamon_agent.catalog.health import HealthProber

    sizes: dict[str, Any] = {} if max_card_bytes is None else {"max_card_bytes": max_card_bytes}
    prober: HealthProber | None = None
    if probe is not None:
        prober = HealthProber(
            store,
            interval=probe["interval"],
            timeout=probe["timeout"],
            concurrency=int(probe["concurrency"]),
            max_backoff=max(MAX_BACKOFF, probe["interval"]),
            **sizes,
        )
    app = create_catalog_app(store, open_read=open_read, prober=prober, **sizes)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level=log_level,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
            log_config=serve_log_config(log_level, "text"),
        )
    )
    host, port = sock.getsockname()[:2]
    typer.echo(f"llamon: catalog serving at http://{host}:{port}/ ({ready})", err=True)
    await server.serve(sockets=[sock])


def serve_command(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8700,
    database_url: DatabaseUrl = None,
    home: Home = None,
    open_read: Annotated[
        bool,
        typer.Option("--open-read", help="Let GET routes without a key see every name."),
    ] = False,
    probe_interval: Annotated[
        float, typer.Option(help="Seconds between two probes of a healthy version.")
    ] = 30.0,
    probe_timeout: Annotated[float, typer.Option(help="Seconds one probe may take.")] = 5.0,
    probe_concurrency: Annotated[int, typer.Option(help="Probes running at once.")] = 8,
    no_probe: Annotated[
        bool, typer.Option("--no-probe", help="Do not probe health (it stays unknown).")
    ] = False,
    max_card_bytes: Annotated[
        int | None,
        typer.Option(help="Largest card (and publish body) accepted, in bytes (default 256 KiB)."),
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
) -> None:
    """Serve the Agent Catalog's HTTP API until stopped."""
    level = log_level.lower()
    if level not in LOG_LEVELS:
        fail(
            "serve",
            f"--log-level {log_level!r} is not known. Use one of: {', '.join(LOG_LEVELS)}.",
            2,
        )
    if not 0 <= port <= 65535:
        fail("serve", f"--port {port} is out of range. Use a port from 1 to 65535 (0: any).", 2)
    if min(probe_interval, probe_timeout) <= 0 or probe_concurrency < 1:
        fail(
            "serve",
            "--probe-interval and --probe-timeout must be above 0, --probe-concurrency at least 1.",
            2,
        )
    if max_card_bytes is not None and max_card_bytes < 1:
        fail("serve", "--max-card-bytes must be at least 1.", 2)
    probe = (
        None
        if no_probe
        else {
            "interval": probe_interval,
            "timeout": probe_timeout,
            "concurrency": probe_concurrency,
        }
    )

    async def run() -> None:
        async with catalog_store("serve", database_url, home) as store:
            for line in exposure_warnings(
                host, keys=len(await store.list_keys()), open_read=open_read
            ):
                typer.echo(f"llamon catalog serve: {line}", err=True)
            try:
                sock = bind_socket(host, port)
            except (OSError, OverflowError) as exc:
                problem = listen_problem(exc, host=host, port=port) or str(exc)
                fail("serve", " ".join(p.strip() for p in problem.splitlines()), 1)
            try:
                await _serve(
                    store,
                    sock,
                    open_read=open_read,
                    max_card_bytes=max_card_bytes,
                    probe=probe,
                    log_level=level,
                    ready=f"store: {store_description(database_url, home)}",
                )
            finally:
                sock.close()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        typer.echo("llamon catalog serve: stopped.", err=True)
