"""Client benchmark: ``AgentClient.send`` against a2a-sdk's own clients, as ratios.

    python bench/bench_client.py            # the real figures (~1 minute)
    python bench/bench_client.py --quick    # a short run: does the benchmark still work?

What is measured: the time and the client CPU one blocking ``message/send`` costs the
*caller*, through three clients of the same server (a raw a2a-sdk server in its own
process, ``bench/a2a_servers.py raw``, so the server side is identical for every arm):

``transport``  a2a-sdk's ``JsonRpcTransport.send_message`` over one pooled httpx client
               (what ``AgentClient`` is built on: the floor).
``sdk``        a2a-sdk's ``ClientFactory(ClientConfig(streaming=False)).create(card)``
               and ``send_message`` (the client a2a-sdk's docs show).
``llamon``     ``AgentClient(url).send(text)``: card from its cache, the card check, the
               retry runner, the ``RemoteResult``.

Target: ``llamon`` costs at most 5% more per call than ``transport`` at c=1 and c=16.

How: the three arms take turns in slices of a fixed number of calls (order alternating
each round), ``c`` asyncio workers per arm, all in this process; the server stays up for
the whole run. A ratio is the median over rounds of the arm's time per call over the
``transport`` arm's in the same round; the client CPU per call is this process's CPU time
over the slice's calls (the server's CPU is in its own process and not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "src"))

import httpx  # noqa: E402
from a2a.client import ClientConfig, ClientFactory  # noqa: E402
from a2a.client.transports.jsonrpc import JsonRpcTransport  # noqa: E402
from a2a.types import (  # noqa: E402
    AgentCard,
    Message,
    MessageSendConfiguration,
    MessageSendParams,
    Part,
    Role,
    Task,
    TaskState,
    TextPart,
)
from bench_a2a_server import Server  # noqa: E402

from llamon_agent.client import AgentClient  # noqa: E402

TARGET = 1.05
Send = Callable[[], Awaitable[None]]


def _message() -> Message:
    return Message(
        role=Role.user, parts=[Part(root=TextPart(text="ping"))], message_id=uuid.uuid4().hex
    )


async def transport_arm(http: httpx.AsyncClient, card: AgentCard, url: str) -> Send:
    transport = JsonRpcTransport(http, card, url=url)
    config = MessageSendConfiguration(blocking=True)

    async def send() -> None:
        answer = await transport.send_message(
            MessageSendParams(message=_message(), configuration=config)
        )
        assert isinstance(answer, Task)
        assert answer.status.state is TaskState.completed

    return send


async def sdk_arm(http: httpx.AsyncClient, card: AgentCard) -> Send:
    client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)

    async def send() -> None:
        async for event in client.send_message(_message()):
            assert isinstance(event, tuple)
            assert event[0].status.state is TaskState.completed

    return send


async def llamon_arm(http: httpx.AsyncClient, url: str) -> Send:
    agent = AgentClient(url, httpx_client=http)

    async def send() -> None:
        result = await agent.send("ping")
        assert result.state is TaskState.completed

    return send


async def run_slice(send: Send, concurrency: int, calls: int) -> tuple[float, float]:
    """Seconds and client CPU seconds for ``calls`` sends over ``concurrency`` workers."""
    left = calls

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await send()

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - wall0, time.process_time() - cpu0


async def measure(port: int, args: argparse.Namespace) -> dict[tuple[str, int], list[float]]:
    url = f"http://127.0.0.1:{port}"
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    samples: dict[tuple[str, int], list[float]] = {}
    cpu: dict[tuple[str, int], list[float]] = {}
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        card = AgentCard.model_validate(
            (await http.get(f"{url}/.well-known/agent-card.json")).json()
        ).model_copy(update={"url": url})  # the bench server's card names no real port
        arms = {
            "transport": await transport_arm(http, card, url),
            "sdk": await sdk_arm(http, card),
            "llamon": await llamon_arm(http, url),
        }
        for concurrency in args.concurrency:
            for send in arms.values():  # warm-up, discarded
                await run_slice(send, concurrency, args.warmup)
            for index in range(args.rounds):
                order = list(arms.items())
                for name, send in order if index % 2 == 0 else order[::-1]:
                    wall, used = await run_slice(send, concurrency, args.calls)
                    samples.setdefault((name, concurrency), []).append(wall / args.calls)
                    cpu.setdefault((name, concurrency), []).append(used / args.calls)
    return {**samples, **{(f"{n}-cpu", c): v for (n, c), v in cpu.items()}}


def summarize(results: dict[tuple[str, int], list[float]], args: argparse.Namespace) -> bool:
    ok = True
    print(f"{'arm':<10} {'c':>3} {'us/call':>9} {'cpu us/call':>12} {'vs transport':>13}")
    for concurrency in args.concurrency:
        base = results["transport", concurrency]
        for name in ("transport", "sdk", "llamon"):
            times = results[name, concurrency]
            ratios = [t / b for t, b in zip(times, base, strict=True)]
            ratio = statistics.median(ratios)
            per_call = statistics.median(times) * 1e6
            cpu = statistics.median(results[f"{name}-cpu", concurrency]) * 1e6
            print(f"{name:<10} {concurrency:>3} {per_call:>9.0f} {cpu:>12.0f} {ratio:>12.3f}x")
            if name == "llamon" and ratio > TARGET:
                ok = False
    return ok


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a short check that it all works")
    parser.add_argument("--rounds", type=int, default=None, help="slices per arm")
    parser.add_argument("--calls", type=int, default=None, help="sends per slice")
    parser.add_argument("--warmup", type=int, default=None, help="sends per arm, discarded")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--max-seconds", type=float, default=600.0, help="server lifetime cap")
    args = parser.parse_args()
    quick = {"rounds": 2, "calls": 100, "warmup": 30}
    full = {"rounds": 10, "calls": 500, "warmup": 300}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    # the attributes bench_a2a_server.Server reads
    args.gc_freeze = False
    args.no_a2a_otel = False
    return args


def main() -> None:
    args = parse_args()
    print(
        f"Client benchmark, Python {platform.python_version()}, {os.cpu_count()} cores: "
        f"{args.rounds} rounds x {args.calls} sends per arm and concurrency "
        f"{args.concurrency}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llamon-bench-client-") as tmp:
        server = Server("raw", args, Path(tmp) / "server.log", None)
        try:
            results = asyncio.run(measure(server.wait_port(), args))
        finally:
            server.stop()
    ok = summarize(results, args)
    verdict = "met" if ok else "MISSED"
    print(f"\ntotal {time.monotonic() - started:.0f} s; target llamon <= {TARGET}x: {verdict}")


if __name__ == "__main__":
    main()
