"""Running a served agent: open the stores, reconcile crashed tasks, then serve.

``await serve_agent(agent, card)`` uses the embedded default (SQLite under
``LLAMON_HOME`` for tasks and flow checkpoints), ends ``failed`` / ``worker_lost`` every task
a crashed process of this worker left ``working``, and serves on ``host:port`` until
stopped. A flow (``GraphBuilder`` or compiled graph) without a checkpointer gets one of
the same kind as the task store. Every task's runner events are kept in the store
(``stores.events``, read by ``llamon task ID``) unless ``ServeOptions(keep_events=False)``;
a bus is made for them when ``ServeOptions.events`` gives none. ``load_target``
resolves ``"module:attribute"`` (or ``path/to/file.py:attribute``) for ``llamon serve``.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import socket
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from a2a.types import AgentCard

from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill
from llamon_agent.a2a.console import ConsoleOptions, exposure_problem, is_loopback
from llamon_agent.a2a.protocol import RequestLimits
from llamon_agent.a2a.push_policy import PushPolicy
from llamon_agent.a2a.serve_logging import LogFormat, serve_log_config
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import (
    EventRetention,
    FailureRetention,
    MemoryLimits,
    StoreKind,
    open_stores,
    reconcile_orphaned_tasks,
)
from llamon_agent.core.events import EventBus

if TYPE_CHECKING:
    from llamon_agent.a2a.catalog_publish import CatalogPublisher

__all__ = [
    "ServeOptions",
    "bind_socket",
    "default_card",
    "fault_injection_problem",
    "load_agent",
    "load_card",
    "load_target",
    "serve_agent",
]

logger = logging.getLogger("llamon_agent.a2a")


@dataclass(frozen=True)
class ServeOptions:
    """How to serve: address, store, auth, limits, and crash reconciliation."""

    host: str = "127.0.0.1"
    port: int = 8000
    store: StoreKind | None = None
    database_url: str | None = None
    auth: AuthConfig | None = None
    limits: RequestLimits | None = None
    reconcile: bool = True
    log_level: str = "warning"
    """Threshold of the server's log lines (uvicorn's, a2a-sdk's and llamon's)."""
    log_format: LogFormat | None = None
    """``"text"`` or ``"json"``: one line per record on stderr, for every logger (a failed
    task's line included, at INFO). ``None`` keeps uvicorn's own logging setup."""
    access_log: bool = True
    """uvicorn's access log: a line per HTTP request, at INFO."""
    gc_freeze: bool = True
    """Passed to ``create_app``: freeze the startup heap out of full garbage collections."""
    memory_limits: MemoryLimits | None = None
    """Limits of the ``memory`` store (``open_stores(memory_limits=)``); only with it."""
    push_policy: PushPolicy | None = None
    """Which webhook URLs push notifications may reach (``create_app(push_policy=)``);
    ``None``: http(s) to public addresses, plus the networks in ``LLAMON_PUSH_ALLOW``."""
    failure_retention: FailureRetention | None = None
    """How long and how many failed tasks' failures the store keeps
    (``open_stores(failure_retention=)``); ``None``: 30 days / 100 000, or ``LLAMON_FAILURES_*``."""
    idempotency_window: float | None = None
    """Seconds a repeated send is answered with the task it started
    (``create_app(idempotency_window=)``); ``None``: ``LLAMON_IDEMPOTENCY_WINDOW``, else 24 h."""
    events: EventBus | None = None
    """The bus runner events go to (``create_app(events=)``; serves ``/tasks/{id}/events``)."""
    metrics: bool = False
    """Serve ``GET /metrics`` (``create_app(metrics=)``; needs the ``otel`` extra)."""
    keep_events: bool = True
    """Keep every task's runner events in the store (``stores.events``, shown by ``llamon
    task ID``); without ``events`` a bus is made for it. ``False``: none are kept."""
    events_retention: EventRetention | None = None
    """How long and how many kept events the store holds (``open_stores(events_retention=)``);
    ``None``: 7 days / 1 000 000, or ``LLAMON_EVENTS_*``."""
    console: ConsoleOptions | None = None
    """Serve the web console at ``/console`` (``create_app(console=)``), reading the
    store's task events; without ``auth`` only on a loopback address."""
    allow_fault_injection: bool = False
    """Apply the fault plan a request's metadata carries (``create_app(allow_fault_injection=)``,
    Quality Lab runs); only on a loopback address unless ``force_fault_injection``."""
    force_fault_injection: bool = False
    """Allow fault injection on an address that is not loopback as well."""
    publish_to: str | None = None
    """An Agent Catalog's URL: once listening, the served card is published there in the
    background (``a2a.catalog_publish``; a failure is a WARNING, serving goes on)."""
    publish_key: str | None = field(default=None, repr=False)
    """The key sent to ``publish_to`` (``None``: ``LLAMON_CATALOG_KEY``)."""
    publish_name: str | None = None
    """The catalog name to publish as (``None``: the card's name, lowercase words joined
    by ``-``)."""
    deprecate_on_shutdown: bool = False
    """On a clean shutdown, mark the published version ``deprecated`` in the catalog."""
    redis_url: str | None = field(default=None, repr=False)
    """Relay live task events across replicas through this Redis (``create_app(redis_url=)``;
    needs the ``redis`` extra), and end the tasks of replicas that stop beating there
    (``a2a.liveness``); ``None``: neither. A Redis that does not answer at startup is
    refused (``RelayUnavailableError``) before anything is opened."""
    heartbeat: float | None = None
    """Seconds between this worker's beats in Redis (``create_app(heartbeat=)``); ``None``:
    ``LLAMON_HEARTBEAT_SECONDS``, else 5."""
    worker_lease: float | None = None
    """Seconds without a beat after which a replica counts as dead
    (``create_app(worker_lease=)``); ``None``: ``LLAMON_WORKER_LEASE_SECONDS``, else 15."""


def fault_injection_problem(host: str, *, force: bool = False) -> str | None:
    """Why fault injection may not be allowed on ``host``, or ``None``: anyone who reaches
    the server could make its requests fail, so only a loopback address (``localhost``,
    ``127.x.x.x``, ``::1``) may serve it, unless ``force``."""
    if force or is_loopback(host):
        return None
    return (
        f"fault injection would listen on {host}, not on loopback: anyone reaching it could "
        "make its requests fail; serve on 127.0.0.1, or pass --force-fault-injection"
    )


def load_target(target: str) -> Any:
    """The object named by ``"package.module:attr"`` or ``"path/file.py:attr"``.

    Raises ``ValueError`` naming what could not be found.
    """
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"expected 'module:attribute', got {target!r}")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise ValueError(f"no such file: {module_name!r}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:  # pragma: no cover - a .py file always loads
            raise ValueError(f"cannot load {module_name!r}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
    else:
        if "" not in sys.path:
            sys.path.insert(0, "")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(f"cannot import {module_name!r}: {exc}") from exc
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"{module_name!r} has no attribute {attribute!r}") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def load_agent(target: str) -> object:
    """The agent named by ``target`` (``module:attr`` or ``path/file.py:attr``), checked to
    be something ``create_app`` serves (a ``GraphBuilder`` flow is returned as it is).

    Raises ``ValueError`` with a message to show as it is: what could not be loaded, or what
    the object is instead of an agent, and what to point at.
    """
    from llamon_agent.a2a.agent import as_agent

    try:
        agent = load_target(target)
    except (ValueError, OSError) as exc:
        raise ValueError(
            f"cannot load the agent {target!r}: {exc}.\n"
            "  Name it as module:attribute or path/to/file.py:attribute."
        ) from exc
    if "langgraph" in sys.modules:
        from llamon_agent.flow.builder import GraphBuilder

        if isinstance(agent, GraphBuilder):  # compiled when served (with a checkpointer)
            return agent
    try:
        as_agent(agent)
    except TypeError:
        raise ValueError(
            f"{target} is a {type(agent).__name__}, not an agent.\n"
            "  Point it at an 'async def fn(ctx)' function or generator, an object with "
            "'async def invoke(ctx)', or a LangGraph graph."
        ) from None
    return agent


def load_card(card: str) -> AgentCard:
    """The card named by ``card``: ``module:attr``, ``path/file.py:attr`` or a card JSON
    file. Raises ``ValueError`` with a message to show as it is."""
    try:
        if card.endswith(".json") and ":" not in card:
            return AgentCard.model_validate_json(Path(card).read_text(encoding="utf-8"))
        loaded = load_target(card)
    except (ValueError, OSError) as exc:
        raise ValueError(
            f"cannot load the card {card!r}: {_first_line(exc)}.\n"
            "  Give --card module:attribute, path/to/file.py:attribute or a card JSON file."
        ) from exc
    if not isinstance(loaded, AgentCard):
        raise ValueError(
            f"--card {card} is a {type(loaded).__name__}, not an AgentCard.\n"
            "  Point it at a card built with build_agent_card(...)."
        )
    return loaded


def default_card(agent: object, url: str, auth: AuthConfig | None = None) -> AgentCard:
    """A card for an agent that brought none: its name and docstring, one skill, and the
    security scheme ``auth`` enforces."""
    name = str(getattr(agent, "name", None) or getattr(agent, "__name__", "agent"))
    doc = (getattr(agent, "__doc__", None) or "").strip().splitlines()
    description = doc[0] if doc else _default_description(name)
    return build_agent_card(
        name=name,
        description=description,
        url=url,
        version="0.1.0",
        skills=[skill(name, name, description)],
        auth=_spec_for(auth),
    )


def _default_description(name: str) -> str:
    """What a card says of an agent without a docstring: what it takes and how it fails."""
    generic = name.strip().lower() in _GENERIC_NAMES
    subject = "Answers" if generic else f"The {name!r} agent: answers"
    return (
        f"{subject} text or JSON messages over A2A. A failure comes back as a failed task "
        "carrying an errorCode and reason."
    )


_GENERIC_NAMES = frozenset({"", "agent", "app", "graph", "flow", "main", "handler"})


def _spec_for(auth: AuthConfig | None) -> AuthSpec | None:
    if auth is None:
        return None
    if auth.scheme == "bearer":
        return AuthSpec.bearer()
    return AuthSpec.api_key(auth.header)


class _Server(uvicorn.Server):
    """uvicorn's server, running ``after_shutdown`` once a clean shutdown is done (before
    uvicorn hands a caught SIGINT/SIGTERM back to the process)."""

    def __init__(
        self, config: uvicorn.Config, after_shutdown: Callable[[], Awaitable[None]] | None
    ) -> None:
        super().__init__(config)
        self._after_shutdown = after_shutdown

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        if self._after_shutdown is not None:
            await self._after_shutdown()


async def _exit_on(event: asyncio.Event, server: uvicorn.Server) -> None:
    await event.wait()
    server.should_exit = True


def _publisher(options: ServeOptions) -> CatalogPublisher | None:
    """The publisher of ``options.publish_to``, or None."""
    if not options.publish_to:
        return None
    from llamon_agent.a2a.catalog_publish import CatalogPublisher, PublishTarget

    target = PublishTarget(
        options.publish_to,
        key=options.publish_key,
        name=options.publish_name,
        deprecate_on_shutdown=options.deprecate_on_shutdown,
    )
    return CatalogPublisher(target)


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port`` (``port=0`` picks a free one).

    Raises ``OSError`` (``EADDRINUSE`` for a port in use), ``OverflowError`` for a port
    outside 0-65535 and ``socket.gaierror`` for an unknown host.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say so; without it every
    # keep-alive response after a connection's first stalls ~40 ms (Nagle + delayed ACK)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


async def serve_agent(
    agent: object,
    card: AgentCard | None = None,
    options: ServeOptions | None = None,
    *,
    on_ready: Callable[[str], None] | None = None,
    shutdown: asyncio.Event | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serve ``agent`` until the process is stopped (SIGINT/SIGTERM) or ``shutdown`` is set.

    With ``options.publish_to``, the served card is published to that Agent Catalog in the
    background once the socket listens, and (``deprecate_on_shutdown``) marked deprecated
    after a clean shutdown; see ``llamon_agent.a2a.catalog_publish``.

    ``on_ready(url)`` is called once the socket listens (``port=0`` picks a free port).
    ``sock``: a socket from ``bind_socket`` to serve on instead of ``options.host/port``
    (closed when serving ends). ``ValueError`` before anything listens when a console
    without credentials, or fault injection without ``force_fault_injection``, would be
    served on an address that is not loopback. With ``options.redis_url``, a Redis that
    does not answer a ``PING`` raises ``RelayUnavailableError`` before any store is opened.
    """
    options = options or ServeOptions()
    bound = options.host if sock is None else str(sock.getsockname()[0])
    if options.console is not None:  # before binding: never open, not even for a moment
        problem = exposure_problem(bound, options.auth)
        if problem is not None:
            raise ValueError(problem)
    if options.allow_fault_injection:
        problem = fault_injection_problem(bound, force=options.force_fault_injection)
        if problem is not None:
            raise ValueError(problem)
    if options.redis_url is not None:
        from llamon_agent.a2a.liveness import check_redis  # the redis extra's

        await check_redis(options.redis_url)
    sock = sock or bind_socket(options.host, options.port)
    host, port = sock.getsockname()[:2]
    url = f"http://{host}:{port}/"
    stores = await open_stores(
        options.store,
        dsn=options.database_url,
        memory_limits=options.memory_limits,
        failure_retention=options.failure_retention,
        events_retention=options.events_retention,
    )
    exits = AsyncExitStack()
    try:
        if options.reconcile:
            ended = await reconcile_orphaned_tasks(stores)
            if ended:
                logger.warning(
                    "ended %d task(s) left working by a stopped worker: failed/worker_lost",
                    len(ended),
                )
        card = (card or default_card(agent, url, options.auth)).model_copy(update={"url": url})
        served = agent
        if "langgraph" in sys.modules:  # a flow exists only if LangGraph is loaded
            from llamon_agent.flow.checkpointers import attach_checkpointer, open_checkpointer

            saver = await exits.enter_async_context(
                open_checkpointer(stores.kind, dsn=options.database_url)
            )
            served = attach_checkpointer(agent, saver)
        event_store = stores.events if options.keep_events else None
        app = create_app(
            served,
            card,
            task_store=stores.task_store,
            push_config_store=stores.push_config_store,
            auth=options.auth,
            limits=options.limits,
            gc_freeze=options.gc_freeze,
            push_policy=options.push_policy,
            idempotency_window=options.idempotency_window,
            failure_store=stores.failures,
            events=options.events,
            metrics=options.metrics,
            event_store=event_store,
            console=options.console,
            allow_fault_injection=options.allow_fault_injection,
            redis_url=options.redis_url,
            heartbeat=options.heartbeat,
            worker_lease=options.worker_lease,
        )
        logging_setup: dict[str, Any] = {}
        if options.log_format is not None:
            logging_setup["log_config"] = serve_log_config(options.log_level, options.log_format)
        publisher = _publisher(options)
        finished = False

        async def after_shutdown() -> None:
            nonlocal finished
            finished = True
            if publisher is not None:
                await publisher.finish(clean=True)

        server = _Server(
            uvicorn.Config(
                app,
                log_level=options.log_level,
                access_log=options.access_log,
                lifespan="on",
                timeout_graceful_shutdown=5,
                **logging_setup,
            ),
            after_shutdown,
        )
        if shutdown is not None:
            watcher = asyncio.create_task(_exit_on(shutdown, server))
        if on_ready is not None:
            on_ready(url)
        if publisher is not None:
            publisher.start(card)
        try:
            await server.serve(sockets=[sock])
        finally:
            if shutdown is not None:
                watcher.cancel()
            if publisher is not None and not finished:
                await publisher.finish(clean=False)
    finally:
        sock.close()
        await exits.aclose()
        await stores.close()
