"""The servers ``bench_a2a_server.py`` measures, one per process.

Run as ``python bench/a2a_servers.py VARIANT`` (``src/`` on ``PYTHONPATH``): serves the
variant with uvicorn (one worker, log level warning) on a free 127.0.0.1 port, prints
``PORT <n>`` on stdout, and stops by itself when its stdin closes (the orchestrator
closes it, or dies), on SIGTERM/SIGINT, or after ``--max-seconds``.

Variants (the same trivial agent on both sides):

``raw``           a minimal a2a-sdk ``AgentExecutor``: enqueue the task, one
                  ``TaskUpdater.add_artifact``, ``complete()``; served by
                  ``A2AStarletteApplication(card, DefaultRequestHandler(executor,
                  InMemoryTaskStore())).build()``.
``llamon``        ``create_app(agent, card)`` where ``agent`` returns a short text.
``llamon-fail``   ``create_app(agent, card)`` where ``agent`` raises
                  ``ComponentInvokeError("down")`` (failed task, text + data parts).
``llamon-unmapped`` ``create_app(agent, card)`` where ``agent`` raises an unmapped
                  ``RuntimeError`` whose text holds a secret-looking DSN (failed task with an
                  incident id; the ERROR incident line with its scrubbed traceback is logged).
``raw-stream``    a raw executor for ``message/stream``: the task, then the artifact
                  chunks (the first creates the artifact, the others append), ``complete()``.
``llamon-stream`` ``create_app(agent, card)`` where ``agent`` has ``stream(ctx)`` yielding
                  the same chunks, and ``invoke``.

``floor``         no a2a-sdk and no llamon: one bare Starlette route that parses the
                  JSON-RPC body, checks ``method`` is ``message/send`` and answers a canned
                  completed task of the same shape and size as llamon's answer (fresh ids,
                  the message echoed into ``history``, one ``response`` artifact, the
                  ``llamon.*`` metadata). The least a Python server on the same uvicorn
                  settings spends on a send: what the other arms are measured against.

``floor-models``  ``floor`` that does what a direct send path (no a2a-sdk event pipeline)
                  inside llamon could not avoid: the body validated as a2a-sdk's
                  ``SendMessageRequest``, the ``Task`` built from a2a-sdk's pydantic types,
                  saved ``working`` then ``completed`` in llamon's ``BoundedMemoryTaskStore``,
                  and dumped with ``model_dump(mode="json", exclude_none=True)``.

``raw-hold``      a raw executor streaming ``ticking_agent.py``'s ticks (``bench_open_streams.py``
                  holds 1,000 of them open): the task, ``start_work()``, one artifact chunk
                  (a DataPart) per tick, ``complete()``; the message text sets the ticks.

``raw-working``   diagnosis only: ``raw`` plus ``TaskUpdater.start_work()`` (the ``working``
                  status event llamon publishes before running the agent).
``raw-failed``    diagnosis only: ``raw-working`` that ends with ``TaskUpdater.failed`` and
                  the same text + data parts llamon sends for ``ComponentInvokeError("down")``
                  (the a2a-sdk share of the failure path, without llamon's classification,
                  failure record and log line).

Store variants (``bench_stores.py``; the trivial agent, the task store varies):

``raw-memory``      ``raw`` (a2a-sdk ``InMemoryTaskStore``).
``raw-sqlite``      the ``raw`` executor over a2a-sdk's ``DatabaseTaskStore`` as shipped:
                    ``create_async_engine("sqlite+aiosqlite:///DB_DIR/raw.db")``, no pragmas,
                    the table created at startup (``--db-dir`` required).
``llamon-memory``   ``create_app(agent, card, task_store=..., push_config_store=...)`` over
                    ``open_stores("memory")`` (``--max-finished N`` passes
                    ``memory_limits=MemoryLimits(max_finished=N)`` when ``open_stores``
                    takes it, else is ignored with a warning on stderr).
``llamon-sqlite``   the same over ``open_stores("sqlite", home=DB_DIR)``.
``llamon-postgres`` the same over ``open_stores("postgres", dsn=DSN)`` (``--dsn`` required):
                    llamon's own store on asyncpg.
``sdk-postgres``    the same ``create_app`` over a2a-sdk's ``DatabaseTaskStore`` and
                    ``DatabasePushNotificationConfigStore`` on ``create_async_engine`` of the
                    same DSN (``postgresql+asyncpg``, ``pool_pre_ping``): what
                    ``--store postgres`` served before llamon had its own store.
The stores are opened before the server starts and closed after it stops.

Failure-promptness variants (``bench_stores.py failure``; the agent waits ``--io-delay``
seconds, 0.010 by default, a stand-in for I/O; each serves ``message/send`` and
``message/stream``):

``raw-ok``            a raw executor: enqueue the task, sleep, one artifact, ``complete()``.
``raw-raise``         the same, but it raises ``RuntimeError`` after the sleep (a2a-sdk's
                      event consumer notices only at its next 0.5 s poll).
``llamon-ok``         ``create_app`` with an agent whose ``invoke`` sleeps and returns a
                      text, and whose ``stream`` sleeps and yields it as one chunk.
``llamon-raise``      ``invoke`` sleeps and raises ``ComponentInvokeError("down")``;
                      ``stream`` sleeps and raises it before its first chunk (llamon then
                      falls back to ``invoke`` once, which sleeps and raises again).
``llamon-raise-late`` ``stream`` sleeps, yields one chunk, then raises (no fallback);
                      ``invoke`` as ``llamon-raise``.

``--profile FILE`` runs the server under cProfile and writes the stats to FILE on exit.
``--gc-freeze`` (diagnosis) calls ``gc.collect(); gc.freeze()`` once the app is built, so
full collections no longer walk the objects the imports created.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import inspect
import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

REPLY = "pong"
STREAM_CHUNKS = ("Hel", "lo, ", "world")

VARIANTS = (
    "raw",
    "llamon",
    "llamon-fail",
    "llamon-unmapped",
    "raw-stream",
    "llamon-stream",
    "raw-working",
    "raw-failed",
    "llamon-otel",
    "llamon-fail-otel",
    "raw-hold",
    "floor",
    "floor-models",
)
STORE_VARIANTS = (
    "raw-memory",
    "raw-sqlite",
    "llamon-memory",
    "llamon-sqlite",
    "llamon-serve",
    "llamon-postgres",
    "sdk-postgres",
)
FAILURE_VARIANTS = ("raw-ok", "raw-raise", "llamon-ok", "llamon-raise", "llamon-raise-late")
ALL_VARIANTS = VARIANTS + STORE_VARIANTS + FAILURE_VARIANTS

Close = Callable[[], Awaitable[None]]
"""Releases what a variant opened (its stores); awaited after the server stops."""


def bench_card() -> Any:
    """The agent card (the same fields as ``tests/a2a/server_utils.make_card``)."""
    from a2a.types import AgentCapabilities, AgentCard, AgentSkill

    return AgentCard(
        name="bench-agent",
        description="Answers benchmark requests.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        protocol_version="0.3.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="answer", name="Answer", description="Answers one request.", tags=["bench"]
            )
        ],
    )


# -- raw a2a-sdk -------------------------------------------------------------------------


FAILED_DATA = {  # what llamon's failed answer carries for ComponentInvokeError("down")
    "errorCode": "UPSTREAM_UNAVAILABLE",
    "errorReason": "component_invoke_error",
    "errorMessage": "down",
    "retriable": True,
    "retried": 0,
}


async def _submitted(context: Any, event_queue: Any) -> Any:
    """The task of a first message, enqueued ``submitted``: how a raw a2a-sdk executor
    starts a task."""
    from a2a.types import Task, TaskState, TaskStatus

    assert context.message is not None
    task = Task(
        id=str(context.task_id),
        context_id=str(context.context_id),
        status=TaskStatus(state=TaskState.submitted),
        history=[context.message],
    )
    await event_queue.enqueue_event(task)
    return task


def _raw_executor(
    chunks: tuple[str, ...],
    working: bool = False,
    fail: bool = False,
    delay: float = 0.0,
    raise_: bool = False,
) -> Any:
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.tasks import TaskUpdater
    from a2a.types import DataPart, Part, TextPart

    class RawExecutor(AgentExecutor):
        """Enqueue the task, add the artifact (chunk by chunk), complete."""

        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task = context.current_task or await _submitted(context, event_queue)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            if delay:  # a stand-in for the agent's I/O
                await asyncio.sleep(delay)
            if raise_:  # a2a-sdk sees this only through its event consumer's 0.5 s poll
                raise RuntimeError("down")
            if working:
                await updater.start_work()
            if fail:
                parts = [Part(root=TextPart(text="down")), Part(root=DataPart(data=FAILED_DATA))]
                await updater.failed(updater.new_agent_message(parts))
                return
            artifact_id = str(uuid.uuid4())
            for index, chunk in enumerate(chunks):
                await updater.add_artifact(
                    [Part(root=TextPart(text=chunk))],
                    artifact_id=artifact_id,
                    name="response",
                    append=index > 0 or None,
                )
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            raise NotImplementedError

    return RawExecutor()


def _raw_app(
    chunks: tuple[str, ...],
    working: bool = False,
    fail: bool = False,
    task_store: Any = None,
    executor: Any = None,
) -> Any:
    from a2a.server.apps import A2AStarletteApplication
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.tasks import InMemoryTaskStore

    handler = DefaultRequestHandler(
        executor or _raw_executor(chunks, working, fail), task_store or InMemoryTaskStore()
    )
    return A2AStarletteApplication(bench_card(), handler).build()


def _raw_hold_app() -> Any:
    """``raw-hold``: ``ticking_agent.ticks`` as artifact chunks from a raw executor."""
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.tasks import TaskUpdater
    from a2a.types import DataPart, Part
    from ticking_agent import parse_spec, ticks  # bench/ is sys.path[0]

    class HoldExecutor(AgentExecutor):
        """Enqueue the task, start work, one artifact chunk per tick, complete."""

        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task = await _submitted(context, event_queue)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.start_work()
            artifact_id = str(uuid.uuid4())
            async for tick in ticks(parse_spec(context.get_user_input())):
                await updater.add_artifact(
                    [Part(root=DataPart(data=tick))],
                    artifact_id=artifact_id,
                    name="response",
                    append=tick["tick"] > 1 or None,
                )
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            raise NotImplementedError

    return _raw_app((), executor=HoldExecutor())


# -- the floor ----------------------------------------------------------------------------


def _floor_app() -> Any:
    """``floor``: a bare Starlette JSON-RPC endpoint answering ``message/send`` with a
    completed task shaped like llamon's (same keys, same sizes), nothing else."""
    import json
    import time
    from datetime import UTC, datetime

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def error(rpc_id: Any, code: int, message: str) -> JSONResponse:
        return JSONResponse(
            {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}
        )

    async def rpc(request: Request) -> JSONResponse:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error(None, -32700, "Parse error")
        if not isinstance(body, dict):
            return error(None, -32600, "Invalid Request")
        rpc_id = body.get("id")
        if body.get("method") != "message/send":
            return error(rpc_id, -32601, "Method not found")
        message = (body.get("params") or {}).get("message")
        if not isinstance(message, dict) or not message.get("messageId"):
            return error(rpc_id, -32602, "Invalid params")
        task_id, context_id = str(uuid.uuid4()), str(uuid.uuid4())
        message["contextId"], message["taskId"] = context_id, task_id
        task = {
            "artifacts": [
                {
                    "artifactId": str(uuid.uuid4()),
                    "name": "response",
                    "parts": [{"kind": "text", "text": REPLY}],
                }
            ],
            "contextId": context_id,
            "history": [message],
            "id": task_id,
            "kind": "task",
            "metadata": {
                "llamon.worker": "bench",
                "llamon.sent": {
                    "messageId": message["messageId"],
                    "contextId": "",
                    "at": time.time(),
                },
            },
            "status": {"state": "completed", "timestamp": datetime.now(UTC).isoformat()},
        }
        return JSONResponse({"id": rpc_id, "jsonrpc": "2.0", "result": task})

    return Starlette(routes=[Route("/", rpc, methods=["POST"])])


