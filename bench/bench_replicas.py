"""Throughput of blocking sends through nginx over 1, 2 and 3 ``llamon serve`` replicas.

    python bench/bench_replicas.py [--quick] [--concurrency 64] [--rounds 4]
        [--requests 1000] [--json FILE]

What is measured (``bench/README.md``, "Replicas behind nginx", says how to read it):
``message/send`` of the demo agent's ``hello`` (a completed task with one artifact) at
c=64, sent to nginx, which balances round-robin (keep-alive to the replicas) over N
replicas (``tests/_support/replicas.py``: ``python -m llamon_agent serve --store postgres``
on one PostgreSQL, each fleet on a schema of its own) for N = 1, 2, 3.

How: the three fleets (6 replicas, 3 nginx) are started once and each gets a discarded
warm-up; then rounds take turns over them (1 2 3, then 3 2 1, ...) so noise from other
processes hits all alike. Each turn is ``bench/loadgen.py`` (imported: raw asyncio
HTTP/1.1, one keep-alive connection per concurrent worker, every answer checked for
``"state":"completed"``) measuring ``--requests`` sends. Server CPU per request is the sum
of the replicas' user + system CPU (``/proc/PID/stat``) over the turn divided by its
requests; nginx's (master + worker) is reported apart. Printed: per N the median
throughput over the rounds, p50/p99 latency, CPU per request, errors; then each N's
throughput over 1 replica's in the same round (median over rounds, quartiles) and the
aggregate ratio. The exit status is 1 if any request failed.

The machine this was written on has 2 cores shared by the load generator, nginx, the
replicas and PostgreSQL: more replicas cannot add cores, so the ratios say how much the
extra processes cost, not how llamon scales on a machine with a core per replica.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import loadgen  # bench/ is on sys.path when this file runs as a script

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests._support.replicas import Fleet, replicas  # noqa: E402
from tests._support.stores import postgres_schema  # noqa: E402

COUNTS = (1, 2, 3)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far; 0.0 once it is gone."""
    return loadgen.process_cpu(pid) or 0.0


def nginx_pids(fleet: Fleet) -> list[int]:
    """nginx's master and its children (the worker)."""
    master = fleet.nginx.pid
    try:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    except OSError:
        children = []
    return [master, *(int(child) for child in children)]


