"""MCP benchmark: the output normalizer's overhead on a tool call against mcp's raw call.

    python bench/bench_mcp.py            # the real figures (~2 minutes on 2 cores)
    python bench/bench_mcp.py --cases trivial --seconds 20
    python bench/bench_mcp.py --quick    # a short run: does the benchmark still work? (<15 s)
    python bench/bench_mcp.py --no-profile

Run from the repository root with the package importable, e.g.
``PYTHONPATH=src:. python bench/bench_mcp.py`` (``examples`` must be importable too).
Everything stays in the process (mcp 2.x's ``Client(server)`` memory transport). Two
tools, one after the other (``--cases`` picks some):

* ``trivial``: ``add(a, b)``, an ``async`` tool of a one-tool ``MCPServer`` built here
  (no worker thread: the call is almost all mcp's own path, so the normalizer shows most);
* ``bookshop``: ``search_books({"query": "dune"})`` of ``examples/bookshop_mcp_server.py``
  (a sync tool run in a worker thread, a structured list result: a realistic call).

What is measured (every figure is a ratio against a named baseline, all in one run):

Per tool, one ``MCPToolLoader(server).session()`` is opened: one ``mcp.Client``
connection, the tools listed once. Four ways of calling the tool all go over that one
client:

* ``raw``: the baseline -- mcp's ``Client.call_tool(name, args)`` on the
  session's own client (read from the session; nothing in ``src/`` is changed).
* ``session``: ``MCPSession.call_tool`` -- the session's raw call (its lock, its
  reconnect and session-lost checks), no normalization.
* ``normalizer``: ``wrap_tool_output_normalizer(tool, <raw client.call_tool>, budget=...)``
  -- the normalizer alone over the raw call, without the session layer.
* ``normalized``: the session's ``MCPTool.call(args)`` -- what the loop calls: the
  session layer plus the normalizer (argument check, failure classification, the
  ``McpToolOutput``).

A benchmark round runs ``--batch`` iterations; each iteration makes one call of every
kind, back to back, in a fresh random order (seeded), so drift and bursts of load hit
every side alike and no variant always follows the same neighbour. Rounds continue until
the time budget or the round cap. Reported:
µs per call of each (median), and each against ``raw``: the median over rounds of the
per-round ratio of medians (with its interquartile range), the ratio of the pooled
medians, and the median paired difference (same iteration) in µs. Target: normalized
<= 1.03 x raw for each tool.

Then the normalizer is timed with no transport at all (its raw call returns a
``CallToolResult`` recorded from the server), against calling that stub directly: its
own cost in µs per call, and that cost as a share of a raw call; and its two pieces of
work (the argument check, the success output) are timed in situ, each right after a real
raw call, where they run slower than in a tight loop (colder caches). Finally a cProfile of
``normalized`` and ``raw`` calls attributes ``llamon_agent``'s own time per call, by
module and function (the hot spot if the target is missed).

First (``--requests N``, default 200; 0 skips it), whole requests over streamable HTTP
(the bookshop served by uvicorn in this loop): open a session (connect, list the tools),
one ``search_books`` call, close; a loader of its own per request against one sharing an
``MCPConnectionPool`` (the connection and the tool list kept across requests), in a fresh
random order per iteration: ms per request and the pooled one against the other.

The outputs are checked once before timing (the normalized text and structured content
equal the raw result's), so the bench breaks if the semantics change.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import io
import json
import logging
import os
import platform
import pstats
import random
import socket
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from typing import Any

try:
    from examples.bookshop_mcp_server import build_server
    from mcp.server import MCPServer
    from mcp.types import CallToolResult, TextContent

    import mcp
    from llamon_agent.mcp import (
        MCPConnectionPool,
        MCPSession,
        MCPTool,
        MCPToolLoader,
        RequestBudget,
        wrap_tool_output_normalizer,
    )
    from mcp import Client
except ImportError as exc:  # pragma: no cover - a usage hint, not a code path
    sys.exit(f"bench_mcp: {exc}; run from the repository root with PYTHONPATH=src:.")

TARGET = 1.03


@dataclass(frozen=True)
class Case:
    """One tool to call: its server, name, arguments and the structured result it gives."""

    label: str
    build: Callable[[], Any]
    tool: str
    arguments: dict[str, Any]
    structured: Any


def build_trivial_server() -> MCPServer:
    """An in-process server with one trivial ``async`` tool (no worker thread)."""
    server = MCPServer("trivial")

    @server.tool()
    async def add(a: int, b: int = 1) -> int:
        """Adds two integers."""
        return a + b

    return server


CASES: dict[str, Case] = {
    "trivial": Case("trivial", build_trivial_server, "add", {"a": 2, "b": 3}, {"result": 5}),
    "bookshop": Case(
        "bookshop",
        build_server,
        "search_books",
        {"query": "dune"},
        {"result": [{"title": "Dune", "author": "Frank Herbert"}]},
    ),
}
VARIANTS = ("raw", "session", "normalizer", "normalized")
BASELINE = "raw"
SITE_PACKAGES = os.path.dirname(os.path.dirname(os.path.abspath(mcp.__file__)))
STDLIB = os.path.dirname(os.path.dirname(json.__file__))


# --------------------------------------------------------------------------- helpers


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 4:
        return min(values), max(values)
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def passed(self) -> bool:
        return time.monotonic() >= self.end


# --------------------------------------------------------------------------- setup

Call = Callable[[], Awaitable[Any]]


def session_client(session: MCPSession) -> Client:
    """The session's one ``mcp.Client`` (a private attribute, read only)."""
    connection = session._connection  # private, read only: the baseline's client
    client = connection.client if connection is not None else None
    if not isinstance(client, Client):
        raise RuntimeError("the session has no open mcp.Client")
    return client