def _floor_models_app() -> Any:
    """``floor-models``: the floor with a2a-sdk's types and two saves to llamon's memory
    store; the same answer (shape and size) as ``floor``."""
    import time
    from datetime import UTC, datetime

    import pydantic
    from a2a.types import (
        Artifact,
        JSONRPCError,
        JSONRPCErrorResponse,
        Part,
        SendMessageRequest,
        SendMessageSuccessResponse,
        Task,
        TaskState,
        TaskStatus,
        TextPart,
    )
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from llamon_agent.a2a.stores.memory import BoundedMemoryTaskStore

    store = BoundedMemoryTaskStore()

    def error(rpc_id: Any, code: int, message: str) -> JSONResponse:
        reply = JSONRPCErrorResponse(id=rpc_id, error=JSONRPCError(code=code, message=message))
        return JSONResponse(reply.model_dump(mode="json", exclude_none=True))

    async def rpc(request: Request) -> JSONResponse:
        try:
            send = SendMessageRequest.model_validate_json(await request.body())
        except pydantic.ValidationError:
            return error(None, -32602, "Invalid params")
        message = send.params.message
        task_id, context_id = str(uuid.uuid4()), str(uuid.uuid4())
        message.task_id, message.context_id = task_id, context_id
        task = Task(
            id=task_id,
            context_id=context_id,
            status=TaskStatus(state=TaskState.working, timestamp=datetime.now(UTC).isoformat()),
            history=[message],
            metadata={
                "llamon.worker": "bench",
                "llamon.sent": {
                    "messageId": message.message_id,
                    "contextId": "",
                    "at": time.time(),
                },
            },
        )
        await store.save(task)
        task.artifacts = [
            Artifact(
                artifact_id=str(uuid.uuid4()),
                name="response",
                parts=[Part(root=TextPart(text=REPLY))],
            )
        ]
        task.status = TaskStatus(state=TaskState.completed, timestamp=datetime.now(UTC).isoformat())
        await store.save(task)
        reply = SendMessageSuccessResponse(id=send.id, result=task)
        return JSONResponse(reply.model_dump(mode="json", exclude_none=True))

    return Starlette(routes=[Route("/", rpc, methods=["POST"])])


