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
``raw-stream``    a raw executor for ``message/stream``: the task, then the artifact
                  chunks (the first creates the artifact, the others append), ``complete()``.
``llamon-stream`` ``create_app(agent, card)`` where ``agent`` has ``stream(ctx)`` yielding
                  the same chunks, and ``invoke``.

``raw-working``   diagnosis only: ``raw`` plus ``TaskUpdater.start_work()`` (the ``working``
                  status event llamon publishes before running the agent).
``raw-failed``    diagnosis only: ``raw-working`` that ends with ``TaskUpdater.failed`` and
                  the same text + data parts llamon sends for ``ComponentInvokeError("down")``
                  (the a2a-sdk share of the failure path, without llamon's classification,
                  failure record and log line).

``--profile FILE`` runs the server under cProfile and writes the stats to FILE on exit.
``--gc-freeze`` (diagnosis) calls ``gc.collect(); gc.freeze()`` once the app is built, so
full collections no longer walk the objects the imports created.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

REPLY = "pong"
STREAM_CHUNKS = ("Hel", "lo, ", "world")

VARIANTS = (
    "raw",
    "llamon",
    "llamon-fail",
    "raw-stream",
    "llamon-stream",
    "raw-working",
    "raw-failed",
)


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


def _raw_executor(chunks: tuple[str, ...], working: bool = False, fail: bool = False) -> Any:
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.tasks import TaskUpdater
    from a2a.types import DataPart, Part, Task, TaskState, TaskStatus, TextPart

    class RawExecutor(AgentExecutor):
        """Enqueue the task, add the artifact (chunk by chunk), complete."""

        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task = context.current_task
            if task is None:
                assert context.message is not None
                task = Task(
                    id=str(context.task_id),
                    context_id=str(context.context_id),
                    status=TaskStatus(state=TaskState.submitted),
                    history=[context.message],
                )
                await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
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


def _raw_app(chunks: tuple[str, ...], working: bool = False, fail: bool = False) -> Any:
    from a2a.server.apps import A2AStarletteApplication
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.tasks import InMemoryTaskStore

    handler = DefaultRequestHandler(_raw_executor(chunks, working, fail), InMemoryTaskStore())
    return A2AStarletteApplication(bench_card(), handler).build()


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
    if variant in ("llamon", "llamon-fail", "llamon-stream"):
        return _llamon_app(variant)
    raise SystemExit(f"unknown variant {variant!r}; one of {', '.join(VARIANTS)}")


# -- serving -------------------------------------------------------------------------------


def serve(variant: str, max_seconds: float, profile: str | None, gc_freeze: bool) -> None:
    import gc

    import uvicorn

    app = build_app(variant)
    if gc_freeze:  # diagnosis: keep the import-time heap out of every full collection
        gc.collect()
        gc.freeze()
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted sockets only when
    # the listening socket says TCP; with proto 0 every keep-alive response after the
    # first waits ~40 ms (Nagle + delayed ACK) between its headers and its body.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False, workers=1)
    )

    def stop(*_: object) -> None:
        server.should_exit = True

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
    timer = threading.Timer(max_seconds, stop)
    timer.daemon = True
    timer.start()

    async def main() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():  # noqa: ASYNC110 - uvicorn has no event
            await asyncio.sleep(0.01)
        print(f"PORT {sock.getsockname()[1]}", flush=True)
        await task

    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()  # uvicorn handles SIGINT/SIGTERM itself while it serves
    try:
        asyncio.run(main())
    finally:
        if profiler is not None and profile is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        sock.close()
    os._exit(0)  # the stdin watcher and the timer must not keep the process alive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", choices=VARIANTS)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--profile", metavar="FILE", default=None)
    parser.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after startup")
    args = parser.parse_args()
    serve(args.variant, args.max_seconds, args.profile, args.gc_freeze)


if __name__ == "__main__":
    main()