def make_calls(session: MCPSession, tools: list[MCPTool], case: Case) -> dict[str, Call]:
    client = session_client(session)
    tool = next(t for t in tools if t.name == case.tool)
    name, arguments = case.tool, case.arguments

    async def raw_call(args: dict[str, Any]) -> CallToolResult:
        result: CallToolResult = await client.call_tool(name, args)
        return result

    # the normalizer alone over the same raw call (the tool description the session got)
    bare = wrap_tool_output_normalizer(
        _Described(tool.name, tool.description, tool.parameters, tool.output_schema),
        raw_call,
        budget=RequestBudget(),
    )
    return {
        "raw": lambda: client.call_tool(name, arguments),
        "session": lambda: session.call_tool(name, arguments),
        "normalizer": lambda: bare.call(arguments),
        "normalized": lambda: tool.call(arguments),
    }


@dataclass(frozen=True)
class _Described:
    """What ``wrap_tool_output_normalizer`` reads of an ``mcp.types.Tool``."""

    name: str
    description: str
    input_schema: Any
    output_schema: Any


def raw_text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def check(calls: dict[str, Call], case: Case) -> CallToolResult:
    raw: CallToolResult = await calls["raw"]()
    assert not raw.is_error, raw
    assert raw.structured_content == case.structured, raw.structured_content
    session = await calls["session"]()
    assert session.structured_content == raw.structured_content
    for name in ("normalizer", "normalized"):
        out = await calls[name]()
        assert not out.is_error, (name, out)
        assert out.text == raw_text(raw), (name, out.text)
        assert out.structured == raw.structured_content, (name, out.structured)
    return raw


# --------------------------------------------------------------------------- timing


@dataclass
class Samples:
    calls: dict[str, list[float]] = field(default_factory=dict)  # seconds per call
    ratios: dict[str, list[float]] = field(default_factory=dict)  # per round, vs raw
    diffs: dict[str, list[float]] = field(default_factory=dict)  # paired, vs raw, seconds
    rounds: int = 0