async def turn(fleet: Fleet, args: argparse.Namespace, requests: int) -> dict[str, Any]:
    """One loadgen run of ``requests`` sends against ``fleet``'s nginx, with CPU use."""
    port = int(fleet.url.rsplit(":", 1)[1].strip("/"))
    replica_pids = [r.pid for r in fleet.replicas]
    proxies = nginx_pids(fleet)
    before = [cpu_seconds(pid) for pid in replica_pids], [cpu_seconds(p) for p in proxies]
    started = time.perf_counter()
    result = await loadgen.run(
        loadgen.parse_args(
            [
                "--port", str(port),
                "--mode", "send",
                "--concurrency", str(args.concurrency),
                "--requests", str(requests),
                "--duration", "120",
                "--warmup", "0.2",
                "--warmup-requests", "1",
                "--request-timeout", "30",
            ]
        )
    )  # fmt: skip
    wall = time.perf_counter() - started
    after = [cpu_seconds(pid) for pid in replica_pids], [cpu_seconds(p) for p in proxies]
    count = int(result["requests"])
    server = sum(after[0]) - sum(before[0])
    proxy = sum(after[1]) - sum(before[1])
    per_replica = [b - a for a, b in zip(before[0], after[0], strict=True)]
    return {
        "replicas": len(fleet.replicas),
        "requests": count,
        "errors": result["errors"],
        "first_error": result["first_error"],
        "rps": result["rps"],
        "p50_ms": result["p50_ms"],
        "p99_ms": result["p99_ms"],
        "wall_s": wall,
        "server_cpu_us_per_req": server / count * 1e6 if count else None,
        "nginx_cpu_us_per_req": proxy / count * 1e6 if count else None,
        "client_cpu_us_per_req": result["client_cpu_us_per_req"],
        "replica_cpu_share": [round(c / server, 3) if server else None for c in per_replica],
    }


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def report(turns: list[dict[str, Any]], rounds: int) -> None:
    print(f"\n{'N':>2} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'srv us/req':>11} "
          f"{'nginx us/req':>13} {'errors':>7}  replica CPU shares")  # fmt: skip
    for n in COUNTS:
        mine = [t for t in turns if t["replicas"] == n]
        rps = statistics.median(t["rps"] for t in mine)
        p50 = statistics.median(t["p50_ms"] or 0 for t in mine)
        p99 = statistics.median(t["p99_ms"] or 0 for t in mine)
        srv = sum(t["server_cpu_us_per_req"] * t["requests"] for t in mine) / sum(
            t["requests"] for t in mine
        )
        proxy = sum(t["nginx_cpu_us_per_req"] * t["requests"] for t in mine) / sum(
            t["requests"] for t in mine
        )
        errors = sum(t["errors"] for t in mine)
        shares = mine[-1]["replica_cpu_share"]
        print(f"{n:>2} {rps:>8.0f} {p50:>8.1f} {p99:>8.1f} {srv:>11.0f} {proxy:>13.0f} "
              f"{errors:>7}  {shares}")  # fmt: skip
    print("\nthroughput vs 1 replica (median of rounds [q1, q3]; aggregate; CPU/req ratio):")
    for n in COUNTS[1:]:
        ratios = []
        for r in range(rounds):
            one = next(t for t in turns if t["round"] == r and t["replicas"] == 1)
            other = next(t for t in turns if t["round"] == r and t["replicas"] == n)
            ratios.append(other["rps"] / one["rps"])
        q1, med, q3 = quartiles(ratios)
        agg = {
            k: sum(t["requests"] for t in turns if t["replicas"] == k)
            / sum(t["requests"] / t["rps"] for t in turns if t["replicas"] == k)
            for k in (1, n)
        }
        cpu = {
            k: sum(t["server_cpu_us_per_req"] for t in turns if t["replicas"] == k) for k in (1, n)
        }
        print(f"  {n} replicas: {med:.2f} [{q1:.2f}, {q3:.2f}]; aggregate "
              f"{agg[n] / agg[1]:.2f}; server CPU per request x{cpu[n] / cpu[1]:.2f}")  # fmt: skip


async def measure(args: argparse.Namespace) -> tuple[list[dict[str, Any]], int]:
    """Every measured turn, and the number of rounds."""
    rounds = 2 if args.quick else args.rounds
    requests = 300 if args.quick else args.requests
    warmup = 100 if args.quick else 500
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, c={args.concurrency}, "
          f"{rounds} rounds of {requests} sends per fleet, warm-up {warmup}")  # fmt: skip
    async with AsyncExitStack() as stack:
        fleets: dict[int, Fleet] = {}
        for n in COUNTS:
            dsn = await stack.enter_async_context(postgres_schema())
            fleets[n] = await stack.enter_async_context(replicas(n, database_url=dsn))
        for n in COUNTS:
            warm = await turn(fleets[n], args, warmup)
            print(f"warm-up N={n}: {warm['rps']:.0f} req/s, {warm['errors']} errors")
        turns: list[dict[str, Any]] = []
        for r in range(rounds):
            order = COUNTS if r % 2 == 0 else tuple(reversed(COUNTS))
            for n in order:
                result = await turn(fleets[n], args, requests)
                result["round"] = r
                turns.append(result)
                print(f"round {r} N={n}: {result['rps']:.0f} req/s, "
                      f"srv {result['server_cpu_us_per_req']:.0f} us/req, "
                      f"{result['errors']} errors", flush=True)  # fmt: skip
    return turns, rounds


def main(args: argparse.Namespace) -> int:
    turns, rounds = asyncio.run(measure(args))
    report(turns, rounds)
    if args.json:
        Path(args.json).write_text(json.dumps(turns, indent=1))
    errors = sum(t["errors"] for t in turns)
    if errors:
        first = next(t["first_error"] for t in turns if t["errors"])
        print(f"\n{errors} requests failed; the first: {first}")
    return 1 if errors else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 short rounds: does it work?")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=1000, help="sends per fleet per round")
    parser.add_argument("--json", default=None, help="write every turn's figures here")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main(parse_args()))