# -- llamon --------------------------------------------------------------------------------


def _llamon_app(variant: str) -> Any:
    from llamon_agent.a2a.agent import AgentContext
    from llamon_agent.a2a.server import create_app
    from llamon_agent.exceptions import ComponentInvokeError

    async def trivial(ctx: AgentContext) -> str:
        return REPLY

    async def failing(ctx: AgentContext) -> str:
        raise ComponentInvokeError("down")

    class Streamer:
        """A streaming agent: ``stream`` yields the chunks; ``invoke`` returns them joined."""

        async def invoke(self, ctx: AgentContext) -> str:
            return "".join(STREAM_CHUNKS)

        async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
            for chunk in STREAM_CHUNKS:
                yield chunk

    agent: object = {"llamon": trivial, "llamon-fail": failing, "llamon-stream": Streamer()}[
        variant
    ]
    return create_app(agent, bench_card())


UNMAPPED_TEXT = "connect to postgresql://app:s3cr3t-pw@db.internal:5432/orders failed"


def _llamon_unmapped_app() -> Any:
    """``llamon-unmapped``: the trivial agent raising an exception no table row maps."""
    from llamon_agent.a2a.agent import AgentContext
    from llamon_agent.a2a.server import create_app

    async def unmapped(ctx: AgentContext) -> str:
        raise RuntimeError(UNMAPPED_TEXT)

    return create_app(unmapped, bench_card())


