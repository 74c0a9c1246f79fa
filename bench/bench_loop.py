"""Loop benchmark: per-round overhead of ``run_loop`` against a hand-written loop and LangGraph.

    python bench/bench_loop.py            # the real figures (~1.5 minutes on 2 cores)
    python bench/bench_loop.py --quick    # a short run: does the benchmark still work? (<15 s)
    python bench/bench_loop.py --no-profile

Run from the repository root with the package importable, e.g.
``PYTHONPATH=src python bench/bench_loop.py``. Nothing leaves the process.

What is measured (every figure is a ratio against a named baseline, all in one run):

One run is R = 10 tool rounds and one answer round: the fake model asks for one call of
the trivial async tool ``echo(n: int) -> {"echo": n}`` per round (``n`` = the round
number, so no call repeats the one before it), then answers ``"done"``. Three
implementations do exactly that work:

* ``native``: ``run_loop(ScriptedModel([...]), view, prompt, max_rounds=R + 1)`` with
  ``echo`` as a ``Tool`` (``Tool.from_function``), i.e. with every check of the loop
  (lookup, JSON parse, pydantic validation, repeat guard, results, records, outcome).
* ``hand``: the baseline -- a minimal loop with the same ``ScriptedModel`` script and the
  same async function: call the model, ``json.loads`` the arguments, ``await fn(**args)``,
  append ``ToolMessage(json.dumps(value))``; no checks, no records.
* ``langgraph``: LangGraph's prebuilt ReAct agent (``create_react_agent``, graph
  compiled once, no checkpointer) with a small scripted ``BaseChatModel`` (async
  ``_agenerate``, so no thread-executor hop; ``bind_tools`` returns itself) that answers
  the same sequence of ``AIMessage(tool_calls=[...])``, and the same async function as a
  ``StructuredTool`` (``StructuredTool.from_function(coroutine=echo)``).

Each implementation also runs with R = 0 (the model answers at once), which gives the
fixed per-run cost and so the *marginal* cost of a round, ``(t(R=10) - t(R=0)) / 10``.

A benchmark round runs ``--batch`` iterations; each iteration runs every
(implementation, R) pair once, back to back, in a fresh random order (seeded), so drift
and bursts of load hit every side alike and no run always follows the same neighbour (the
run just before warms or cools the CPU caches: a native R=0 run takes ~16 µs after a
native run and ~40 µs after a LangGraph one). Rounds continue until the time budget or
the round cap. Reported per implementation: µs per round (median run time / R) and the
marginal µs per round; and the ratios native / hand and native / langgraph (median over
rounds of the per-round ratio of medians, with the interquartile range as the noise band,
plus the ratio of the pooled medians). Then a cProfile of native runs attributes the
native loop's own time by ``llamon_agent`` module and function.

The results are checked once before timing (the same answer, R tool messages with the
same texts in every implementation), so the bench breaks if the semantics change.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import random
import statistics
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from typing import Any

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForLLMRun,
        CallbackManagerForLLMRun,
    )
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.messages import ToolMessage as LCToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

    from llamon_agent.loop import (
        AssistantMessage,
        ChatMessage,
        ScriptedModel,
        Tool,
        ToolMessage,
        ToolRegistry,
        ToolSpec,
        UserMessage,
        run_loop,
        tool_call,
    )
except ImportError as exc:  # pragma: no cover - a usage hint, not a code path
    sys.exit(f"bench_loop: {exc}; run with the package importable (PYTHONPATH=src)")

ROUNDS = 10  # R: tool rounds per run (plus one answer round)
PROMPT = "Echo the numbers, then say done."
ANSWER = "done"
IMPLS = ("native", "hand", "langgraph")
BASELINES = ("hand", "langgraph")
STDLIB = os.path.dirname(os.path.dirname(json.__file__))
RUNNER_FILE = os.path.abspath(run_loop.__code__.co_filename)  # src/llamon_agent/loop/runner.py
SRC = os.path.dirname(os.path.dirname(os.path.dirname(RUNNER_FILE)))


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


# --------------------------------------------------------------------------- the tool


async def echo(n: int) -> dict[str, int]:
    """Echo the number back."""
    return {"echo": n}


def expected_texts(rounds: int) -> list[str]:
    return [json.dumps({"echo": i}) for i in range(1, rounds + 1)]


# --------------------------------------------------------------------------- native


def native_script(rounds: int) -> list[Any]:
    return [tool_call("echo", {"n": i}) for i in range(1, rounds + 1)] + [ANSWER]


def make_native_runner(rounds: int) -> tuple[Callable[[], Any], Callable[[Any], Awaitable[Any]]]:
    """(prepare, run): the model is made outside the timed call."""
    view = ToolRegistry([Tool.from_function(echo)]).view()

    def prepare() -> Any:
        return ScriptedModel(native_script(rounds))

    async def run(model: Any) -> Any:
        return await run_loop(model, view, PROMPT, max_rounds=rounds + 1)

    return prepare, run


# --------------------------------------------------------------------------- hand-written


async def hand_loop(
    model: ScriptedModel,
    functions: dict[str, Callable[..., Awaitable[Any]]],
    specs: tuple[ToolSpec, ...],
    prompt: str,
    max_rounds: int,
) -> tuple[str | None, list[ChatMessage]]:
    """The baseline: call the model, parse, call, append -- no checks at all."""
    transcript: list[ChatMessage] = [UserMessage(prompt)]
    for _ in range(max_rounds):
        response = await model.complete(transcript, specs)
        transcript.append(AssistantMessage(response.content, response.tool_calls))
        if not response.tool_calls:
            return response.content, transcript
        for call in response.tool_calls:
            value = await functions[call.name](**json.loads(call.arguments_json))
            transcript.append(ToolMessage(call.id, call.name, json.dumps(value)))
    return None, transcript


def make_hand_runner(rounds: int) -> tuple[Callable[[], Any], Callable[[Any], Awaitable[Any]]]:
    specs = ToolRegistry([Tool.from_function(echo)]).specs()  # the same specs the model sees
    functions: dict[str, Callable[..., Awaitable[Any]]] = {"echo": echo}

    def prepare() -> Any:
        return ScriptedModel(native_script(rounds))

    async def run(model: Any) -> Any:
        return await hand_loop(model, functions, specs, PROMPT, rounds + 1)

    return prepare, run


# --------------------------------------------------------------------------- LangGraph


class ScriptedChatModel(BaseChatModel):
    """A fake chat model for the ReAct agent: ``rounds`` tool-call turns, then ``done``.

    Stateless: the turn is the number of AI messages already in the input, so one model
    (and one compiled graph) serves every run. ``_agenerate`` is async (the default one
    would hop to a thread executor), ``bind_tools`` returns the model itself.
    """

    rounds: int = ROUNDS

    @property
    def _llm_type(self) -> str:
        return "bench-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        done = sum(1 for m in messages if isinstance(m, AIMessage))
        if done < self.rounds:
            turn = done + 1
            message = AIMessage(
                content="",
                tool_calls=[{"name": "echo", "args": {"n": turn}, "id": f"call_{turn}"}],
            )
        else:
            message = AIMessage(content=ANSWER)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._answer(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._answer(messages)


def make_langgraph_runner(
    rounds: int,
) -> tuple[Callable[[], Any], Callable[[Any], Awaitable[Any]]]:
    tool = StructuredTool.from_function(coroutine=echo, name="echo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated for langchain's
        graph = create_react_agent(ScriptedChatModel(rounds=rounds), [tool])
    config: Any = {"recursion_limit": 2 * rounds + 10}

    def prepare() -> Any:
        return {"messages": [HumanMessage(PROMPT)]}

    async def run(state: Any) -> Any:
        return await graph.ainvoke(state, config)

    return prepare, run


# --------------------------------------------------------------------------- checks


def texts_of(impl: str, result: Any) -> tuple[Any, list[Any]]:
    if impl == "native":
        assert result.status == "completed", (result.status, result.failures)
        return result.answer, [m.content for m in result.transcript if m.role == "tool"]
    if impl == "hand":
        answer, transcript = result
        return answer, [m.content for m in transcript if m.role == "tool"]
    messages = result["messages"]
    tools = [m.content for m in messages if isinstance(m, LCToolMessage)]
    return messages[-1].content, tools


Runner = tuple[Callable[[], Any], Callable[[Any], Awaitable[Any]]]


def build_runners() -> dict[tuple[str, int], Runner]:
    makers = {
        "native": make_native_runner,
        "hand": make_hand_runner,
        "langgraph": make_langgraph_runner,
    }
    return {(impl, r): makers[impl](r) for impl in IMPLS for r in (ROUNDS, 0)}


async def check(runners: dict[tuple[str, int], Runner]) -> None:
    for (impl, rounds), (prepare, run) in runners.items():
        answer, tools = texts_of(impl, await run(prepare()))
        assert answer == ANSWER, (impl, rounds, answer)
        assert tools == expected_texts(rounds), (impl, rounds, tools)


# --------------------------------------------------------------------------- timing


@dataclass
class Samples:
    runs: dict[tuple[str, int], list[float]] = field(default_factory=dict)  # seconds per run
    ratios: dict[str, list[float]] = field(default_factory=dict)  # per round, per round-time
    marginal_ratios: dict[str, list[float]] = field(default_factory=dict)
    rounds: int = 0


def per_round(times: dict[tuple[str, int], list[float]], impl: str) -> float:
    return median(times[(impl, ROUNDS)]) / ROUNDS


def marginal(times: dict[tuple[str, int], list[float]], impl: str) -> float:
    return (median(times[(impl, ROUNDS)]) - median(times[(impl, 0)])) / ROUNDS


async def time_round(
    runners: dict[tuple[str, int], Runner], batch: int, rng: random.Random
) -> dict[tuple[str, int], list[float]]:
    """``batch`` iterations; each runs every (implementation, R) once, in a fresh random
    order: what ran just before a run warms or cools the CPU caches for it (measured: a
    native R=0 run takes ~16 µs right after a native run, ~40 µs after a LangGraph one), so
    a fixed or merely rotated order would favour whoever follows itself."""
    keys = list(runners)
    times: dict[tuple[str, int], list[float]] = {key: [] for key in keys}
    gc.collect()
    for _ in range(batch):
        for key in rng.sample(keys, len(keys)):
            prepare, run = runners[key]
            arg = prepare()
            start = time.perf_counter()
            await run(arg)
            times[key].append(time.perf_counter() - start)
    return times


async def measure(
    batch: int, max_rounds: int, min_rounds: int, budget: float, deadline: Deadline
) -> Samples:
    runners = build_runners()
    await check(runners)
    keys = list(runners)
    rng = random.Random(20240601)  # noqa: S311 - a fixed seed: the same orders every run
    await time_round(runners, max(3, batch // 4), rng)  # warm-up
    samples = Samples(runs={key: [] for key in keys})
    samples.ratios = {base: [] for base in BASELINES}
    samples.marginal_ratios = {base: [] for base in BASELINES}
    stop = time.monotonic() + budget
    while samples.rounds < max_rounds:
        if samples.rounds >= min_rounds and (time.monotonic() >= stop or deadline.passed()):
            break
        times = await time_round(runners, batch, rng)
        for key, values in times.items():
            samples.runs[key].extend(values)
        for base in BASELINES:
            samples.ratios[base].append(per_round(times, "native") / per_round(times, base))
            samples.marginal_ratios[base].append(marginal(times, "native") / marginal(times, base))
        samples.rounds += 1
    return samples


def print_table(samples: Samples, batch: int) -> None:
    runs = samples.runs
    print()
    print(
        f"per-round time, R = {ROUNDS} tool rounds + 1 answer round per run "
        f"({samples.rounds} rounds x {batch} interleaved runs of each implementation)"
    )
    header = (
        f"{'implementation':<16}{'runs':>6}{'run R=10':>11}{'run R=0':>10}"
        f"{'µs/round':>10}{'marginal µs/round':>19}"
    )
    print(header)
    print("-" * len(header))
    for impl in IMPLS:
        print(
            f"{impl:<16}{len(runs[(impl, ROUNDS)]):>6}"
            f"{median(runs[(impl, ROUNDS)]) * 1e6:>9.1f}µs{median(runs[(impl, 0)]) * 1e6:>8.1f}µs"
            f"{per_round(runs, impl) * 1e6:>10.2f}{marginal(runs, impl) * 1e6:>19.2f}"
        )
    print(
        "  µs/round: median run time (R=10) / 10; marginal: (median R=10 - median R=0) / 10, "
        "i.e. without the fixed per-run cost"
    )
    print()
    header = (
        f"{'ratio':<22}{'per round':>11}{'round IQR':>15}{'pooled':>9}{'marginal':>10}{'IQR':>15}"
    )
    print(header)
    print("-" * len(header))
    for base in BASELINES:
        ratio = median(samples.ratios[base])
        lo, hi = quartiles(samples.ratios[base])
        mratio = median(samples.marginal_ratios[base])
        mlo, mhi = quartiles(samples.marginal_ratios[base])
        pooled = per_round(runs, "native") / per_round(runs, base)
        print(
            f"{'native / ' + base:<22}{ratio:>10.3f}x{f'{lo:.3f}-{hi:.3f}':>15}{pooled:>8.3f}x"
            f"{mratio:>9.3f}x{f'{mlo:.3f}-{mhi:.3f}':>15}"
        )
    print(
        "  per round: median over rounds of (native median / baseline median) in the round; "
        "pooled: ratio of the overall medians"
    )
    native = per_round(runs, "native")
    hand = per_round(runs, "hand")
    print(
        f"  native's own overhead over the hand-written loop: {(native - hand) * 1e6:.2f} µs per "
        f"round ({(marginal(runs, 'native') - marginal(runs, 'hand')) * 1e6:.2f} µs marginal)"
    )


# --------------------------------------------------------------------------- profile


def profile_native(runs: int, top: int, per_round_native: float) -> None:
    """cProfile native runs; the own time of llamon_agent's modules and functions."""
    prepare, run = make_native_runner(ROUNDS)

    async def drive(models: list[Any]) -> None:
        for model in models:
            await run(model)

    asyncio.run(drive([prepare() for _ in range(runs)]))  # warm
    models = [prepare() for _ in range(runs)]  # scripts built outside the profile
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(drive(models))
    profiler.disable()
    stats = pstats.Stats(profiler)
    rounds = runs * ROUNDS
    total = stats.total_tt  # type: ignore[attr-defined]
    by_module: dict[str, float] = {}
    functions: list[tuple[float, str]] = []
    marker = "llamon_agent" + os.sep
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if marker not in filename:
            continue
        module = filename.split(marker, 1)[1].replace(os.sep, "/")
        by_module[module] = by_module.get(module, 0.0) + tt
        functions.append(
            (
                tt,
                f"    {module}:{line} {func}: {nc / runs:.0f} calls/run, own "
                f"{tt * 1e6 / rounds:.2f} µs/round, cumulative {ct * 1e6 / rounds:.2f} µs/round",
            )
        )
    own = sum(by_module.values())
    fake = by_module.get("loop/scripted.py", 0.0)
    print()
    print(f"profile: {runs} native runs (R = {ROUNDS}), cProfile")
    print(
        f"  own time of llamon_agent code: {own * 1e6 / rounds:.2f} µs/round under cProfile = "
        f"{own / total * 100:.1f}% of the profiled run; without the fake model "
        f"(loop/scripted.py, which the hand-written loop runs too): "
        f"{(own - fake) * 1e6 / rounds:.2f} µs/round "
        f"(unprofiled native: {per_round_native * 1e6:.2f} µs/round; cProfile inflates small "
        "Python functions most)"
    )
    for module, tt in sorted(by_module.items(), key=lambda kv: -kv[1]):
        print(f"    {module}: {tt * 1e6 / rounds:.2f} µs/round")
    print(f"  top {top} llamon_agent functions by own time:")
    for _, text in sorted(functions, reverse=True)[:top]:
        print(text)
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(top)
    print(f"  top {top} functions overall by own time:")
    stdlib = STDLIB + os.sep
    ours = SRC + os.sep
    for text in out.getvalue().splitlines():
        if text.strip() and not text.startswith(("   Ordered by", "   List reduced")):
            print("   " + text.rstrip().replace(stdlib, "").replace(ours, ""))


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run (< 15 s)")
    parser.add_argument("--batch", type=int, default=None, help="runs of each kind per round")
    parser.add_argument("--rounds", type=int, default=None, help="max benchmark rounds")
    parser.add_argument("--seconds", type=float, default=None, help="time budget of the rounds")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile")
    parser.add_argument("--max-seconds", type=float, default=150.0, help="hard stop of the run")
    args = parser.parse_args()

    quick = args.quick
    batch = args.batch or (5 if quick else 20)
    max_rounds = args.rounds or (4 if quick else 400)
    min_rounds = min(max_rounds, 2 if quick else 10)
    budget = args.seconds if args.seconds is not None else (3.0 if quick else 80.0)
    deadline = Deadline(args.max_seconds)

    print(
        f"bench_loop: python {platform.python_version()}, langgraph "
        f"{package_version('langgraph')} (prebuilt {package_version('langgraph-prebuilt')}), "
        f"langchain-core {package_version('langchain-core')}, {os.cpu_count()} cpus, "
        f"{'quick' if quick else 'full'} run"
    )
    started = time.monotonic()
    samples = asyncio.run(measure(batch, max_rounds, min_rounds, budget, deadline))
    print_table(samples, batch)
    if not args.no_profile and not deadline.passed():
        profile_native(20 if quick else 300, 8 if quick else 15, per_round(samples.runs, "native"))
    print(f"\ntotal {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
