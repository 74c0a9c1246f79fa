"""1,000 open streams on one server: time to open them, memory held, memory given back.

    PYTHONPATH=src python bench/bench_open_streams.py [--quick] [--streams 1000] [--rounds 3]
        [--store postgres|sqlite] [--every 60000] [--hold 5] [--json FILE]
    PYTHONPATH=src python bench/bench_open_streams.py --store sqlite --every 1000 --hold 10
        (chunk delay at 1,000 ticks per second)

What runs, each server started fresh:

``llamon``  ``llamon serve bench/ticking_agent.py:agent`` as in production: ``--store
            postgres`` on a throwaway schema (``LLAMON_TEST_POSTGRES_DSN``, default
            ``postgresql://postgres@127.0.0.1:5432/test``) with ``--redis-url`` (default
            ``redis://127.0.0.1:6379/0``), so every event is also published to Redis;
            ``--store sqlite`` serves the embedded default instead (no Redis).
``raw``     the named baseline: ``a2a_servers.py raw-hold``, a raw a2a-sdk executor sending
            the same ticks (``A2AStarletteApplication``, ``InMemoryTaskStore``).

How: each round opens ``--streams`` ``message/stream`` requests, each on its own keep-alive
connection (at most ``--open-concurrency`` being opened at a time), each asking for a task
that ticks every ``--every`` ms until the round's release file exists. A stream counts as
open once its first tick arrived; "open s" is the time until all are. The streams are then
held ``--hold`` s, the release file is written, and every stream must end ``completed``
("done"); then the connections close. The server's resident memory (``VmRSS``) is read
before anything (idle), after a discarded warm-up round of ``--warmup`` streams ("before"),
with all streams open (and its peak while held), and after they closed and ``--settle`` s
passed ("after"); "growth" is each round's "after" minus the one before it, which stays
near zero when memory is bounded. Also shown: the server's open file descriptors with the
streams open, and its CPU seconds per round. The exit status is 1 if a stream failed.

Chunk delay: every tick received while the streams are held (all open, none released) gives
the client's ``time.time_ns()`` minus the tick's stamp (same machine, same clock); p50 /
p90 / p99 / max per server and round, with the ticks received per second and the server's
CPU milliseconds per tick over the same window. ``--every 1000`` makes the load 1,000 ticks
per second. With several variants, each variant's server is started (and warmed up) first,
then the rounds alternate between them, so a change of the machine's load falls on both.

The client is ``loadgen.Connection.events()`` (raw asyncio HTTP/1.1, no client library);
the open-file limit is raised to ``FD_LIMIT`` (the servers inherit it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import loadgen  # bench/ is on sys.path when this file runs as a script
from serve_procs import Machine, Proc, a2a_variant, llamon_serve, raise_fd_limit, rss_mib

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests._support.stores import postgres_schema  # noqa: E402

AGENT = str(ROOT / "bench" / "ticking_agent.py") + ":agent"
FD_LIMIT = 8192
ROUND_TIMEOUT = 600.0


TICK_NS = re.compile(rb'"ns":\s*(\d+)')


@dataclass
class StreamEnd:
    """How one stream went: its tick events, whether it ended ``completed``, the problem;
    with ``delays`` given, each tick's delay (ms, receive time minus the tick's stamp) is
    appended to it while ``steady[0]`` is true (all streams open, none released)."""

    task_id: str | None = None
    opened: bool = False
    ticks: int = 0
    completed: bool = False
    error: str | None = None
    delays: list[float] | None = None
    steady: list[bool] | None = None

    def note(self, data: bytes) -> None:
        if self.task_id is None and b'"kind":"task"' in data:
            self.task_id = str(json.loads(data)["result"]["id"])
        if b'"artifact-update"' in data:
            received = time.time_ns()
            self.ticks += 1
            self.opened = True
            stamp = TICK_NS.search(data)
            if stamp and self.delays is not None and self.steady and self.steady[0]:
                self.delays.append((received - int(stamp[1])) / 1e6)
        self.completed = b'"state":"completed"' in data


class Countdown:
    """``done`` is set once ``count_one()`` was called ``n`` times."""

    def __init__(self, n: int) -> None:
        self.left = n
        self.done = asyncio.Event()
        if n <= 0:
            self.done.set()

    def count_one(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self.done.set()


@dataclass
class Round:
    """What the streams of one round share: the opening gate, and when they open / end /
    may close."""

    gate: asyncio.Semaphore
    opened: Countdown
    ended: Countdown
    closed: asyncio.Event
    delays: list[float] = field(default_factory=list)
    steady: list[bool] = field(default_factory=lambda: [False])


def stream_body(text: str) -> bytes:
    message = {
        "kind": "message",
        "role": "user",
        "messageId": f"bench-open-{uuid.uuid4().hex}",
        "parts": [{"kind": "text", "text": text}],
    }
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/stream",
        "params": {"message": message},
    }
    return json.dumps(request).encode()


async def hold_one(port: int, text: str, shared: Round) -> StreamEnd:
    """One stream: opened under the gate until its first tick, read to its end; its
    connection is closed once ``shared.closed`` is set. Counted in ``opened`` and ``ended``
    exactly once each, also when it fails."""
    end = StreamEnd(delays=shared.delays, steady=shared.steady)
    conn = loadgen.Connection("127.0.0.1", port)
    try:
        async with shared.gate:
            await conn.open()
            events = conn.events(stream_body(text))  # a messageId of its own: a new task
            async for data in events:
                end.note(data)
                if end.opened:
                    break
        shared.opened.count_one()
        async for data in events:
            end.note(data)
    except (OSError, loadgen.ProtocolError, asyncio.IncompleteReadError, ValueError) as exc:
        end.error = f"{type(exc).__name__}: {exc}"[:300]
    if not end.opened:
        shared.opened.count_one()
    if end.error is None and not end.completed:
        end.error = f"ended without completed after {end.ticks} ticks"
    shared.ended.count_one()
    try:
        await shared.closed.wait()
    finally:
        conn.close()
    return end


def delay_summary(delays: list[float]) -> dict[str, float | int | None]:
    """Count, p50, p90, p99 and max of the chunk delays (ms) of the held phase."""
    ordered = sorted(delays)
    summary: dict[str, float | int | None] = {"n": len(ordered)}
    for name, q in (("p50", 0.50), ("p90", 0.90), ("p99", 0.99)):
        summary[name] = ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None
    summary["max"] = ordered[-1] if ordered else None
    return summary


def fd_count(pid: int) -> int:
    """The open file descriptors of ``pid`` (its sockets among them)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def release_all(release: Path) -> None:
    """Write the release file: every ticking task of the round ends at its next look."""
    release.touch()


