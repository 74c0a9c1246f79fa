"""The ``llamon`` command.

* ``llamon demo`` serves the example agent on the embedded default and shows, for each
  kind of answer, what an A2A client receives.
* ``llamon serve module:agent`` serves your agent (``--card``, ``--store``, ``--api-key`` ...;
  ``--console`` adds the web console at ``/console``).
* ``llamon console`` serves the web console alone over the store ``serve`` writes.
* ``llamon card lint URL|FILE`` checks an agent card against the card-writing rules.
* ``llamon failures`` lists failed tasks' failures (``--by reason`` counts them), ``llamon
  tasks`` the newest tasks and ``llamon task ID`` one task, from the store ``serve`` writes.
* ``llamon catalog serve|keys|list|publish`` runs the Agent Catalog, manages its keys,
  shows its governance view and publishes cards to it (docs/catalog.md).
* ``llamon errors`` prints the error model: the eight error codes, the exception mapping
  table (with your rows when ``--import`` names your module), the JSON-RPC code table and
  the reason catalog; ``--json`` prints it as one JSON document.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Awaitable
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from llamon_agent.a2a.card.cli import card_app
from llamon_agent.a2a.serve_logging import LOG_FORMATS, LOG_LEVELS
from llamon_agent.a2a.stores import MemoryLimits
from llamon_agent.a2a.stores.failures_cli import (
    DatabaseUrl,
    Home,
    failures_command,
    task_command,
    tasks_command,
)
from llamon_agent.a2a.stores.triage_cli import triage_command
from llamon_agent.catalog.cli import catalog_app
from llamon_agent.cli_errors import UserError, listen_problem, redis_problem, store_problem
from llamon_agent.core.catalog import reason_catalog
from llamon_agent.core.classify import registered_rules
from llamon_agent.core.codes import ERROR_CODE_TABLE, JSON_RPC_CODE_TO_ERROR_CODE
from llamon_agent.core.events import EventBus
from llamon_agent.core.settings import (
    API_KEY_ENV,
    BEARER_TOKEN_ENV,
    CATALOG_KEY_ENV,
    DATABASE_URL_ENV,
    HOME_ENV,
    StoreKind,
    catalog_key_setting,
    relay_expire_setting,
    relay_maxlen_setting,
)
from llamon_agent.lab.cli import lab_app

if TYPE_CHECKING:
    from a2a.types import AgentCard

    from llamon_agent.a2a.auth import AuthConfig
    from llamon_agent.a2a.push_policy import PushPolicy
    from llamon_agent.a2a.serve import ServeOptions

__all__ = ["app", "main"]

app = typer.Typer(
    name="llamon",
    help="llamon-agent: A2A agents whose every failure is a structured, safe value.",
    no_args_is_help=True,
    add_completion=False,
)


app.add_typer(card_app, name="card", help="Build and check agent cards.")
app.add_typer(lab_app, name="lab", help="Quality Lab: check, run and learn case files.")
app.add_typer(
    catalog_app,
    name="catalog",
    help="Agent Catalog: serve it, manage its keys, list and publish agents.",
)
app.command("failures")(failures_command)
app.command("tasks")(tasks_command)
app.command("task")(task_command)
app.command("triage")(triage_command)


@app.callback()
def _root() -> None:
    """llamon-agent command line."""


@app.command("demo")
def demo_command(
    store: Annotated[
        str, typer.Option(help="Task store: sqlite (embedded default), memory or postgres.")
    ] = "sqlite",
    console: Annotated[
        bool,
        typer.Option(
            "--console",
            help="Then keep the demo server running with the web console, until Ctrl-C.",
        ),
    ] = False,
) -> None:
    """Serve the example agent and show each kind of answer a client receives."""
    import asyncio

    from llamon_agent.demo import print_results, run_demo

    if not console:
        results = asyncio.run(run_demo(store=_store_kind(store)))
        print_results(results)
        if not all(result.expected for result in results):
            raise typer.Exit(1)
        return

    async def keep_serving(url: str, results: list[Any], stopped: Awaitable[Any]) -> None:
        print_results(results)
        typer.echo(
            f"\nThe web console: {url}console\n"
            "  No sign-in: the demo has no credentials, so it listens on 127.0.0.1 only.\n"
            "  Press Ctrl-C to stop."
        )
        await stopped

    try:
        asyncio.run(run_demo(store=_store_kind(store), console=keep_serving))
    except KeyboardInterrupt:
        typer.echo("stopped.")


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
        raise UserError(
            f"--max-finished/--max-finished-age bound the memory store; the store is {kind}.\n"
            "  Add --store memory, or drop those options."
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
        raise UserError(f"{exc}.") from exc


def _events_bus(target: str) -> EventBus:
    """A bus writing JSON lines to ``target`` (a file appended to, or ``-`` for stderr)."""
    bus = EventBus()
    try:
        bus.subscribe_jsonl(sys.stderr if target == "-" else target)
    except OSError as exc:
        raise UserError(f"--events-jsonl: cannot open {target!r} ({exc.strerror}).") from exc
    return bus


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
        str | None, typer.Option(envvar=DATABASE_URL_ENV, help="PostgreSQL DSN.")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar=API_KEY_ENV,
            help="Require this API key (prefer the env var: arguments show in ps).",
        ),
    ] = None,
    bearer_token: Annotated[
        str | None,
        typer.Option(envvar=BEARER_TOKEN_ENV, help="Require this bearer token."),
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
    log_level: Annotated[
        str,
        typer.Option(
            help="debug, info (default: a line per task end and per failed task), warning or error."
        ),
    ] = "info",
    log_format: Annotated[
        str, typer.Option(help="text (default) or json: one line per record on stderr.")
    ] = "text",
    access_log: Annotated[
        bool, typer.Option("--access-log", help="Also log a line per HTTP request (INFO).")
    ] = False,
    events_jsonl: Annotated[
        str | None,
        typer.Option(
            "--events-jsonl",
            metavar="FILE",
            help="Append every runner event to FILE as a JSON line ('-': stderr); also "
            "serves GET /tasks/{id}/events.",
        ),
    ] = None,
    push_allow: Annotated[
        list[str] | None,
        typer.Option(
            "--push-allow",
            metavar="CIDR",
            help="Let push webhooks reach this internal network (repeatable; e.g. "
            "10.1.0.0/16). Default: LLAMON_PUSH_ALLOW, else public addresses only.",
        ),
    ] = None,
    metrics: Annotated[
        bool,
        typer.Option(
            "--metrics",
            help="Serve GET /metrics (Prometheus text; needs llamon-agent[otel]).",
        ),
    ] = False,
    no_keep_events: Annotated[
        bool,
        typer.Option(
            "--no-keep-events",
            help="Do not keep each task's runner events in the store (llamon task ID and "
            "the console then show none).",
        ),
    ] = False,
    console: Annotated[
        bool,
        typer.Option(
            "--console",
            help="Serve the web console at /console (sign-in with the same key or token; "
            "without one, on loopback only).",
        ),
    ] = False,
    allow_fault_injection: Annotated[
        bool,
        typer.Option(
            "--allow-fault-injection",
            help="Apply the fault plan a request's metadata carries (Quality Lab runs; "
            "loopback only). Never in production.",
        ),
    ] = False,
    force_fault_injection: Annotated[
        bool,
        typer.Option(
            "--force-fault-injection",
            help="With --allow-fault-injection: allow it on an address that is not loopback.",
        ),
    ] = False,
    publish_to: Annotated[
        str | None,
        typer.Option(
            "--publish-to",
            metavar="URL",
            help="Publish the served card to the Agent Catalog at URL once listening (in the "
            "background: a failure is logged, the agent keeps serving).",
        ),
    ] = None,
    publish_key_env: Annotated[
        str,
        typer.Option(
            "--publish-key-env",
            metavar="VAR",
            help="The environment variable holding the catalog key for --publish-to.",
        ),
    ] = CATALOG_KEY_ENV,
    publish_name: Annotated[
        str | None,
        typer.Option(
            "--publish-name",
            metavar="NAME",
            help="--publish-to: the catalog name (default: the card's name in lowercase "
            "words joined by '-').",
        ),
    ] = None,
    deprecate_on_shutdown: Annotated[
        bool,
        typer.Option(
            "--deprecate-on-shutdown",
            help="--publish-to: on a clean shutdown, mark the published version deprecated.",
        ),
    ] = False,
    redis_url: Annotated[
        str | None,
        typer.Option(
            "--redis-url",
            metavar="URL",
            help="Relay live task events across replicas through this Redis (redis://...; "
            "needs llamon-agent[redis]).",
        ),
    ] = None,
) -> None:
    """Serve an agent over A2A (JSON-RPC) until stopped."""
    import asyncio

    from llamon_agent.a2a.serve import ServeOptions, bind_socket, serve_agent

    try:
        kind = "postgres" if database_url and store == "sqlite" else store
        options = ServeOptions(
            host=host,
            port=_checked_port(port),
            store=_serve_store_kind(kind, database_url),
            database_url=database_url,
            reconcile=not no_reconcile,
            gc_freeze=not no_gc_freeze,
            memory_limits=_memory_limits(kind, max_finished, max_finished_age),
            log_level=_choice(log_level.lower(), "--log-level", LOG_LEVELS),
            log_format=_choice(log_format.lower(), "--log-format", LOG_FORMATS),  # type: ignore[arg-type]
            access_log=access_log,
            push_policy=_push_policy(push_allow),
            metrics=metrics,
            keep_events=not no_keep_events,
            redis_url=redis_url,
        )
        if metrics:
            _check_metrics_extra()
        if redis_url is not None:
            _check_redis_extra()
        agent = _load_agent(target)
        agent_card = _load_card(card)
        options = replace(options, auth=_auth(agent_card, api_key, bearer_token))
        if events_jsonl is not None:
            options = replace(options, events=_events_bus(events_jsonl))
        if console:
            options = replace(options, console=_console_options(host, options.auth))
        if allow_fault_injection or force_fault_injection:
            options = replace(
                options,
                allow_fault_injection=True,
                force_fault_injection=_fault_injection_forced(
                    host, allow_fault_injection, force_fault_injection
                ),
            )
        options = _publishing(
            options, publish_to, publish_key_env, publish_name, deprecate_on_shutdown
        )
    except UserError as exc:
        _fail(str(exc), 2)
    home = _writable_home() if options.store == "sqlite" else ""
    try:
        sock = bind_socket(options.host, options.port)
    except (OSError, OverflowError) as exc:
        _fail(listen_problem(exc, host=host, port=port) or str(exc), 1)
    started = False

    def ready(url: str) -> None:
        nonlocal started
        started = True
        typer.echo(f"llamon: serving {target} at {url} (store: {options.store})", err=True)

    try:
        asyncio.run(serve_agent(agent, agent_card, options, on_ready=ready, sock=sock))
    except Exception as exc:
        problem = None if started else store_problem(exc, home=home) or redis_problem(exc)
        if problem is None:
            raise
        _fail(problem, 1)


def _publishing(
    options: ServeOptions,
    url: str | None,
    key_env: str,
    name: str | None,
    deprecate: bool,
) -> ServeOptions:
    """``options`` with the ``--publish-to`` settings; ``UserError`` for a URL that is not
    http(s), a publish option without ``--publish-to``, or an empty key variable named
    with ``--publish-key-env``."""
    if url is None:
        if name is not None or deprecate or key_env != CATALOG_KEY_ENV:
            raise UserError(
                "--publish-name, --publish-key-env and --deprecate-on-shutdown need --publish-to."
            )
        return options
    if not url.startswith(("http://", "https://")):
        raise UserError(f"--publish-to {url!r} is not an http:// or https:// URL.")
    key = catalog_key_setting(key_env)
    if key is None and key_env != CATALOG_KEY_ENV:
        raise UserError(f"--publish-key-env {key_env}: that environment variable is not set.")
    return replace(
        options,
        publish_to=url,
        publish_key=key,
        publish_name=name,
        deprecate_on_shutdown=deprecate,
    )


def _fault_injection_forced(host: str, allowed: bool, forced: bool) -> bool:
    """``forced``, once the flags may serve fault injection on ``host``; ``UserError`` for
    ``--force-fault-injection`` alone or a non-loopback host without it."""
    from llamon_agent.a2a.serve import fault_injection_problem

    if not allowed:
        raise UserError("--force-fault-injection needs --allow-fault-injection.")
    problem = fault_injection_problem(host, force=forced)
    if problem is not None:
        raise UserError(problem + ".")
    return forced


def _console_options(host: str, auth: AuthConfig | None) -> Any:
    """``ConsoleOptions()``; ``UserError`` when it would be open on a non-loopback host."""
    from llamon_agent.a2a.console import ConsoleOptions, exposure_problem

    problem = exposure_problem(host, auth)
    if problem is not None:
        raise UserError(problem + ".")
    return ConsoleOptions()


@app.command("console")
def console_command(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8000,
    api_key: Annotated[
        str | None,
        typer.Option(envvar=API_KEY_ENV, help="Sign in with this API key (the agents' own)."),
    ] = None,
    bearer_token: Annotated[
        str | None,
        typer.Option(envvar=BEARER_TOKEN_ENV, help="Sign in with this bearer token."),
    ] = None,
    database_url: DatabaseUrl = None,
    home: Home = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "warning",
) -> None:
    """Serve the web console alone over the store your servers share (read-only)."""
    import asyncio

    from llamon_agent.a2a.console.standalone import serve_console
    from llamon_agent.a2a.serve import bind_socket
    from llamon_agent.a2a.stores.failures_cli import with_store

    try:
        checked_port = _checked_port(port)
        level = _choice(log_level.lower(), "--log-level", LOG_LEVELS)
        auth = _auth(None, api_key, bearer_token)
        _console_options(host, auth)
    except UserError as exc:
        _fail(str(exc), 2, command="console")

    async def run(stores: Any) -> None:
        try:
            sock = bind_socket(host, checked_port)
        except (OSError, OverflowError) as exc:
            _fail(listen_problem(exc, host=host, port=port) or str(exc), 1, command="console")

        def ready(url: str) -> None:
            typer.echo(f"llamon: the console of the {stores.kind} store at {url}", err=True)

        try:
            await serve_console(stores, auth, sock, on_ready=ready, log_level=level)
        finally:
            sock.close()

    asyncio.run(with_store("console", database_url, home, run))


def _check_redis_extra() -> None:
    """``UserError`` naming the extra when ``--redis-url`` cannot be used, or the setting
    when the heartbeat or relay settings do not fit."""
    try:
        from llamon_agent.a2a.liveness import intervals  # the redis extra's package
    except ImportError as exc:
        raise UserError(f"--redis-url: {exc}") from exc
    try:
        intervals()  # LLAMON_HEARTBEAT_SECONDS / LLAMON_WORKER_LEASE_SECONDS
        relay_expire_setting()
        relay_maxlen_setting()
    except ValueError as exc:
        raise UserError(f"--redis-url: {exc}.") from exc


def _check_metrics_extra() -> None:
    """``UserError`` naming the extra when ``--metrics`` cannot be served."""
    try:
        import llamon_agent.a2a.metrics_route  # noqa: F401 - the otel extra's packages
    except ImportError as exc:
        raise UserError(f"--metrics: {exc}") from exc


def _push_policy(allow: list[str] | None) -> PushPolicy | None:
    """The policy ``--push-allow`` asks for; None (the default policy) when not given."""
    if not allow:
        return None
    from llamon_agent.a2a.push_policy import PushPolicy

    try:
        return PushPolicy(allow=allow)
    except ValueError as exc:
        raise UserError(f"--push-allow: {exc}.") from exc


def _fail(message: str, code: int, *, command: str = "serve") -> NoReturn:
    """Print ``llamon <command>: <message>`` on stderr and exit with ``code`` (no
    traceback)."""
    typer.echo(f"llamon {command}: {message}", err=True)
    raise typer.Exit(code)


def _checked_port(port: int) -> int:
    if not 0 <= port <= 65535:
        raise UserError(
            f"--port {port} is out of range.\n  Use a port from 1 to 65535 (0 picks a free one)."
        )
    return port


def _choice(value: str, option: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise UserError(f"{option} {value!r} is not known.\n  Use one of: {', '.join(allowed)}.")
    return value


def _serve_store_kind(kind: str, database_url: str | None) -> StoreKind:
    if kind not in ("sqlite", "memory", "postgres"):
        raise UserError(f"--store {kind!r} is not known.\n  Use sqlite, memory or postgres.")
    if kind == "postgres" and not database_url:
        raise UserError(
            "--store postgres needs the database URL.\n"
            "  Pass --database-url postgresql://USER:PASSWORD@HOST:5432/DB "
            "(or set LLAMON_DATABASE_URL)."
        )
    if kind == "postgres" and database_url:
        from llamon_agent.a2a.stores import normalize_postgres_dsn

        try:
            normalize_postgres_dsn(database_url)
        except ValueError:
            raise UserError(
                "--database-url (or LLAMON_DATABASE_URL) is not a PostgreSQL URL.\n"
                "  Use postgresql://USER:PASSWORD@HOST:5432/DB."
            ) from None
    return kind  # type: ignore[return-value]


def _importable_from_cwd() -> None:
    """Let ``module`` names resolve from the current directory, as with ``python -m``."""
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, "")


def _load_agent(target: str) -> object:
    from llamon_agent.a2a.serve import load_agent

    try:
        return load_agent(target)  # module names resolve from the current directory
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def _load_card(card: str | None) -> AgentCard | None:
    from llamon_agent.a2a.serve import load_card

    if card is None:
        return None
    try:
        return load_card(card)
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def _auth(
    card: AgentCard | None, api_key: str | None, bearer_token: str | None
) -> AuthConfig | None:
    from llamon_agent.a2a.auth import AuthConfig

    if api_key and bearer_token:
        raise UserError("give --api-key or --bearer-token, not both.")
    secret = api_key or bearer_token
    try:
        if card is not None:
            auth = AuthConfig.from_card(card, *([secret] if secret else []))
            if secret and auth is None:
                raise ValueError(
                    "a credential was given but the card declares no security scheme; "
                    "declare it in the card (auth=AuthSpec.api_key()/bearer())"
                )
            return auth
        if api_key:
            return AuthConfig.api_key(api_key)
        return AuthConfig.bearer(bearer_token) if bearer_token else None
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def _writable_home() -> str:
    """``LLAMON_HOME`` (created if missing) as text; exits with a clear line if it is not a
    directory this user can write."""
    from llamon_agent.a2a.stores import llamon_home

    try:
        home = llamon_home()
        probe = home / f".llamon-write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        where = os.environ.get(HOME_ENV) or "~/.llamon"
        _fail(
            f"LLAMON_HOME ({where}) is not a directory this user can write "
            f"({exc.strerror or type(exc).__name__}).\n"
            "  Point LLAMON_HOME at a writable directory, or use --store memory.",
            1,
        )
    return str(home)


def _error_model() -> dict[str, object]:
    return {
        "errorCodes": [
            {
                "code": spec.code.value,
                "meaning": spec.meaning,
                "clientAction": spec.client_action,
                "defaultMessage": spec.message,
                "operatorAction": spec.operator_action,
            }
            for spec in ERROR_CODE_TABLE
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
    _importable_from_cwd()
    for module in imports or []:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            typer.echo(
                f"llamon errors: --import {module}: cannot import it ({exc}).\n"
                "  Run from the directory that holds it, or install it in this environment.",
                err=True,
            )
            raise typer.Exit(2) from None
    console = Console()
    if as_json:
        console.print_json(json.dumps(_error_model(), ensure_ascii=False))
        return

    codes = Table(title="errorCode (clients branch on these; core/codes.py)")
    codes.add_column("errorCode", style="bold", no_wrap=True)
    codes.add_column("meaning")
    codes.add_column("a client should", overflow="fold")
    codes.add_column("operator action", no_wrap=True)
    for entry in ERROR_CODE_TABLE:
        codes.add_row(entry.code.value, entry.meaning, entry.client_action, entry.operator_action)

    mapping = Table(title="exception -> errorCode (core/classify.py, first match in MRO order)")
    rule_rows = registered_rules()
    for column, cells in (
        ("exception", [row.key for row in rule_rows]),
        ("errorCode", [row.code for row in rule_rows]),
        ("errorReason", [row.reason for row in rule_rows]),
        ("retriable", [row.retriable for row in rule_rows]),
    ):
        # a name with spaces must not be measured by its longest word
        mapping.add_column(column, no_wrap=True, min_width=max(map(len, [column, *cells])))
    mapping.add_column("note")
    for row in rule_rows:
        mapping.add_row(row.key, row.code, row.reason, row.retriable, row.note)

    rpc = Table(title="JSON-RPC / A2A code -> errorCode")
    rpc.add_column("code", justify="right", no_wrap=True)
    rpc.add_column("errorCode", no_wrap=True)
    for number, code in JSON_RPC_CODE_TO_ERROR_CODE.items():
        rpc.add_row(str(number), code.value)

    reasons = Table(title="reason catalog (core/catalog.py)")
    for column in ("reason", "stage", "errorCode", "retryable", "operator action"):
        reasons.add_column(column, no_wrap=True)
    for spec in reason_catalog():
        reasons.add_row(
            spec.reason,
            str(spec.stage),
            spec.error_code.value,
            str(spec.retryable).lower(),
            spec.operator_action,
        )

    for table in (codes, mapping, rpc, reasons):
        _print_uncut(console, table)


def _print_uncut(console: Console, table: Table) -> None:
    """Print ``table`` no narrower than its identifiers: on a narrow terminal (or a pipe,
    80 columns) the lines get longer rather than names getting cut."""
    needed = Measurement.get(console, console.options.update_width(10_000), table).minimum
    console.width = max(console.width, needed)
    console.print(table)


def main() -> None:
    """Entry point of the ``llamon`` console script."""
    app()
