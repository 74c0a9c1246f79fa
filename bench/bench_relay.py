"""Stream fan-out latency across replicas: publish on A -> received on B, against A's own stream.

    PYTHONPATH=src python bench/bench_relay.py [--quick] [--tasks 20] [--concurrency 4]
        [--count 50] [--every 50] [--json FILE]

What runs: two ``llamon serve bench/ticking_agent.py:agent --store postgres --redis-url``
replicas, A and B, on one throwaway PostgreSQL schema (``LLAMON_TEST_POSTGRES_DSN``, default
``postgresql://postgres@127.0.0.1:5432/test``) and the Redis at ``--redis-url`` (default
``redis://127.0.0.1:6379/0``), each with a worker id of its own (``bench-relay-RUN-a``/``-b``).

How: each task is a ``message/stream`` on A asking for ``--count`` ticks ``--every`` ms apart
after a ``--lead`` ms wait; as soon as A's first event names the task, a
``tasks/resubscribe`` for it goes to B (which does not run it: it follows the task's events
through Redis). Every tick carries ``time.time.time_ns()`` taken as the agent hands it to the
server; the reader stamps each event with its own ``time.time.time_ns()`` as it arrives (same
machine, same clock). The latency of a tick is received - published, on A's stream (the
named baseline: the local path) and on B's (the relay path), for the same ticks: those
published after the head of B's answer arrived (earlier ones B would replay at once).
``--concurrency`` tasks run at a time until ``--tasks`` have run, after a discarded warm-up
task. Both streams of every task must end ``completed`` with every tick; a stream that does
not is an error (exit status 1). The client is ``loadgen.Connection.events()``: raw asyncio
HTTP/1.1 on loopback, no client library.

Printed: per path the samples, p50 / p90 / p99 / max in ms, B over A at p50 and p99, the
target (p99 <= ``TARGET_P99_MS`` across replicas), and how busy the machine was.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import loadgen  # bench/ is on sys.path when this file runs as a script
from serve_procs import Machine, Proc, llamon_serve

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests._support.stores import postgres_schema  # noqa: E402

TARGET_P99_MS = 20.0
"""The target: a tick reaches a reader on another replica within 20 ms at p99."""
AGENT = str(ROOT / "bench" / "ticking_agent.py") + ":agent"
STREAM_TIMEOUT = 60.0


@dataclass
class Received:
    """One stream's events as ``(time.time.time_ns() on arrival, event data)``, in order."""

    events: list[tuple[int, bytes]] = field(default_factory=list)

    def ticks(self) -> dict[int, tuple[int, int]]:
        """``{tick: (published ns, received ns)}`` of the single-tick artifact chunks (the
        last chunk, which repeats the whole artifact, is not a tick)."""
        found: dict[int, tuple[int, int]] = {}
        for arrived, data in self.events:
            if b'"artifact-update"' not in data:
                continue
            result = json.loads(data)["result"]
            if result.get("lastChunk"):
                continue
            for part in result["artifact"]["parts"]:
                tick = part.get("data", {})
                if "ns" in tick:
                    found[int(tick["tick"])] = (int(tick["ns"]), arrived)
        return found

    def final_state(self) -> str | None:
        """The state of the stream's last event, if it is a status or a task."""
        if not self.events:
            return None
        result = json.loads(self.events[-1][1]).get("result", {})
        state = result.get("status", {}).get("state")
        return str(state) if state is not None else None


@dataclass
class TaskResult:
    a: dict[int, tuple[int, int]]
    b: dict[int, tuple[int, int]]
    b_live_from: int
    errors: list[str]

    def latencies(self) -> tuple[list[float], list[float], int]:
        """A's and B's latencies (ms) of the ticks published once B was live (its answer's
        head had arrived), and how many ticks were left out (published before)."""
        shared = [t for t, (ns, _) in self.a.items() if ns > self.b_live_from and t in self.b]
        a = [(self.a[t][1] - self.a[t][0]) / 1e6 for t in shared]
        b = [(self.b[t][1] - self.b[t][0]) / 1e6 for t in shared]
        return a, b, len(self.a) - len(shared)