async def peak_rss(pid: int, seconds: float) -> float:
    """The largest ``VmRSS`` of ``pid`` (MiB) sampled every 0.5 s for ``seconds``."""
    peak = rss_mib(pid)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        peak = max(peak, rss_mib(pid))
    return peak


async def one_round(
    server: Proc, streams: int, args: argparse.Namespace, release: Path
) -> dict[str, Any]:
    """Open ``streams`` streams, hold them, release them, close them; what it cost."""
    shared = Round(
        asyncio.Semaphore(args.open_concurrency), Countdown(streams), Countdown(streams),
        asyncio.Event(),
    )  # fmt: skip
    text = f"every={args.every} count=0 release={release}"
    cpu0 = loadgen.process_cpu(server.pid) or 0.0
    started = time.perf_counter()
    async with asyncio.timeout(ROUND_TIMEOUT):
        holders = [asyncio.create_task(hold_one(server.port, text, shared)) for _ in range(streams)]
        await shared.opened.done.wait()
        open_s = time.perf_counter() - started
        rss_open, fds = rss_mib(server.pid), fd_count(server.pid)
        shared.steady[0] = True
        held_cpu0 = loadgen.process_cpu(server.pid) or 0.0
        peak = await peak_rss(server.pid, args.hold)
        held_cpu = (loadgen.process_cpu(server.pid) or 0.0) - held_cpu0
        shared.steady[0] = False
        held_ticks = len(shared.delays)
        release_all(release)
        released = time.perf_counter()
        await shared.ended.done.wait()
        drain_s = time.perf_counter() - released
        shared.closed.set()
        ends = await asyncio.gather(*holders)
    await asyncio.sleep(args.settle)  # the server notices the closed connections
    failed = [e for e in ends if e.error is not None]
    return {
        "streams": streams,
        "opened": sum(e.opened for e in ends),
        "completed": sum(e.completed for e in ends),
        "tasks": len({e.task_id for e in ends if e.task_id is not None}),
        "failed": len(failed),
        "first_error": failed[0].error if failed else None,
        "open_s": open_s,
        "drain_s": drain_s,
        "ticks": sum(e.ticks for e in ends),
        "delay_ms": delay_summary(shared.delays),
        "held_cpu_ms_per_tick": held_cpu * 1000 / held_ticks if held_ticks else None,
        "held_ticks_per_s": held_ticks / args.hold,
        "rss_open_mib": rss_open,
        "rss_peak_mib": max(peak, rss_open),
        "rss_after_mib": rss_mib(server.pid),
        "fds_open": fds,
        "server_cpu_s": (loadgen.process_cpu(server.pid) or 0.0) - cpu0,
    }