def build_app(variant: str) -> Any:
    """The Starlette app for ``variant``."""
    if variant == "raw":
        return _raw_app((REPLY,))
    if variant == "raw-stream":
        return _raw_app(STREAM_CHUNKS)
    if variant == "raw-working":
        return _raw_app((REPLY,), working=True)
    if variant == "raw-failed":
        return _raw_app((), working=True, fail=True)
    if variant == "raw-hold":
        return _raw_hold_app()
    if variant == "floor":
        return _floor_app()
    if variant == "floor-models":
        return _floor_models_app()
    if variant in ("llamon", "llamon-fail", "llamon-stream"):
        return _llamon_app(variant)
    if variant == "llamon-unmapped":
        return _llamon_unmapped_app()
    if variant in ("llamon-otel", "llamon-fail-otel"):
        install_otel_sdk()
        return _llamon_app(variant.removesuffix("-otel"))
    raise SystemExit(f"unknown variant {variant!r}; one of {', '.join(VARIANTS)}")


def install_otel_sdk() -> None:
    """OpenTelemetry on: an SDK ``TracerProvider`` whose ``BatchSpanProcessor`` hands every
    span to an exporter that drops it (what a real exporter costs is the collector's), and
    an SDK ``MeterProvider`` with an in-memory reader (what ``/metrics`` reads)."""
    from collections.abc import Sequence as _Sequence

    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Dropping(SpanExporter):
        def export(self, spans: _Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


# -- store variants ------------------------------------------------------------------------


async def _raw_sqlite_store(db_dir: str) -> tuple[Any, Close]:
    """a2a-sdk's ``DatabaseTaskStore`` as shipped: aiosqlite, no pragmas, table created."""
    from a2a.server.tasks import DatabaseTaskStore
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(f"sqlite+aiosqlite:///{db_dir}/raw.db")
    store = DatabaseTaskStore(engine)
    try:
        await store.initialize()  # create_table=True: CREATE TABLE IF NOT EXISTS
    except BaseException:
        await engine.dispose()
        raise
    return store, engine.dispose


async def _sdk_postgres_stores(dsn: str) -> Any:
    """a2a-sdk's own PostgreSQL stores (SQLAlchemy over asyncpg), tables created, as llamon's
    ``open_stores("postgres")`` served them before its own store."""
    from a2a.server.tasks import DatabasePushNotificationConfigStore, DatabaseTaskStore
    from sqlalchemy.ext.asyncio import create_async_engine

    from llamon_agent.a2a.stores import Stores, normalize_postgres_dsn

    engine = create_async_engine(normalize_postgres_dsn(dsn), pool_pre_ping=True)
    task_store = DatabaseTaskStore(engine)
    push_store = DatabasePushNotificationConfigStore(engine)
    try:
        await task_store.initialize()
        await push_store.initialize()
    except BaseException:
        await engine.dispose()
        raise
    return Stores(task_store, push_store, "postgres", engine)


def memory_limits_kwargs(max_finished: int | None) -> dict[str, Any]:
    """``memory_limits=MemoryLimits(max_finished=N)`` for ``open_stores`` if it takes one.

    Empty (and a warning on stderr) when ``open_stores`` or ``MemoryLimits`` predates it.
    """
    if max_finished is None:
        return {}
    from llamon_agent.a2a.stores import open_stores

    if "memory_limits" in inspect.signature(open_stores).parameters:
        try:
            from llamon_agent.a2a.stores.memory import (  # type: ignore[import-not-found, unused-ignore]
                MemoryLimits,
            )
        except ImportError:
            pass
        else:
            return {"memory_limits": MemoryLimits(max_finished=max_finished)}
    print(
        "warning: open_stores() takes no memory_limits yet; --max-finished ignored",
        file=sys.stderr,
        flush=True,
    )
    return {}


async def _store_app(variant: str, options: argparse.Namespace) -> tuple[Any, Close | None]:
    if variant == "raw-memory":
        return _raw_app((REPLY,)), None
    if variant == "raw-sqlite":
        if not options.db_dir:
            raise SystemExit("raw-sqlite needs --db-dir")
        store, close = await _raw_sqlite_store(options.db_dir)
        return _raw_app((REPLY,), task_store=store), close

    from pathlib import Path

    from llamon_agent.a2a.agent import AgentContext
    from llamon_agent.a2a.server import create_app
    from llamon_agent.a2a.stores import open_stores

    async def trivial(ctx: AgentContext) -> str:
        return REPLY

    class Streamer:
        """``--stream-agent``: ``stream`` yields ``STREAM_CHUNKS``; ``invoke`` joins them."""

        async def invoke(self, ctx: AgentContext) -> str:
            return "".join(STREAM_CHUNKS)

        async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
            for chunk in STREAM_CHUNKS:
                yield chunk

    agent: object = Streamer() if options.stream_agent else trivial
    if variant == "llamon-memory":
        stores = await open_stores("memory", **memory_limits_kwargs(options.max_finished))
    elif variant == "llamon-sqlite":
        if not options.db_dir:
            raise SystemExit("llamon-sqlite needs --db-dir")
        stores = await open_stores("sqlite", home=Path(options.db_dir))
    elif variant == "llamon-postgres":
        if not options.dsn:
            raise SystemExit("llamon-postgres needs --dsn")
        stores = await open_stores("postgres", dsn=options.dsn)
    elif variant == "sdk-postgres":
        if not options.dsn:
            raise SystemExit("sdk-postgres needs --dsn")
        stores = await _sdk_postgres_stores(options.dsn)
    else:
        raise SystemExit(f"unknown store variant {variant!r}")
    try:
        app = create_app(
            agent,
            bench_card(),
            task_store=stores.task_store,
            push_config_store=stores.push_config_store,
        )
    except BaseException:
        await stores.close()
        raise
    return app, stores.close


# -- failure-promptness variants -----------------------------------------------------------


def _failure_app(variant: str, delay: float) -> Any:
    if variant in ("raw-ok", "raw-raise"):
        executor = _raw_executor((REPLY,), delay=delay, raise_=variant == "raw-raise")
        return _raw_app((REPLY,), executor=executor)

    from llamon_agent.a2a.agent import AgentContext
    from llamon_agent.a2a.server import create_app
    from llamon_agent.exceptions import ComponentInvokeError

    fail = variant != "llamon-ok"
    late = variant == "llamon-raise-late"

    class IOAgent:
        """Waits ``delay`` (I/O), then answers or raises ``ComponentInvokeError("down")``."""

        async def invoke(self, ctx: AgentContext) -> str:
            await asyncio.sleep(delay)
            if fail:
                raise ComponentInvokeError("down")
            return REPLY

        async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
            await asyncio.sleep(delay)
            if fail and not late:
                raise ComponentInvokeError("down")  # before the first chunk
            yield REPLY
            if fail:
                raise ComponentInvokeError("down")  # after it

    return create_app(IOAgent(), bench_card())


async def open_app(variant: str, options: argparse.Namespace) -> tuple[Any, Close | None]:
    """The app for ``variant`` and what to await once the server has stopped (or None)."""
    if variant in STORE_VARIANTS:
        return await _store_app(variant, options)
    if variant in FAILURE_VARIANTS:
        return _failure_app(variant, options.io_delay), None
    return build_app(variant), None


# -- serving -------------------------------------------------------------------------------


async def _serve_agent(options: argparse.Namespace, state: dict[str, Any]) -> None:
    """``llamon-serve``: the trivial agent through ``serve_agent`` itself, as ``llamon
    serve`` runs it (SQLite under LLAMON_HOME = --db-dir, reconciliation, gc.freeze)."""
    from llamon_agent.a2a.agent import AgentContext
    from llamon_agent.a2a.serve import ServeOptions, serve_agent

    if not options.db_dir:
        raise SystemExit("llamon-serve needs --db-dir")
    os.environ["LLAMON_HOME"] = options.db_dir

    async def trivial(ctx: AgentContext) -> str:
        return REPLY

    shutdown = asyncio.Event()
    loop = asyncio.get_running_loop()
    state["wake"] = lambda: loop.call_soon_threadsafe(shutdown.set)
    if state["stop"]:
        shutdown.set()

    def ready(url: str) -> None:
        print(f"PORT {url.rstrip('/').rsplit(':', 1)[1]}", flush=True)

    await serve_agent(
        trivial,
        bench_card(),
        ServeOptions(port=0, store="sqlite", gc_freeze=not options.no_gc_freeze),
        on_ready=ready,
        shutdown=shutdown,
    )


def serve(options: argparse.Namespace) -> None:
    """Serve ``options.variant`` until stdin closes, SIGTERM/SIGINT or ``--max-seconds``."""
    import gc

    import uvicorn

    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted sockets only when
    # the listening socket says TCP; with proto 0 every keep-alive response after the
    # first waits ~40 ms (Nagle + delayed ACK) between its headers and its body.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    state: dict[str, Any] = {"stop": False, "server": None}

    def stop(*_: object) -> None:
        state["stop"] = True
        if state["server"] is not None:
            state["server"].should_exit = True
        if state.get("wake") is not None:
            state["wake"]()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def watch_stdin() -> None:  # the orchestrator closes our stdin (or dies): stop
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        stop()

    threading.Thread(target=watch_stdin, daemon=True).start()
    timer = threading.Timer(options.max_seconds, stop)
    timer.daemon = True
    timer.start()

    async def main() -> None:
        if options.variant == "llamon-serve":
            await _serve_agent(options, state)
            return
        # stores are opened on the loop that serves (their connections belong to it)
        app, close = await open_app(options.variant, options)
        try:
            if options.gc_freeze:  # diagnosis: keep the import-time heap out of full GCs
                gc.collect()
                gc.freeze()
            server = uvicorn.Server(
                uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False, workers=1)
            )
            state["server"] = server
            server.should_exit = state["stop"]
            task = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started and not task.done():  # noqa: ASYNC110 - no event
                await asyncio.sleep(0.01)
            print(f"PORT {sock.getsockname()[1]}", flush=True)
            await task
        finally:
            if close is not None:  # the stores: after the app's own shutdown
                await close()

    profiler = cProfile.Profile() if options.profile else None
    if profiler is not None:
        profiler.enable()  # uvicorn handles SIGINT/SIGTERM itself while it serves
    try:
        asyncio.run(main())
    finally:
        if profiler is not None and options.profile is not None:
            profiler.disable()
            profiler.dump_stats(options.profile)
        sock.close()
    os._exit(0)  # the stdin watcher and the timer must not keep the process alive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", choices=ALL_VARIANTS)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--profile", metavar="FILE", default=None)
    parser.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after startup")
    parser.add_argument(
        "--no-gc-freeze", action="store_true", help="llamon-serve: ServeOptions(gc_freeze=False)"
    )
    parser.add_argument("--db-dir", default=None, help="SQLite directory (the sqlite variants)")
    parser.add_argument("--dsn", default=None, help="PostgreSQL DSN (the postgres variants)")
    parser.add_argument(
        "--max-finished", type=int, default=None,
        help="llamon-memory: MemoryLimits(max_finished=N), if open_stores takes memory_limits",
    )  # fmt: skip
    parser.add_argument(
        "--stream-agent", action="store_true",
        help="llamon store variants: the agent streams STREAM_CHUNKS (for message/stream)",
    )  # fmt: skip
    parser.add_argument(
        "--io-delay", type=float, default=0.010, help="failure variants: the agent's I/O wait (s)"
    )
    args = parser.parse_args()
    if args.db_dir:
        args.db_dir = os.path.abspath(args.db_dir)
    serve(args)


if __name__ == "__main__":
    main()