def _body(method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


def stream_body(text: str) -> bytes:
    message = {
        "kind": "message",
        "role": "user",
        "messageId": f"bench-relay-{uuid.uuid4().hex}",
        "parts": [{"kind": "text", "text": text}],
    }
    return _body("message/stream", {"message": message})


async def _collect(events: AsyncIterator[bytes], into: Received) -> None:
    async for data in events:
        into.events.append((time.time_ns(), data))


async def one_task(a: Proc, b: Proc, args: argparse.Namespace) -> TaskResult:
    """Stream one ticking task on A, follow it on B; both streams' ticks."""
    conn_a, conn_b = (
        loadgen.Connection("127.0.0.1", a.port),
        loadgen.Connection("127.0.0.1", b.port),
    )
    await conn_a.open()
    await conn_b.open()
    on_a, on_b = Received(), Received()
    try:
        events = conn_a.events(
            stream_body(f"every={args.every} count={args.count} lead={args.lead}")
        )
        async with asyncio.timeout(STREAM_TIMEOUT):
            first = await anext(events)
            on_a.events.append((time.time_ns(), first))
            task_id = json.loads(first)["result"]["id"]
            follow = conn_b.events(_body("tasks/resubscribe", {"id": task_id}))
            await asyncio.gather(_collect(events, on_a), _collect(follow, on_b))
    finally:
        conn_a.close()
        conn_b.close()
    errors = [
        f"{name}: ended {received.final_state()!r} with {len(received.ticks())} ticks"
        for name, received in (("A", on_a), ("B", on_b))
        if received.final_state() != "completed" or len(received.ticks()) != args.count
    ]
    return TaskResult(on_a.ticks(), on_b.ticks(), conn_b.head_ns, errors)


def _own_cpu(a: Proc, b: Proc) -> float:
    """CPU seconds used so far by this process and the two replicas."""
    return time.process_time() + sum(loadgen.process_cpu(p.pid) or 0.0 for p in (a, b))


def percentile(values: list[float], q: float) -> float:
    return loadgen.percentile(values, q) or 0.0


def summary(name: str, values: list[float]) -> dict[str, Any]:
    return {
        "path": name,
        "samples": len(values),
        "p50_ms": percentile(values, 50),
        "p90_ms": percentile(values, 90),
        "p99_ms": percentile(values, 99),
        "max_ms": max(values, default=0.0),
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    options = ["--store", "postgres", "--redis-url", args.redis_url, "--log-level", "warning"]
    async with AsyncExitStack() as stack:
        dsn = await stack.enter_async_context(postgres_schema())
        env = {"LLAMON_DATABASE_URL": dsn}  # not on the command line (ps shows it)
        a = await stack.enter_async_context(
            llamon_serve(f"bench-relay-{run}-a", AGENT, options, env)
        )
        b = await stack.enter_async_context(
            llamon_serve(f"bench-relay-{run}-b", AGENT, options, env)
        )
        await one_task(a, b, args)  # warm-up, discarded
        print(f"before: {Machine.load()}", flush=True)
        machine, ours0 = Machine.now(), _own_cpu(a, b)
        results: list[TaskResult] = []
        while len(results) < args.tasks:
            batch = min(args.concurrency, args.tasks - len(results))
            results += await asyncio.gather(*(one_task(a, b, args) for _ in range(batch)))
        busy, ours = machine.since(), (_own_cpu(a, b) - ours0) / machine.elapsed_cpu()
        print(f"after:  {Machine.load()}; the machine's CPUs were {busy:.0%} busy: this "
              f"client and the two replicas {ours:.0%}, the rest {busy - ours:.0%}")  # fmt: skip
    local: list[float] = []
    relay: list[float] = []
    left_out = 0
    for result in results:
        on_a, on_b, dropped = result.latencies()
        local += on_a
        relay += on_b
        left_out += dropped
    errors = [e for r in results for e in r.errors]
    return {
        "local": summary("A local stream (baseline)", local),
        "relay": summary("B resubscribe (relay)", relay),
        "left_out": left_out,
        "errors": errors,
        "machine_busy": busy,
        "samples": {"local": local, "relay": relay} if args.samples else None,
    }


def report(figures: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"\n{'path':<28} {'ticks':>6} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'max ms':>7}")
    for key in ("local", "relay"):
        row = figures[key]
        print(f"{row['path']:<28} {row['samples']:>6} {row['p50_ms']:>7.2f} {row['p90_ms']:>7.2f} "
              f"{row['p99_ms']:>7.2f} {row['max_ms']:>7.2f}")  # fmt: skip
    local, relay = figures["local"], figures["relay"]
    if local["p50_ms"] and local["p99_ms"]:
        print(f"relay over local: p50 x{relay['p50_ms'] / local['p50_ms']:.2f}, "
              f"p99 x{relay['p99_ms'] / local['p99_ms']:.2f}")  # fmt: skip
    verdict = "met" if relay["p99_ms"] <= TARGET_P99_MS else "MISSED"
    print(f"target p99 <= {TARGET_P99_MS:.0f} ms across replicas: {verdict}")
    print(f"ticks left out (published before B's answer began): {figures['left_out']}")
    if figures["errors"]:
        print(f"{len(figures['errors'])} streams failed; the first: {figures['errors'][0]}")


def main(args: argparse.Namespace) -> int:
    if args.quick:
        args.tasks, args.count = 4, 20
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs; {args.tasks} tasks, "
          f"{args.concurrency} at a time, {args.count} ticks every {args.every} ms each "
          f"after {args.lead} ms")  # fmt: skip
    figures = asyncio.run(measure(args))
    report(figures, args)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 1 if figures["errors"] else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 short tasks: does it work?")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=4, help="tasks ticking at a time")
    parser.add_argument("--count", type=int, default=50, help="ticks per task")
    parser.add_argument("--every", type=float, default=50.0, help="ms between two ticks")
    parser.add_argument("--lead", type=float, default=300.0, help="ms before the first tick")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--samples", action="store_true", help="keep every latency in --json")
    parser.add_argument("--json", default=None, help="write the figures here")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main(parse_args()))