@asynccontextmanager
async def llamon_server(args: argparse.Namespace) -> AsyncIterator[Proc]:
    """``llamon serve`` of the ticking agent on ``--store`` (see the module docstring)."""
    options = ["--log-level", "warning"]
    worker = f"bench-open-{uuid.uuid4().hex[:8]}"
    if args.store == "sqlite":
        async with llamon_serve(worker, AGENT, options) as server:
            yield server
        return
    async with postgres_schema() as dsn:
        options += ["--store", "postgres", "--redis-url", args.redis_url]
        env = {"LLAMON_DATABASE_URL": dsn}  # not on the command line (ps shows it)
        async with llamon_serve(worker, AGENT, options, env) as server:
            yield server


def start(variant: str, args: argparse.Namespace) -> AbstractAsyncContextManager[Proc]:
    return llamon_server(args) if variant == "llamon" else a2a_variant("raw-hold")


async def measure_variants(args: argparse.Namespace, home: Path) -> list[dict[str, Any]]:
    """Start every variant's server, a warm-up round on each, then ``--rounds`` measured
    rounds interleaved (round i of each variant before round i + 1 of any), so a change of
    the machine's load falls on both."""
    async with contextlib.AsyncExitStack() as stack:
        results: list[dict[str, Any]] = []
        servers: list[Proc] = []
        for variant in args.variants:
            server = await stack.enter_async_context(start(variant, args))
            servers.append(server)
            idle = rss_mib(server.pid)
            warm = await one_round(server, args.warmup, args, home / f"{variant}-warm")
            before = warm["rss_after_mib"]
            print(f"{variant}: idle {idle:.1f} MiB, after a {args.warmup}-stream warm-up "
                  f"{before:.1f} MiB ({warm['failed']} failed)", flush=True)  # fmt: skip
            results.append({"variant": variant, "idle_mib": idle, "before_mib": before,
                            "rounds": []})  # fmt: skip
        for index in range(args.rounds):
            for server, result in zip(servers, results, strict=True):
                variant = result["variant"]
                r = await one_round(server, args.streams, args, home / f"{variant}-{index}")
                result["rounds"].append(r)
                d = r["delay_ms"]
                delay = (
                    f"chunk delay p50 {d['p50']:.1f} p99 {d['p99']:.1f} ms ({d['n']} ticks), "
                    if d["n"]
                    else ""
                )
                print(f"  {variant} round {index}: {r['completed']}/{r['streams']} completed "
                      f"({r['tasks']} tasks), open in {r['open_s']:.2f} s, {delay}"
                      f"RSS open {r['rss_open_mib']:.1f} after {r['rss_after_mib']:.1f} MiB, "
                      f"{r['fds_open']} fds, {Machine.load()}", flush=True)  # fmt: skip
    return results


