"""Flow benchmark: failure-context extraction cost and ``GraphBuilder`` per-step overhead.

    python bench/bench_flow.py            # the real figures (~1.5-2 minutes on 2 cores)
    python bench/bench_flow.py --quick    # a short run: does the benchmark still work? (<15 s)
    python bench/bench_flow.py --part context      # only part 1
    python bench/bench_flow.py --part overhead     # only part 2 (and its profile)

Run from the repository root with the package importable, e.g.
``PYTHONPATH=src python bench/bench_flow.py``.

What is measured (every figure is a ratio against a named baseline, all in one run):

1. ``extract_flow_error_context`` against the length of the run's history. The flow is
   ``START -> loop -> (loop ... N times) -> fail``: ``loop`` increments a counter, a
   conditional edge sends it back to itself until the counter reaches N, then ``fail``
   raises ``ComponentInvokeError`` (all async, so the baseline carries no thread-executor
   hops). So the failed run takes N + 1 steps and leaves about
   N + 3 checkpoints. For N in 10, 100, 1000 and for ``InMemorySaver`` and
   ``AsyncSqliteSaver`` (a file in a temporary directory; a fresh saver per N), the script
   times several failed runs (each on its own thread) and then the extraction, repeated on
   each of those threads. Baseline: the failed run itself. Reported: the run's median, the
   extraction's median and p95, both per step (per history checkpoint), and
   ``extract / run`` (the failure context's cost as a share of the work that failed). The
   extracted context is checked (failed node ``fail``, completed ``loop``, its last
   output ``{"count": N}``), so the bench breaks if the semantics change.

2. Per-step overhead of a ``GraphBuilder`` flow against the same plain ``StateGraph(dict)``
   with the same node functions: a chain of 20 trivial nodes, sync and async node
   variants, with no checkpointer and with ``InMemorySaver`` (a fresh saver per batch, a
   fresh thread per invoke, so no history accumulates). A sample is a batch of
   ``ainvoke`` calls; in every round each of the 8 graphs gets one batch, plain and
   builder back to back, their order alternating between rounds, so drift and noise on the
   machine hit both sides. Rounds continue until the time budget or the round cap.
   Baseline: plain ``StateGraph``. Reported: per-step microseconds (median over rounds) of
   each and the ratio builder / plain (median of the per-round paired ratios, with their
   interquartile range as the noise band). Target: builder <= 1.05 x plain. Then a
   cProfile of both (async nodes, no checkpointer) attributes the difference: the own time
   of ``llamon_agent/flow/builder.py`` functions (the ``_wrap`` wrapper and ``_merge``)
   per step, against the plain per-step time.

Everything is bounded: the sizes, repetitions and rounds are fixed, part 2 also stops at
its time budget (``--overhead-seconds``), and the whole script at ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import itertools
import math
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from typing import Any

try:
    import langgraph
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, StateGraph

    from llamon_agent.exceptions import ComponentInvokeError
    from llamon_agent.flow.builder import GraphBuilder
    from llamon_agent.flow.context import extract_flow_error_context
except ImportError as exc:  # pragma: no cover - a usage hint, not a code path
    sys.exit(f"bench_flow: {exc}; run with the package importable (PYTHONPATH=src)")

CHAIN_LENGTH = 20
OVERHEAD_TARGET = 1.05
SAVERS = ("memory", "sqlite")


# --------------------------------------------------------------------------- helpers


def median(values: list[float]) -> float:
    return statistics.median(values)


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile (the largest sample when there are fewer than 20)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 4:
        return min(values), max(values)
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def fmt_time(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def passed(self) -> bool:
        return time.monotonic() >= self.end


# --------------------------------------------------------------------------- part 1


def build_failing_loop(n: int, checkpointer: Any) -> Any:
    """``loop`` runs n times (the conditional edge drives it), then ``fail`` raises."""

    # Async throughout: LangGraph runs a sync node (or path) under ainvoke in a thread
    # executor, which would inflate the baseline (see part 2's sync rows).
    async def loop(state: dict[str, Any]) -> dict[str, Any]:
        return {"count": state.get("count", 0) + 1}

    async def fail(state: dict[str, Any]) -> dict[str, Any]:
        raise ComponentInvokeError("down")

    async def route(state: dict[str, Any]) -> str:
        return "loop" if state["count"] < n else "fail"

    return (
        GraphBuilder(name=f"loop{n}")
        .node("loop", loop, node_kind="business")
        .node("fail", fail, node_kind="llm")
        .edge(START, "loop")
        # An async path works in LangGraph; GraphBuilder's hint only names sync ones.
        .conditional_edges("loop", route, ["loop", "fail"])
        .edge("fail", END)
        .compile(checkpointer=checkpointer)
    )


@dataclass
class ContextRow:
    saver: str
    n: int
    checkpoints: int
    runs: list[float] = field(default_factory=list)
    extracts: list[float] = field(default_factory=list)


async def measure_context_cell(
    saver: str, n: int, checkpointer: Any, runs: int, extracts_per_run: int
) -> ContextRow:
    graph = build_failing_loop(n, checkpointer)
    row = ContextRow(saver, n, 0)
    threads: list[str] = []
    for i in range(runs):
        thread = f"{saver}-{n}-{i}"
        config = {"configurable": {"thread_id": thread}, "recursion_limit": n + 50}
        gc.collect()
        start = time.perf_counter()
        try:
            await graph.ainvoke({"count": 0}, config)
        except ComponentInvokeError:
            pass
        else:
            raise AssertionError("the flow was expected to fail")
        row.runs.append(time.perf_counter() - start)
        threads.append(thread)
    # Check once what is extracted, and count the history the extraction reads.
    ctx = await extract_flow_error_context(graph, threads[0])
    assert ctx is not None, "no failure context"
    assert ctx.node_id == "fail", ctx.node_id
    assert ctx.node_kind == "llm", ctx.node_kind
    assert ctx.completed_nodes == ("loop",), ctx.completed_nodes
    assert ctx.outputs["loop"] == {"count": n}, ctx.outputs
    history_config = {"configurable": {"thread_id": threads[0]}}
    row.checkpoints = len([s async for s in graph.aget_state_history(history_config)])
    # Extractions: round-robin over the failed threads.
    for _ in range(extracts_per_run):
        for thread in threads:
            gc.collect()
            start = time.perf_counter()
            await extract_flow_error_context(graph, thread)
            row.extracts.append(time.perf_counter() - start)
    return row


def context_plan(n: int, quick: bool) -> tuple[int, int]:
    """(failed runs, extractions per run) for history length n."""
    if quick:
        return (2, 3) if n <= 100 else (1, 2)
    if n <= 100:
        return 5, 6  # 30 extraction samples
    return 3, 5  # 15 extraction samples; a sqlite run of 1000 steps takes seconds


async def run_context_part(sizes: list[int], quick: bool, deadline: Deadline) -> list[ContextRow]:
    rows: list[ContextRow] = []
    with tempfile.TemporaryDirectory(prefix="bench_flow_") as tmp:
        for saver in SAVERS:
            for n in sizes:
                if deadline.passed():
                    print(f"  (skipped {saver} N={n}: --max-seconds reached)")
                    continue
                runs, extracts = context_plan(n, quick)
                async with AsyncExitStack() as stack:
                    if saver == "memory":
                        checkpointer: Any = InMemorySaver()
                    else:
                        path = os.path.join(tmp, f"checkpoints-{n}.sqlite")
                        checkpointer = await stack.enter_async_context(
                            AsyncSqliteSaver.from_conn_string(path)
                        )
                    row = await measure_context_cell(saver, n, checkpointer, runs, extracts)
                rows.append(row)
                print(
                    f"  {saver:<6} N={n:<5} run {fmt_time(median(row.runs)):>10}  "
                    f"extract {fmt_time(median(row.extracts)):>10}",
                    flush=True,
                )
    return rows


def print_context_table(rows: list[ContextRow]) -> None:
    print()
    print("1. extract_flow_error_context vs history length  (baseline: the failed run itself)")
    header = (
        f"{'saver':<7}{'N':>6}{'ckpts':>7}{'runs':>5}{'ext':>5}"
        f"{'run med':>11}{'extract med':>13}{'extract p95':>13}"
        f"{'run/step':>11}{'ext/ckpt':>11}{'extract/run':>13}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        run = median(row.runs)
        ext = median(row.extracts)
        print(
            f"{row.saver:<7}{row.n:>6}{row.checkpoints:>7}{len(row.runs):>5}{len(row.extracts):>5}"
            f"{fmt_time(run):>11}{fmt_time(ext):>13}{fmt_time(p95(row.extracts)):>13}"
            f"{fmt_time(run / (row.n + 1)):>11}{fmt_time(ext / row.checkpoints):>11}"
            f"{ext / run:>12.3f}x"
        )
    # Growth: how the extraction scales with N (1.0 per decade = linear).
    by_saver: dict[str, list[ContextRow]] = {}
    for row in rows:
        by_saver.setdefault(row.saver, []).append(row)
    for saver, saver_rows in by_saver.items():
        saver_rows.sort(key=lambda r: r.n)
        steps = []
        for a, b in itertools.pairwise(saver_rows):
            grow_ext = median(b.extracts) / median(a.extracts)
            grow_run = median(b.runs) / median(a.runs)
            steps.append(
                f"N {a.n}->{b.n} ({b.n / a.n:.0f}x): extract {grow_ext:.1f}x, run {grow_run:.1f}x"
            )
        if steps:
            print(f"  growth {saver}: " + "; ".join(steps))


# --------------------------------------------------------------------------- part 2


def chain_functions(is_async: bool) -> list[Callable[..., Any]]:
    """CHAIN_LENGTH trivial node functions, shared by both implementations."""
    fns: list[Callable[..., Any]] = []
    for i in range(CHAIN_LENGTH):
        if is_async:

            async def step(state: dict[str, Any]) -> dict[str, Any]:
                return {"count": state["count"] + 1}

        else:

            def step(state: dict[str, Any]) -> dict[str, Any]:  # type: ignore[misc]
                return {"count": state["count"] + 1}

        step.__name__ = f"n{i}"
        fns.append(step)
    return fns


def compile_plain(fns: list[Callable[..., Any]], checkpointer: Any) -> Any:
    graph: StateGraph[Any] = StateGraph(dict)
    names = [fn.__name__ for fn in fns]
    for name, fn in zip(names, fns, strict=True):
        graph.add_node(name, fn)
    graph.add_edge(START, names[0])
    for a, b in itertools.pairwise(names):
        graph.add_edge(a, b)
    graph.add_edge(names[-1], END)
    return graph.compile(checkpointer=checkpointer, name="plain")


def compile_builder(fns: list[Callable[..., Any]], checkpointer: Any) -> Any:
    builder = GraphBuilder(name="builder")
    names = [fn.__name__ for fn in fns]
    for name, fn in zip(names, fns, strict=True):
        builder.node(name, fn, node_kind="business")
    builder.edge(START, names[0])
    for a, b in itertools.pairwise(names):
        builder.edge(a, b)
    builder.edge(names[-1], END)
    return builder.compile(checkpointer=checkpointer)


COMPILERS = {"plain": compile_plain, "builder": compile_builder}


@dataclass(frozen=True)
class Case:
    nodes: str  # "sync" | "async"
    saver: str  # "none" | "memory"

    @property
    def label(self) -> str:
        return (
            f"{self.nodes} nodes, {'no checkpointer' if self.saver == 'none' else 'InMemorySaver'}"
        )


CASES = [Case(nodes, saver) for saver in ("none", "memory") for nodes in ("sync", "async")]


_thread_counter = 0


def fresh_config() -> dict[str, Any]:
    global _thread_counter
    _thread_counter += 1
    return {"configurable": {"thread_id": f"t{_thread_counter}"}}


async def time_sample(
    case: Case, fns: list[Callable[..., Any]], batch: int, first: str
) -> dict[str, list[float]]:
    """Per-invoke seconds of both implementations, invokes interleaved one by one.

    Both graphs are compiled afresh (each with its own fresh ``InMemorySaver`` when the
    case has one) and warmed once; then ``batch`` times: one ``ainvoke`` of each, ``first``
    first, the other right after, so a burst of load on the machine hits both.
    """
    graphs = {
        impl: compile_(fns, InMemorySaver() if case.saver == "memory" else None)
        for impl, compile_ in COMPILERS.items()
    }
    with_config = case.saver == "memory"
    for graph in graphs.values():
        await graph.ainvoke({"count": 0}, fresh_config() if with_config else None)
    order = (first, "builder" if first == "plain" else "plain")
    times: dict[str, list[float]] = {impl: [] for impl in COMPILERS}
    gc.collect()
    for _ in range(batch):
        for impl in order:
            config = fresh_config() if with_config else None
            graph = graphs[impl]
            start = time.perf_counter()
            out = await graph.ainvoke({"count": 0}, config)
            times[impl].append(time.perf_counter() - start)
            assert out == {"count": CHAIN_LENGTH}, out
    return times


@dataclass
class OverheadRow:
    case: Case
    plain: list[float] = field(default_factory=list)  # seconds per invoke, all samples
    builder: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)  # per round: median builder / median plain


async def run_overhead_part(
    batch: int, max_rounds: int, min_rounds: int, budget: float, deadline: Deadline
) -> list[OverheadRow]:
    fns = {"sync": chain_functions(False), "async": chain_functions(True)}
    rows = {case: OverheadRow(case) for case in CASES}
    for case in CASES:  # warm-up: import paths, first compile, caches
        await time_sample(case, fns[case.nodes], max(2, batch // 5), "plain")
    stop = time.monotonic() + budget
    rounds = 0
    while rounds < max_rounds:
        if rounds >= min_rounds and (time.monotonic() >= stop or deadline.passed()):
            break
        first = "plain" if rounds % 2 == 0 else "builder"
        for case in CASES:
            times = await time_sample(case, fns[case.nodes], batch, first)
            row = rows[case]
            row.plain.extend(times["plain"])
            row.builder.extend(times["builder"])
            row.ratios.append(median(times["builder"]) / median(times["plain"]))
        rounds += 1
    print(
        f"  {rounds} rounds x {batch} interleaved ainvoke pairs x {CHAIN_LENGTH} nodes per case",
        flush=True,
    )
    return list(rows.values())


def print_overhead_table(rows: list[OverheadRow]) -> float:
    """Print part 2's table; return plain's per-step seconds (async, no checkpointer)."""
    print()
    print(
        f"2. per-step time, chain of {CHAIN_LENGTH} nodes, ainvoke  "
        f"(baseline: plain StateGraph(dict); target builder <= {OVERHEAD_TARGET:.2f}x)"
    )
    header = (
        f"{'case':<36}{'invokes':>8}{'plain µs/step':>15}{'builder µs/step':>17}"
        f"{'ratio':>8}{'round IQR':>15}{'pooled':>8}{'target':>8}"
    )
    print(header)
    print("-" * len(header))
    reference = 0.0
    for row in rows:
        plain = median(row.plain) / CHAIN_LENGTH
        builder = median(row.builder) / CHAIN_LENGTH
        ratio = median(row.ratios)
        lo, hi = quartiles(row.ratios)
        if row.case == Case("async", "none"):
            reference = plain
        print(
            f"{row.case.label:<36}{len(row.plain):>8}{plain * 1e6:>15.2f}{builder * 1e6:>17.2f}"
            f"{ratio:>8.3f}{f'{lo:.3f}-{hi:.3f}':>15}{builder / plain:>8.3f}"
            f"{'met' if ratio <= OVERHEAD_TARGET else 'MISSED':>8}"
        )
    print(
        "  µs/step: median per-invoke time / 20 nodes; ratio: median over rounds of "
        "(median builder / median plain) in the round; pooled: ratio of the overall medians"
    )
    return reference


def profile_overhead(batch: int, top: int, plain_step: float) -> None:
    """cProfile the builder chain (async nodes, no checkpointer); the wrapper's own share."""
    fns = chain_functions(True)
    print()
    print(f"profile: {batch} ainvokes of the builder's async chain, no checkpointer, cProfile")
    graph = compile_builder(fns, None)

    async def drive() -> None:
        for _ in range(batch):
            await graph.ainvoke({"count": 0})

    asyncio.run(drive())  # warm
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(drive())
    profiler.disable()
    stats = pstats.Stats(profiler)
    steps = batch * CHAIN_LENGTH
    total = stats.total_tt  # type: ignore[attr-defined]
    own = 0.0
    lines = []
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if filename.replace(os.sep, "/").endswith("llamon_agent/flow/builder.py"):
            own += tt
            lines.append(
                (
                    tt,
                    f"    builder.py:{line} {func}: {nc} calls, own {tt * 1e6 / steps:.2f} "
                    f"µs/step, cumulative {ct * 1e6 / steps:.2f} µs/step",
                )
            )
    print(
        f"  own time of llamon_agent/flow/builder.py: {own * 1e6 / steps:.2f} µs/step under "
        f"cProfile = {own / total * 100:.2f}% of the profiled builder run"
    )
    if plain_step:
        print(
            f"  (vs the unprofiled plain step of {plain_step * 1e6:.1f} µs above: "
            f"{own / steps / plain_step * 100:.2f}%, an upper bound since cProfile inflates "
            f"small Python functions most)"
        )
    for _, text in sorted(lines, reverse=True):
        print(text)
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(top)
    print(f"  top {top} functions of the builder run by own time:")
    for text in out.getvalue().splitlines():
        if text.strip() and not text.startswith(("   Ordered by", "   List reduced")):
            print(
                "   " + text.rstrip().replace(os.path.dirname(langgraph.__path__[0]) + os.sep, "")
            )


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run (< 15 s)")
    parser.add_argument("--part", choices=("all", "context", "overhead"), default="all")
    parser.add_argument("--sizes", default=None, help="history lengths N (default 10,100,1000)")
    parser.add_argument("--batch", type=int, default=None, help="ainvokes per sample (part 2)")
    parser.add_argument("--rounds", type=int, default=None, help="max rounds (part 2)")
    parser.add_argument(
        "--overhead-seconds", type=float, default=None, help="time budget of part 2's rounds"
    )
    parser.add_argument("--no-profile", action="store_true", help="skip part 2's cProfile")
    parser.add_argument("--max-seconds", type=float, default=240.0, help="hard stop of the run")
    args = parser.parse_args()

    quick = args.quick
    sizes = [int(s) for s in (args.sizes or ("10,100" if quick else "10,100,1000")).split(",")]
    batch = args.batch or (10 if quick else 25)
    max_rounds = args.rounds or (3 if quick else 200)
    min_rounds = min(max_rounds, 2 if quick else 8)
    budget = (
        args.overhead_seconds if args.overhead_seconds is not None else (3.0 if quick else 60.0)
    )
    deadline = Deadline(args.max_seconds)

    print(
        f"bench_flow: python {platform.python_version()}, langgraph "
        f"{package_version('langgraph')}, {os.cpu_count()} cpus, "
        f"{'quick' if quick else 'full'} run"
    )
    started = time.monotonic()
    context_rows: list[ContextRow] = []
    overhead_rows: list[OverheadRow] = []
    if args.part in ("all", "context"):
        print("part 1: failure-context extraction")
        context_rows = asyncio.run(run_context_part(sizes, quick, deadline))
    if args.part in ("all", "overhead") and not deadline.passed():
        print("part 2: GraphBuilder vs plain StateGraph")
        overhead_rows = asyncio.run(
            run_overhead_part(batch, max_rounds, min_rounds, budget, deadline)
        )
    if context_rows:
        print_context_table(context_rows)
    if overhead_rows:
        plain_step = print_overhead_table(overhead_rows)
        if not args.no_profile and not deadline.passed():
            profile_overhead(20 if quick else 200, 8 if quick else 15, plain_step)
    print(f"\ntotal {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