async def time_round(
    calls: dict[str, Call], batch: int, rng: random.Random
) -> dict[str, list[float]]:
    """``batch`` iterations, each one call of every kind in a fresh random order (what ran
    just before warms or cools the caches; a fixed order would favour some neighbours)."""
    names = list(calls)
    times: dict[str, list[float]] = {name: [] for name in names}
    gc.collect()
    for _ in range(batch):
        for name in rng.sample(names, len(names)):
            call = calls[name]
            start = time.perf_counter()
            await call()
            times[name].append(time.perf_counter() - start)
    return times


async def measure(
    calls: dict[str, Call],
    batch: int,
    max_rounds: int,
    min_rounds: int,
    budget: float,
    deadline: Deadline,
) -> Samples:
    names = list(VARIANTS)
    rng = random.Random(20240601)  # noqa: S311 - a fixed seed: the same orders every run
    await time_round(calls, max(10, batch // 2), rng)  # warm-up
    samples = Samples(
        calls={name: [] for name in names},
        ratios={name: [] for name in names if name != BASELINE},
        diffs={name: [] for name in names if name != BASELINE},
    )
    stop = time.monotonic() + budget
    while samples.rounds < max_rounds:
        if samples.rounds >= min_rounds and (time.monotonic() >= stop or deadline.passed()):
            break
        times = await time_round(calls, batch, rng)
        for name, values in times.items():
            samples.calls[name].extend(values)
        base = times[BASELINE]
        for name in samples.ratios:
            samples.ratios[name].append(median(times[name]) / median(base))
            samples.diffs[name].extend(a - b for a, b in zip(times[name], base, strict=True))
        samples.rounds += 1
    return samples


def print_table(samples: Samples, batch: int, case: Case) -> float:
    """Print the table; return the headline ratio (normalized / raw)."""
    calls = samples.calls
    raw = median(calls[BASELINE])
    print()
    print(
        f"µs per {case.tool} call ({case.label}) over one in-process mcp.Client "
        f"({samples.rounds} rounds x "
        f"{batch} interleaved calls of each kind; baseline: raw Client.call_tool; "
        f"target normalized <= {TARGET:.2f}x)"
    )
    header = (
        f"{'variant':<12}{'calls':>7}{'µs/call':>9}{'p25-p75 µs':>15}{'ratio':>8}"
        f"{'round IQR':>15}{'pooled':>8}{'paired Δ µs':>13}{'target':>8}"
    )
    print(header)
    print("-" * len(header))
    headline = 1.0
    for name in VARIANTS:
        values = calls[name]
        lo, hi = quartiles(values)
        spread = f"{lo * 1e6:.0f}-{hi * 1e6:.0f}"
        line = f"{name:<12}{len(values):>7}{median(values) * 1e6:>9.1f}{spread:>15}"
        if name == BASELINE:
            print(line + f"{'1':>8}")
            continue
        ratio = median(samples.ratios[name])
        rlo, rhi = quartiles(samples.ratios[name])
        pooled = median(values) / raw
        diff = median(samples.diffs[name])
        verdict = ""
        if name == "normalized":
            headline = ratio
            verdict = "met" if ratio <= TARGET else "MISSED"
        print(
            line + f"{ratio:>8.3f}{f'{rlo:.3f}-{rhi:.3f}':>15}{pooled:>8.3f}"
            f"{diff * 1e6:>+13.1f}{verdict:>8}"
        )
    print(
        "  ratio: median over rounds of (median variant / median raw) in the round; pooled: "
        "ratio of the overall medians; paired Δ: median of (variant - raw) in the same iteration"
    )
    return headline


# --------------------------------------------------------------------------- isolated


def isolated_cost(
    recorded: CallToolResult, real: MCPTool, calls: int, case: Case
) -> tuple[float, float]:
    """(stub call, normalizer over the stub): seconds per call, no transport at all.

    The normalizer gets the real tool's description (its input schema as the server
    listed it); its raw call is a stub returning ``recorded``.
    """

    async def stub(arguments: dict[str, Any]) -> CallToolResult:
        return recorded

    tool = wrap_tool_output_normalizer(
        _Described(real.name, real.description, real.parameters, real.output_schema),
        stub,
        budget=RequestBudget(),
    )

    async def drive() -> tuple[float, float]:
        best_stub = best_norm = float("inf")
        for _ in range(7):  # best of 7 interleaved repeats
            start = time.perf_counter()
            for _ in range(calls):
                await stub(case.arguments)
            best_stub = min(best_stub, (time.perf_counter() - start) / calls)
            start = time.perf_counter()
            for _ in range(calls):
                await tool.call(case.arguments)
            best_norm = min(best_norm, (time.perf_counter() - start) / calls)
        return best_stub, best_norm

    return asyncio.run(drive())


# --------------------------------------------------------------------------- in situ


async def in_situ_pieces(
    client: Client, tool: MCPTool, iterations: int, rng: random.Random, case: Case
) -> dict[str, float] | None:
    """Median seconds of the normalizer's pieces of work, each timed right after a real
    raw call (so with the caches as the mcp call leaves them, unlike a tight loop): the
    full argument walk (``mcp.arguments.check_arguments``), the tool's own argument check
    (``MCPTool._arguments_problem``, remembered per shape of arguments, when the tree has
    it) and the success output (``normalizer._success_output``). Private helpers: a piece
    whose helper is gone is skipped (``None`` if the success output is)."""
    try:
        from llamon_agent.mcp.normalizer import _success_output
    except ImportError:
        return None
    from llamon_agent.mcp import check_arguments

    remembered = getattr(tool, "_arguments_problem", None)
    work: dict[str, Callable[[CallToolResult], object]] = {
        "check_arguments": lambda _: check_arguments(tool.parameters, case.arguments),
        "_success_output": _success_output,
    }
    if remembered is not None:
        work["_arguments_problem"] = lambda _: remembered(case.arguments)
    pieces: dict[str, list[float]] = {name: [] for name in work}
    for _ in range(iterations):
        for piece in rng.sample(list(pieces), len(pieces)):
            result = await client.call_tool(case.tool, case.arguments)
            do = work[piece]
            start = time.perf_counter()
            do(result)
            pieces[piece].append(time.perf_counter() - start)
    return {name: median(values) for name, values in pieces.items()}


# --------------------------------------------------------------------------- profile


async def run_profile(calls: dict[str, Call], count: int, top: int) -> None:
    profilers = {name: cProfile.Profile() for name in ("raw", "normalized")}
    chunks = 10
    for index in range(2 * chunks):  # alternate chunks, so both see the same conditions
        name = ("raw", "normalized")[index % 2]
        call = calls[name]
        profiler = profilers[name]
        profiler.enable()
        for _ in range(count // chunks):
            await call()
        profiler.disable()
    count = count // chunks * chunks
    stats = {name: pstats.Stats(profiler) for name, profiler in profilers.items()}
    marker = "llamon_agent" + os.sep
    print()
    print(f"profile: {count} normalized and {count} raw calls (alternating chunks), cProfile")
    totals = {name: s.total_tt / count for name, s in stats.items()}  # type: ignore[attr-defined]
    ncalls = {
        name: sum(v[1] for v in s.stats.values()) / count  # type: ignore[attr-defined]
        for name, s in stats.items()
    }
    print(
        f"  per call under cProfile: raw {totals['raw'] * 1e6:.0f} µs and "
        f"{ncalls['raw']:.0f} Python-level calls, normalized {totals['normalized'] * 1e6:.0f} µs "
        f"and {ncalls['normalized']:.0f} calls (cProfile times are inflated and noisy: the "
        "tool runs in a worker thread, so the loop waits in epoll)"
    )
    norm = stats["normalized"]
    by_module: dict[str, float] = {}
    functions: list[tuple[float, str]] = []
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in norm.stats.items():  # type: ignore[attr-defined]
        if marker not in filename:
            continue
        module = filename.split(marker, 1)[1].replace(os.sep, "/")
        by_module[module] = by_module.get(module, 0.0) + tt
        functions.append(
            (
                tt,
                f"    {module}:{line} {func}: {nc / count:.0f} calls (resumptions)/call, own "
                f"{tt * 1e6 / count:.2f} µs/call, cumulative {ct * 1e6 / count:.2f} µs/call",
            )
        )
    own = sum(by_module.values())
    print(
        f"  own time of llamon_agent code in a normalized call: {own * 1e6 / count:.2f} µs "
        f"under cProfile = {own / count / totals['normalized'] * 100:.2f}% of the profiled call"
    )
    for module, tt in sorted(by_module.items(), key=lambda kv: -kv[1]):
        print(f"    {module}: {tt * 1e6 / count:.2f} µs/call")
    print(f"  top {top} llamon_agent functions by own time:")
    for _, text in sorted(functions, reverse=True)[:top]:
        print(text)
    out = io.StringIO()
    norm.stream = out  # type: ignore[attr-defined]
    norm.sort_stats("tottime").print_stats(top)
    print(f"  top {top} functions of the normalized calls by own time (mostly mcp/anyio):")
    site, stdlib = SITE_PACKAGES, STDLIB
    for text in out.getvalue().splitlines():
        if text.strip() and not text.startswith(("   Ordered by", "   List reduced")):
            print("   " + text.rstrip().replace(site + os.sep, "").replace(stdlib + os.sep, ""))


# --------------------------------------------------------------------------- requests


@contextlib.asynccontextmanager
async def serving_http(server: Any) -> AsyncIterator[str]:
    """``server`` over streamable HTTP on 127.0.0.1 (uvicorn in this loop); its URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    app = server.streamable_http_app(host="127.0.0.1")
    http = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(http.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        http.should_exit = True
        await asyncio.wait_for(task, timeout=10)
        sock.close()


async def run_requests(requests: int, deadline: Deadline) -> None:
    """Whole requests over streamable HTTP: a session (connect, list the tools), one
    ``search_books`` call, close; each loader's own connection against one kept by an
    ``MCPConnectionPool``, interleaved in a fresh random order per iteration."""
    for name in ("httpx", "httpx2", "mcp"):
        logging.getLogger(name).setLevel(logging.WARNING)
    case = CASES["bookshop"]
    rng = random.Random(11)  # noqa: S311 - a fixed seed: the same orders every run
    async with serving_http(case.build()) as url, MCPConnectionPool() as pool:
        loaders = {"per-request": MCPToolLoader(url), "pooled": MCPToolLoader(url, pool=pool)}

        async def request(loader: MCPToolLoader) -> None:
            async with loader.session() as tools:
                tool = next(t for t in tools if t.name == case.tool)
                output = await tool.call(case.arguments)
                assert output.structured == case.structured, output

        for loader in loaders.values():  # warm-up (and the pool's connection)
            await request(loader)
        times: dict[str, list[float]] = {name: [] for name in loaders}
        for _ in range(requests):
            if deadline.passed():
                break
            for name in rng.sample(list(loaders), len(loaders)):
                start = time.perf_counter()
                await request(loaders[name])
                times[name].append(time.perf_counter() - start)
    base = median(times["per-request"])
    print()
    print(
        f"ms per request over streamable HTTP (session + {case.tool} + close; "
        f"{len(times['pooled'])} interleaved requests of each)"
    )
    for name, values in times.items():
        lo, hi = quartiles(values)
        print(
            f"  {name:<12} {median(values) * 1e3:8.2f} ms  (p25-p75 {lo * 1e3:.2f}-{hi * 1e3:.2f})"
            f"  {median(values) / base:6.3f}x per-request"
        )


# --------------------------------------------------------------------------- main


async def run(args: argparse.Namespace, quick: bool, deadline: Deadline) -> None:
    batch = args.batch or (20 if quick else 50)
    max_rounds = args.rounds or (6 if quick else 2000)
    min_rounds = min(max_rounds, 3 if quick else 20)
    budget = args.seconds if args.seconds is not None else (4.0 if quick else 30.0)
    headlines: dict[str, float] = {}
    if args.requests:
        await run_requests(args.requests, deadline)
    for label in args.cases:
        case = CASES[label]
        print(f"\n=== {case.label}: {case.tool}({json.dumps(case.arguments)})")
        headlines[label] = await run_case(
            case, args, quick, deadline, batch, max_rounds, min_rounds, budget
        )
    print()
    for label, headline in headlines.items():
        print(
            f"headline {label}: normalized / raw = {headline:.3f}x (target <= {TARGET:.2f}x): "
            f"{'met' if headline <= TARGET else 'MISSED'}"
        )


async def run_case(
    case: Case,
    args: argparse.Namespace,
    quick: bool,
    deadline: Deadline,
    batch: int,
    max_rounds: int,
    min_rounds: int,
    budget: float,
) -> float:
    session = MCPToolLoader(case.build()).session()
    async with session as tools:
        calls = make_calls(session, tools, case)
        recorded = await check(calls, case)
        samples = await measure(calls, batch, max_rounds, min_rounds, budget, deadline)
        headline = print_table(samples, batch, case)
        raw = median(samples.calls[BASELINE])
        real = next(t for t in tools if t.name == case.tool)
        stub, normalizer = await asyncio.to_thread(
            isolated_cost, recorded, real, 2000 if quick else 20000, case
        )
        own = normalizer - stub
        print()
        print(
            f"normalizer without transport (its raw call a stub returning the recorded result; "
            f"best of 7): stub {stub * 1e6:.2f} µs, normalizer {normalizer * 1e6:.2f} µs, "
            f"own cost {own * 1e6:.2f} µs/call = {own / raw * 100:.2f}% of a raw call "
            f"({raw * 1e6:.1f} µs)"
        )
        pieces = await in_situ_pieces(
            session_client(session),
            real,
            300 if quick else 2000,
            random.Random(7),  # noqa: S311
            case,
        )
        if pieces is not None:
            shown = ", ".join(
                f"{name} {value * 1e6:.2f} µs ({value / raw * 100:.2f}% of a raw call)"
                for name, value in pieces.items()
            )
            print(
                f"the same pieces in situ (each timed right after a real raw call, caches as "
                f"mcp leaves them; median): {shown}"
            )
        if not args.no_profile and not deadline.passed():
            await run_profile(calls, 300 if quick else 3000, 8 if quick else 15)
    return headline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run (< 15 s)")
    parser.add_argument("--batch", type=int, default=None, help="calls of each kind per round")
    parser.add_argument("--rounds", type=int, default=None, help="max benchmark rounds")
    parser.add_argument("--seconds", type=float, default=None, help="time budget of the rounds")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile")
    parser.add_argument("--max-seconds", type=float, default=240.0, help="hard stop of the run")
    parser.add_argument(
        "--requests",
        type=int,
        default=None,
        help="whole requests over HTTP per arm, per-request vs pooled connection (0: skip)",
    )
    parser.add_argument(
        "--cases", nargs="+", choices=list(CASES), default=list(CASES), help="tools to call"
    )
    args = parser.parse_args()
    quick = args.quick
    if args.requests is None:
        args.requests = 20 if quick else 200
    deadline = Deadline(args.max_seconds)
    print(
        f"bench_mcp: python {platform.python_version()}, mcp {package_version('mcp')}, "
        f"{os.cpu_count()} cpus, {'quick' if quick else 'full'} run"
    )
    started = time.monotonic()
    asyncio.run(run(args, quick, deadline))
    print(f"\ntotal {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
