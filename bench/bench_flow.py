"""Flow benchmark: failure-context extraction cost and ``GraphBuilder`` per-step overhead.

    python bench/bench_flow.py            # the real figures (~1.5-2 minutes on 2 cores)
    python bench/bench_flow.py --quick    # a short run: does the benchmark still work? (<15 s)
    python bench/bench_flow.py --part context      # only part 1
    python bench/bench_flow.py --part context --arms record   # part 1, the channel only
    python bench/bench_flow.py --part overhead     # only part 2 (and its profile)
    python bench/bench_flow.py --part record       # only part 3

Run from the repository root with the package importable, e.g.
``PYTHONPATH=src python bench/bench_flow.py``.

What is measured (every figure is a ratio against a named baseline, all in one run):

1. ``extract_flow_error_context`` against the length of the run's history. The flow is
   ``START -> loop -> (loop ... N times) -> fail``: ``loop`` increments a counter, a
   conditional edge sends it back to itself until the counter reaches N, then ``fail``
   raises ``ComponentInvokeError`` (all async, so the runs carry no thread-executor
   hops). So the failed run takes N + 1 steps and leaves about N + 3 checkpoints. For N
   in 10, 100, 1000 and for ``InMemorySaver`` and ``AsyncSqliteSaver`` (a file in a
   temporary directory), two arms, each with a saver of its own: ``record`` (the flow as
   ``GraphBuilder`` compiles it: the completed nodes kept in a checkpoint channel) and
   ``history`` (the same flow compiled without that channel, as before it existed: the
   extraction walks the whole state history). The failed runs of both arms are
   interleaved run by run; then each arm's extraction is timed on each failed thread,
   every sample paired with an ``aget_state`` of the same thread (order alternating).
   Baseline: ``aget_state`` alone (the floor of any reading of the failure). Reported:
   the run's median, ``aget_state``'s and the extraction's median (and p95), the median
   of the paired ratios extract / aget_state, extract / run, the serialized bytes the
   saver holds per checkpoint (checkpoint, metadata, channel blobs, pending writes), the
   growth of each arm with N, and record against history at the same N (bytes per
   checkpoint, failed run wall and CPU time as medians of interleaved pairs, extraction).
   Target: extraction <= 5 ms at N = 1000 on SQLite and flat in N. The extracted context
   is checked (failed node ``fail``, completed ``loop``, its last output
   ``{"count": N}``), so the bench breaks if the semantics change.

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

3. The completed-nodes channel's own cost: the builder chain of part 2 (async nodes)
   compiled with and without the channel, without a checkpointer and with
   ``InMemorySaver``, invokes interleaved one by one, process CPU per invoke (less hit by
   other load on the machine than wall time). Baseline: without the channel. Reported:
   the median over rounds of the per-round ratio of medians, and its interquartile range.

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
from unittest import mock

try:
    import langgraph
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, StateGraph

    from llamon_agent.exceptions import ComponentInvokeError
    from llamon_agent.flow import builder as flow_builder
    from llamon_agent.flow.builder import COMPLETED_CHANNEL, GraphBuilder
    from llamon_agent.flow.context import extract_flow_error_context
except ImportError as exc:  # pragma: no cover - a usage hint, not a code path
    sys.exit(f"bench_flow: {exc}; run with the package importable (PYTHONPATH=src)")

CHAIN_LENGTH = 20
OVERHEAD_TARGET = 1.05
SAVERS = ("memory", "sqlite")
ARMS = ("record", "history")
CONTEXT_TARGET = 5e-3


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


def build_failing_loop(n: int, checkpointer: Any, arm: str = "record") -> Any:
    """``loop`` runs n times (the conditional edge drives it), then ``fail`` raises.

    ``arm="history"`` compiles the same flow without the completed-nodes channel (as
    ``GraphBuilder`` did before it kept one), so its failure context walks the history.
    """

    # Async throughout: LangGraph runs a sync node (or path) under ainvoke in a thread
    # executor, which would inflate the baseline (see part 2's sync rows).
    async def loop(state: dict[str, Any]) -> dict[str, Any]:
        return {"count": state.get("count", 0) + 1}

    async def fail(state: dict[str, Any]) -> dict[str, Any]:
        raise ComponentInvokeError("down")

    async def route(state: dict[str, Any]) -> str:
        return "loop" if state["count"] < n else "fail"

    builder = (
        GraphBuilder(name=f"loop{n}")
        .node("loop", loop, node_kind="business")
        .node("fail", fail, node_kind="llm")
        .edge(START, "loop")
        # An async path works in LangGraph; GraphBuilder's hint only names sync ones.
        .conditional_edges("loop", route, ["loop", "fail"])
        .edge("fail", END)
    )
    if arm == "record":
        graph = builder.compile(checkpointer=checkpointer)
        assert COMPLETED_CHANNEL in graph.channels
        return graph
    with mock.patch.object(flow_builder, "_record_completed", return_value=None):
        graph = builder.compile(checkpointer=checkpointer)
    assert COMPLETED_CHANNEL not in graph.channels
    return graph


@dataclass
class ContextRow:
    saver: str
    n: int
    arm: str  # "record" (the completed-nodes channel) | "history" (walk the history)
    checkpoints: int
    bytes_per_checkpoint: float = 0.0
    runs: list[float] = field(default_factory=list)
    run_cpus: list[float] = field(default_factory=list)  # process CPU seconds of each run
    extracts: list[float] = field(default_factory=list)
    states: list[float] = field(default_factory=list)  # aget_state alone, same threads
    ratios: list[float] = field(default_factory=list)  # extract / aget_state, paired


async def stored_bytes(checkpointer: Any, thread: str) -> int:
    """Serialized bytes the saver holds for ``thread``: checkpoints, metadata, channel
    blobs and pending writes."""
    if isinstance(checkpointer, InMemorySaver):
        total = 0
        for namespace in checkpointer.storage[thread].values():
            for checkpoint, metadata, _parent in namespace.values():
                total += len(checkpoint[1]) + len(metadata[1])
        total += sum(len(blob[1]) for key, blob in checkpointer.blobs.items() if key[0] == thread)
        for key, writes in checkpointer.writes.items():
            if key[0] == thread:
                total += sum(len(write[2][1]) for write in writes.values())
        return total
    conn = checkpointer.conn
    async with conn.execute(
        "SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) FROM checkpoints "
        "WHERE thread_id = ?",
        (thread,),
    ) as cursor:
        (checkpoints,) = await cursor.fetchone()
    async with conn.execute(
        "SELECT coalesce(sum(length(value)), 0) FROM writes WHERE thread_id = ?", (thread,)
    ) as cursor:
        (writes,) = await cursor.fetchone()
    return int(checkpoints) + int(writes)


async def failed_run(graph: Any, n: int, thread: str) -> tuple[float, float]:
    """Seconds of one failed run of the loop flow on ``thread``: wall clock, and CPU of the
    process (all its threads, so aiosqlite's too; less hit by other load on the machine)."""
    config = {"configurable": {"thread_id": thread}, "recursion_limit": n + 50}
    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    try:
        await graph.ainvoke({"count": 0}, config)
    except ComponentInvokeError:
        pass
    else:
        raise AssertionError("the flow was expected to fail")
    return time.perf_counter() - start, time.process_time() - cpu


async def measure_context_cell(
    saver: str, n: int, arms: list[str], checkpointers: dict[str, Any], runs: int, extracts: int
) -> list[ContextRow]:
    """The failed runs of every arm, interleaved run by run (order alternating), then each
    arm's extractions, each paired with an ``aget_state`` of the same thread."""
    graphs = {arm: build_failing_loop(n, checkpointers[arm], arm) for arm in arms}
    rows = {arm: ContextRow(saver, n, arm, 0) for arm in arms}
    threads: dict[str, list[str]] = {arm: [] for arm in arms}
    for i in range(runs):
        for arm in arms if i % 2 == 0 else arms[::-1]:
            thread = f"{saver}-{n}-{arm}-{i}"
            wall, cpu = await failed_run(graphs[arm], n, thread)
            rows[arm].runs.append(wall)
            rows[arm].run_cpus.append(cpu)
            threads[arm].append(thread)
    for arm in arms:
        await measure_extraction(rows[arm], graphs[arm], checkpointers[arm], threads[arm], extracts)
    return list(rows.values())


async def measure_extraction(
    row: ContextRow, graph: Any, checkpointer: Any, threads: list[str], extracts_per_run: int
) -> None:
    n = row.n
    # Check once what is extracted, and count the history the extraction reads.
    ctx = await extract_flow_error_context(graph, threads[0])
    assert ctx is not None, "no failure context"
    assert ctx.node_id == "fail", ctx.node_id
    assert ctx.node_kind == "llm", ctx.node_kind
    assert ctx.completed_nodes == ("loop",), ctx.completed_nodes
    assert ctx.outputs["loop"] == {"count": n}, ctx.outputs
    history_config = {"configurable": {"thread_id": threads[0]}}
    row.checkpoints = len([s async for s in graph.aget_state_history(history_config)])
    row.bytes_per_checkpoint = await stored_bytes(checkpointer, threads[0]) / row.checkpoints
    # Extractions: round-robin over the failed threads; each paired with an aget_state of
    # the same thread (order alternating), the floor any reading of the failure pays.
    for repeat in range(extracts_per_run):
        for thread in threads:
            config = {"configurable": {"thread_id": thread}}
            pair: dict[str, float] = {}
            for what in ("state", "extract") if repeat % 2 == 0 else ("extract", "state"):
                gc.collect()
                start = time.perf_counter()
                if what == "state":
                    await graph.aget_state(config)
                else:
                    await extract_flow_error_context(graph, thread)
                pair[what] = time.perf_counter() - start
            row.states.append(pair["state"])
            row.extracts.append(pair["extract"])
            row.ratios.append(pair["extract"] / pair["state"])


def context_plan(n: int, quick: bool) -> tuple[int, int]:
    """(failed runs, extractions per run) for history length n."""
    if quick:
        return (2, 3) if n <= 100 else (1, 2)
    if n <= 100:
        return 5, 6  # 30 extraction samples
    return 3, 5  # 15 extraction samples; a sqlite run of 1000 steps takes seconds


async def run_context_part(
    sizes: list[int], arms: list[str], quick: bool, deadline: Deadline
) -> list[ContextRow]:
    rows: list[ContextRow] = []
    with tempfile.TemporaryDirectory(prefix="bench_flow_") as tmp:
        for saver in SAVERS:
            for n in sizes:
                if deadline.passed():
                    print(f"  (skipped {saver} N={n}: --max-seconds reached)")
                    continue
                runs, extracts = context_plan(n, quick)
                async with AsyncExitStack() as stack:
                    checkpointers: dict[str, Any] = {}
                    for arm in arms:  # a saver of its own per arm
                        if saver == "memory":
                            checkpointers[arm] = InMemorySaver()
                        else:
                            path = os.path.join(tmp, f"checkpoints-{n}-{arm}.sqlite")
                            checkpointers[arm] = await stack.enter_async_context(
                                AsyncSqliteSaver.from_conn_string(path)
                            )
                    cell = await measure_context_cell(saver, n, arms, checkpointers, runs, extracts)
                for row in cell:
                    rows.append(row)
                    print(
                        f"  {saver:<6} N={n:<5} {row.arm:<8} run {fmt_time(median(row.runs)):>10}"
                        f"  extract {fmt_time(median(row.extracts)):>10}  "
                        f"aget_state {fmt_time(median(row.states)):>10}",
                        flush=True,
                    )
    return rows


def print_context_table(rows: list[ContextRow]) -> None:
    print()
    print(
        "1. extract_flow_error_context vs history length  "
        f"(baseline: aget_state of the same thread; target <= {fmt_time(CONTEXT_TARGET)} at "
        "N=1000 on sqlite, flat in N)"
    )
    header = (
        f"{'saver':<7}{'N':>6}{'arm':>9}{'ckpts':>7}{'ext':>5}"
        f"{'run med':>11}{'aget_state':>12}{'extract med':>13}{'extract p95':>13}"
        f"{'ext/state':>11}{'extract/run':>13}{'B/ckpt':>9}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        run = median(row.runs)
        ext = median(row.extracts)
        print(
            f"{row.saver:<7}{row.n:>6}{row.arm:>9}{row.checkpoints:>7}{len(row.extracts):>5}"
            f"{fmt_time(run):>11}{fmt_time(median(row.states)):>12}{fmt_time(ext):>13}"
            f"{fmt_time(p95(row.extracts)):>13}{median(row.ratios):>10.2f}x"
            f"{ext / run:>12.4f}x{row.bytes_per_checkpoint:>9.0f}"
        )
    print(
        "  ext/state: median of paired (extract / aget_state) on the same thread; "
        "B/ckpt: serialized bytes the saver holds per checkpoint (checkpoint, metadata, "
        "blobs, writes)"
    )
    # Growth: how the extraction scales with N (1.0 per decade = flat, 10x = linear).
    by_arm: dict[tuple[str, str], list[ContextRow]] = {}
    for row in rows:
        by_arm.setdefault((row.saver, row.arm), []).append(row)
    for (saver, arm), arm_rows in by_arm.items():
        arm_rows.sort(key=lambda r: r.n)
        steps = []
        for a, b in itertools.pairwise(arm_rows):
            grow_ext = median(b.extracts) / median(a.extracts)
            grow_run = median(b.runs) / median(a.runs)
            steps.append(
                f"N {a.n}->{b.n} ({b.n / a.n:.0f}x): extract {grow_ext:.2f}x, run {grow_run:.1f}x"
            )
        if steps:
            print(f"  growth {saver} {arm}: " + "; ".join(steps))
    # The channel's cost per checkpoint and per run: record against history, same N.
    pairs = {(row.saver, row.n, row.arm): row for row in rows}
    for (saver, n, arm), row in pairs.items():
        other = pairs.get((saver, n, "history"))
        if arm != "record" or other is None:
            continue
        print(
            f"  record vs history {saver} N={n}: bytes/checkpoint "
            f"{row.bytes_per_checkpoint / other.bytes_per_checkpoint:.3f}x "
            f"(+{row.bytes_per_checkpoint - other.bytes_per_checkpoint:.0f} B), failed run "
            f"{median([a / b for a, b in zip(row.runs, other.runs, strict=True)]):.3f}x wall, "
            f"{median([a / b for a, b in zip(row.run_cpus, other.run_cpus, strict=True)]):.3f}x "
            "CPU (medians of interleaved pairs), extract "
            f"{median(row.extracts) / median(other.extracts):.4f}x"
        )


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


# --------------------------------------------------------------------------- part 3


def compile_builder_without_record(fns: list[Callable[..., Any]], checkpointer: Any) -> Any:
    """The builder chain compiled without the completed-nodes channel."""
    with mock.patch.object(flow_builder, "_record_completed", return_value=None):
        graph = compile_builder(fns, checkpointer)
    assert COMPLETED_CHANNEL not in graph.channels
    return graph


async def run_record_part(rounds: int, batch: int) -> None:
    """Process CPU per invoke of the builder chain with / without the completed-nodes
    channel, invokes interleaved one by one (order alternating between rounds)."""
    fns = chain_functions(True)
    print()
    print(
        f"3. the completed-nodes channel's own cost: builder chain of {CHAIN_LENGTH} async "
        "nodes with / without it, process CPU per invoke (baseline: without)"
    )
    for saver in ("none", "memory"):
        ratios: list[float] = []
        per_step: dict[str, list[float]] = {"with": [], "without": []}
        for round_ in range(rounds):
            graphs = {
                "with": compile_builder(fns, InMemorySaver() if saver == "memory" else None),
                "without": compile_builder_without_record(
                    fns, InMemorySaver() if saver == "memory" else None
                ),
            }
            times: dict[str, list[float]] = {"with": [], "without": []}
            order = ("with", "without") if round_ % 2 else ("without", "with")
            for _ in range(batch):
                for arm in order:
                    config = fresh_config() if saver == "memory" else None
                    start = time.process_time()
                    await graphs[arm].ainvoke({"count": 0}, config)
                    times[arm].append(time.process_time() - start)
            ratios.append(median(times["with"]) / median(times["without"]))
            for arm, values in times.items():
                per_step[arm].append(median(values) / CHAIN_LENGTH)
        lo, hi = quartiles(ratios)
        label = "no checkpointer" if saver == "none" else "InMemorySaver"
        print(
            f"  {label:<16} with {median(per_step['with']) * 1e6:7.1f} µs/step, without "
            f"{median(per_step['without']) * 1e6:7.1f} µs/step, ratio {median(ratios):.3f} "
            f"(round IQR {lo:.3f}-{hi:.3f}, {rounds} rounds x {batch} pairs)"
        )


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run (< 15 s)")
    parser.add_argument("--part", choices=("all", "context", "overhead", "record"), default="all")
    parser.add_argument("--sizes", default=None, help="history lengths N (default 10,100,1000)")
    parser.add_argument(
        "--arms", default=",".join(ARMS), help="part 1 arms: record (channel), history (walk)"
    )
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
        arms = [arm for arm in args.arms.split(",") if arm]
        context_rows = asyncio.run(run_context_part(sizes, arms, quick, deadline))
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
    if args.part in ("all", "record") and not deadline.passed():
        asyncio.run(run_record_part(4 if quick else 40, 5 if quick else 15))
    print(f"\ntotal {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