def report(results: list[dict[str, Any]]) -> None:
    print(f"\n{'server':<8} {'round':>5} {'done':>9} {'open s':>7} {'before':>7} {'open':>7} "
          f"{'peak':>7} {'after':>7} {'growth':>7} {'fds':>5} {'cpu s':>6}  (MiB)")  # fmt: skip
    for result in results:
        previous = result["before_mib"]
        for index, r in enumerate(result["rounds"]):
            growth = r["rss_after_mib"] - previous
            print(f"{result['variant']:<8} {index:>5} {r['completed']:>4}/{r['streams']:<4} "
                  f"{r['open_s']:>7.2f} {previous:>7.1f} {r['rss_open_mib']:>7.1f} "
                  f"{r['rss_peak_mib']:>7.1f} {r['rss_after_mib']:>7.1f} {growth:>+7.1f} "
                  f"{r['fds_open']:>5} {r['server_cpu_s']:>6.1f}")  # fmt: skip
            previous = r["rss_after_mib"]
    print("\nchunk delay while held (receive - tick stamp), ms:")
    print(f"{'server':<8} {'round':>5} {'ticks':>6} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7}"
          f" {'ticks/s':>7} {'cpu ms/tick':>11}")  # fmt: skip
    for result in results:
        for index, r in enumerate(result["rounds"]):
            d = r["delay_ms"]
            if not d["n"]:
                continue
            print(f"{result['variant']:<8} {index:>5} {d['n']:>6} {d['p50']:>7.1f} "
                  f"{d['p90']:>7.1f} {d['p99']:>7.1f} {d['max']:>7.1f} "
                  f"{r['held_ticks_per_s']:>7.0f} {r['held_cpu_ms_per_tick']:>11.3f}")  # fmt: skip
    llamon = next((r for r in results if r["variant"] == "llamon"), None)
    raw = next((r for r in results if r["variant"] == "raw"), None)
    if llamon and raw:
        held = [
            (r["rss_open_mib"] - res["before_mib"]) / r["streams"] * 1024
            for res in (llamon, raw)
            for r in res["rounds"][:1]
        ]
        print(f"\nheld per open stream (round 0, open - before): llamon {held[0]:.0f} KiB, "
              f"raw {held[1]:.0f} KiB")  # fmt: skip


async def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="llamon-open-") as home:
        return await measure_variants(args, Path(home))


def main(args: argparse.Namespace) -> int:
    if args.quick:
        args.streams, args.rounds, args.warmup, args.hold = 100, 2, 20, 1.0
    limit = raise_fd_limit(FD_LIMIT)
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, fd limit {limit}; "
          f"{args.streams} streams x {args.rounds} rounds, ticking every {args.every:.0f} ms, "
          f"held {args.hold} s; llamon store: {args.store}; {Machine.load()}")  # fmt: skip
    machine = Machine.now()
    results = asyncio.run(measure(args))
    print(f"the machine's CPU was {machine.since():.0%} busy over the run (all processes); "
          f"{Machine.load()}")  # fmt: skip
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    failed = sum(r["failed"] for res in results for r in res["rounds"])
    if failed:
        first = next(r["first_error"] for res in results for r in res["rounds"] if r["failed"])
        print(f"\n{failed} streams failed; the first: {first}")
    return 1 if failed else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 streams, 2 rounds: does it work?")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=100, help="streams in the warm-up round")
    parser.add_argument(
        "--variants", nargs="+", default=["llamon", "raw"], choices=["llamon", "raw"]
    )
    parser.add_argument("--store", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--every", type=float, default=60000.0, help="ms between two ticks")
    parser.add_argument("--hold", type=float, default=5.0, help="seconds all streams stay open")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before 'after' RSS")
    parser.add_argument("--open-concurrency", type=int, default=50, help="streams opening at once")
    parser.add_argument("--json", default=None, help="write every round's figures here")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main(parse_args()))
