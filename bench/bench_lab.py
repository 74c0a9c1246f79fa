"""Quality Lab benchmark: what the lab adds to a case over running the agent without it.

    python bench/bench_lab.py              # the real figures (~50 s on 2 cores)
    python bench/bench_lab.py --quick      # a short run: does the benchmark still work? (~3 s)
    python bench/bench_lab.py --profile    # and a cProfile of the lab arm (top 15 by cumtime)
    python bench/bench_lab.py --diagnose   # and the a2a+plan arm (see below)

Run from the repository root with the package importable, e.g.
``PYTHONPATH=src python bench/bench_lab.py``. Nothing leaves the process: no socket.

Target (issue 15): the lab's overhead per case over running the agent directly, in
process, <= 10%: ``lab`` / ``direct-a2a`` <= 1.10.

Two agents:

* ``loop``: a ``LoopAgent`` over a deterministic model (``CatalogueModel``, stateless: it
  reads the transcript) and three local async tools doing small real work over an
  in-memory catalogue: ``search_books`` (a word match over 200 books, the best three),
  ``shipping_quote`` (a price table lookup) and ``check_stock`` (offered, not called).
  One tool round (``search_books`` and ``shipping_quote`` called together) and the answer
  round, which reads both results.
* ``hello``: the demo agent (``llamon_agent.examples.demo_agent``) answering ``hello``.

Three arms per agent, the same message text each time (a fresh ``messageId``):

* ``direct-a2a``: the agent served by the same in-memory app the lab uses
  (``create_app(agent, card, events=EventBus(), gc_freeze=False)``, its lifespan entered,
  ``httpx.ASGITransport``) and one blocking ``message/send`` through a2a-sdk's
  ``JsonRpcTransport``: what a case costs without the lab.
* ``lab``: ``Lab(agent, card=card)`` entered once, then ``run_case(case)`` per case, the
  case asserting ``final_state``, ``artifact_contains`` and, for ``loop``,
  ``selected_target`` and ``max_rounds`` (each result must pass).
* ``direct-call``: ``stub_executor_run(agent=agent, text=...)``: llamon's executor around
  ``agent.invoke(ctx)`` with an a2a-sdk event queue, no HTTP, no JSON-RPC, no task store
  (context: the floor under both; the helper builds its executor per call, ~17 µs).
* ``a2a+plan`` (``--diagnose``): the lab's app and request without the lab's client side:
  ``create_app(..., allow_fault_injection=True)`` with an inline bus subscriber keeping each
  task's events, and the ``no_cleanup`` guard plan in the request's metadata (what the lab
  sends with an ``execute`` case without ``cleanup``). ``lab / a2a+plan`` is the lab's
  client side; ``a2a+plan / direct-a2a`` what its server configuration costs.

Each benchmark round runs ``--batch`` iterations; an iteration runs every (agent, arm)
pair once, in a fresh random order (seeded), so drift and load from other processes hit
every arm alike and no arm always follows the same neighbour. Reported per (agent, arm):
the median µs per case over every case run; per agent, the ratios ``lab / direct-a2a``
and ``lab / direct-call``: the median over rounds of the ratio of the round's medians
(interquartile range as the noise band), and the ratio of the pooled medians. Every
answer is checked once before timing (the text, the state, the lab's assertions), so the
benchmark breaks if the semantics change.

``--profile``: a cProfile of ``--profile-cases`` lab cases of the ``loop`` agent (after
the timing): the top 15 functions by cumulative time, then the cumulative time per case
of the lab's own steps (``llamon_agent/lab/``), which is where the lab's own time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import logging
import os
import platform
import pstats
import random
import re
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from typing import Any

try:
    import httpx
    from a2a.client.transports.jsonrpc import JsonRpcTransport
    from a2a.types import (
        AgentCard,
        Message,
        MessageSendConfiguration,
        MessageSendParams,
        Part,
        Role,
        Task,
        TaskArtifactUpdateEvent,
        TaskState,
        TaskStatusUpdateEvent,
        TextPart,
    )

    from llamon_agent.a2a.serve import default_card
    from llamon_agent.a2a.server import create_app
    from llamon_agent.core.events import EventBus, RunnerEvent
    from llamon_agent.core.faults import FAULTS_METADATA_KEY, FaultPlan
    from llamon_agent.examples import demo_agent
    from llamon_agent.lab import Case
    from llamon_agent.lab.runner import IN_PROCESS_URL, Lab
    from llamon_agent.loop import (
        ChatMessage,
        LoopAgent,
        ModelResponse,
        RawToolCall,
        Tool,
        ToolRegistry,
        ToolSpec,
    )
    from llamon_agent.testing import stub_executor_run
except ImportError as exc:  # pragma: no cover - a usage hint, not a code path
    sys.exit(f"bench_lab: {exc}; run with the package importable (PYTHONPATH=src)")

AGENTS = ("loop", "hello")
ARMS = ("direct-a2a", "lab", "direct-call")
DIAGNOSTIC_ARM = "a2a+plan"
TARGET = 1.10  # lab / direct-a2a, issue 15
STDLIB = os.path.dirname(os.path.dirname(json.__file__))
SERVER_FILE = os.path.abspath(create_app.__code__.co_filename)  # src/llamon_agent/a2a/server.py
SRC = os.path.dirname(os.path.dirname(os.path.dirname(SERVER_FILE)))


def machine_busy() -> float | None:
    """Busy CPU seconds of the whole machine so far (Linux ``/proc/stat``), else None."""
    try:
        with open("/proc/stat") as handle:
            fields = [int(x) for x in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def others_share(busy0: float | None, own0: float, wall: float) -> str:
    """The share of the machine's CPU other processes used since ``busy0``/``own0``."""
    busy1 = machine_busy()
    if busy0 is None or busy1 is None or wall <= 0:
        return "unknown"
    used = max(0.0, (busy1 - busy0) - (time.process_time() - own0))
    return f"{used / (wall * (os.cpu_count() or 1)) * 100:.0f}%"


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 4:
        return min(values), max(values)
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


# --------------------------------------------------------------------------- the loop agent

_GENRES = ("science fiction", "history", "poetry", "cooking", "travel")
_WORDS = (
    "dune", "river", "garden", "empire", "winter", "silver", "ocean", "machine",
    "harvest", "atlas", "lantern", "orchard", "canyon", "signal", "harbor", "meadow",
)  # fmt: skip
CATALOGUE: list[dict[str, Any]] = [
    {
        "isbn": f"978-0-{1000 + i:04d}-{i % 97:02d}",
        "title": f"The {_WORDS[i % 16].title()} of {_WORDS[(i * 7 + 3) % 16].title()}",
        "author": f"Author {i % 37}",
        "genre": _GENRES[i % 5],
        "price_cents": 899 + (i * 131) % 2100,
        "stock": (i * 17) % 9,
    }
    for i in range(200)
]
_BY_ISBN = {book["isbn"]: book for book in CATALOGUE}
_SHIPPING_CENTS = {"DE": 395, "FR": 450, "NL": 420, "US": 1290, "GB": 690}
_STOP_WORDS = frozenset({"the", "of", "and", "me", "to", "what", "find", "a", "an", "for"})
QUERY = "Find me The Dune of Empire, and what shipping to DE costs"


async def search_books(query: str, limit: int = 3) -> dict[str, Any]:
    """Search the catalogue by words of the title, author or genre; the best matches."""
    words = set(re.findall(r"[a-z]+", query.lower())) - _STOP_WORDS
    scored = []
    for book in CATALOGUE:
        text = set(re.findall(r"[a-z]+", f"{book['title']} {book['genre']}".lower()))
        score = len(words & text)
        if score:
            scored.append((-score, book["isbn"], book))
    scored.sort(key=lambda item: (item[0], item[1]))
    matches = [
        {key: book[key] for key in ("isbn", "title", "author", "price_cents")}
        for _, _, book in scored[:limit]
    ]
    return {"matches": matches, "total": len(scored)}


async def shipping_quote(country: str, items: int = 1) -> dict[str, Any]:
    """What shipping ``items`` books to ``country`` (ISO code) costs, in cents."""
    base = _SHIPPING_CENTS.get(country.upper())
    if base is None:
        return {"country": country, "available": False}
    return {"country": country.upper(), "available": True, "cents": base + 120 * (items - 1)}


async def check_stock(isbn: str) -> dict[str, Any]:
    """How many copies of a book are in stock."""
    book = _BY_ISBN.get(isbn)
    return {"isbn": isbn, "in_stock": book["stock"] if book else 0}


class CatalogueModel:
    """A deterministic, stateless model: a user turn gets one round of two tool calls
    (``search_books`` with the user's text, ``shipping_quote`` to DE); a turn after tool
    results gets the answer built from them."""

    name = "bench-catalogue"

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        last = messages[-1]
        if last.role == "user":
            return ModelResponse(
                tool_calls=(
                    RawToolCall("call_1", "search_books", json.dumps({"query": last.content})),
                    RawToolCall("call_2", "shipping_quote", json.dumps({"country": "DE"})),
                )
            )
        results = {m.name: json.loads(m.content) for m in messages if m.role == "tool"}
        best = results["search_books"]["matches"][0]
        shipping = results["shipping_quote"]["cents"]
        total = best["price_cents"] + shipping
        return ModelResponse(
            content=(
                f"{best['title']} by {best['author']}: {best['price_cents'] / 100:.2f} EUR, "
                f"shipping to DE {shipping / 100:.2f} EUR, total {total / 100:.2f} EUR."
            )
        )


def loop_agent() -> LoopAgent:
    registry = ToolRegistry(
        [Tool.from_function(fn) for fn in (search_books, shipping_quote, check_stock)]
    )
    return LoopAgent(CatalogueModel(), registry, name="bookshop-bench")


# --------------------------------------------------------------------------- the arms


@dataclass
class Subject:
    """One agent and what each arm needs to run one case of it."""

    name: str
    agent: object
    card: AgentCard
    text: str
    expected: str  # a text the answer must contain
    case: Case
    run: dict[str, Callable[[], Awaitable[Any]]] = field(default_factory=dict)
    collector: Collector | None = None


def subjects() -> list[Subject]:
    loop = loop_agent()
    loop_expected = "The Dune of Empire by Author 0: 8.99 EUR, shipping to DE 3.95 EUR"
    loop_case = Case.model_validate(
        {
            "name": "bookshop-search",
            "mode": "execute",
            "query": QUERY,
            "expected_target": "search_books",
            "assertions": {
                "final_state": "completed",
                "selected_target": "search_books",
                "artifact_contains": [loop_expected, "total 12.94 EUR"],
                "max_rounds": 2,
            },
        }
    )
    hello_case = Case.model_validate(
        {
            "name": "hello",
            "mode": "execute",
            "query": "hello",
            "assertions": {"final_state": "completed", "artifact_contains": "Hello!"},
        }
    )
    return [
        Subject(
            "loop",
            loop,
            default_card(loop, IN_PROCESS_URL + "/"),
            QUERY,
            loop_expected,
            loop_case,
        ),
        Subject(
            "hello",
            demo_agent.agent,
            demo_agent.card,
            "hello",
            "Hello! You said: hello",
            hello_case,
        ),
    ]


def send_params(text: str, metadata: dict[str, Any] | None = None) -> MessageSendParams:
    message = Message(
        role=Role.user,
        parts=[Part(root=TextPart(text=text))],
        message_id=uuid.uuid4().hex,
        kind="message",
    )
    return MessageSendParams(
        message=message,
        configuration=MessageSendConfiguration(blocking=True),
        metadata=metadata,
    )


def task_text(task: Task) -> str:
    texts = [
        part.root.text
        for artifact in task.artifacts or ()
        for part in artifact.parts
        if isinstance(part.root, TextPart)
    ]
    return "\n".join(texts)


class Collector:
    """An inline bus subscriber keeping each task's runner events (as the lab's does)."""

    def __init__(self) -> None:
        self.by_task: dict[str, list[RunnerEvent]] = {}
        self.late = 0  # tasks whose end event came after the answer

    def __call__(self, event: RunnerEvent) -> None:
        if event.task_id is not None:
            self.by_task.setdefault(event.task_id, []).append(event)

    def take(self, task_id: str) -> list[RunnerEvent]:
        events = self.by_task.pop(task_id, [])
        if not events or not events[-1].type.startswith("task."):
            self.late += 1
        return events


def _not_exposed(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("fault injection is allowed")


async def open_direct(
    stack: AsyncExitStack, subject: Subject, *, collector: Collector | None = None
) -> JsonRpcTransport:
    """The lab's in-memory app, without the lab: ``create_app`` + lifespan + ASGI transport.
    With ``collector``: as the lab configures it (fault injection allowed, ``collector``
    subscribed to the bus)."""
    bus = EventBus()
    if collector is not None:
        bus.subscribe_inline(collector, name="collector")
    app = create_app(
        subject.agent,
        subject.card,
        events=bus,
        gc_freeze=False,
        allow_fault_injection=collector is not None,
    )
    lifespan = app.router.lifespan_context(app)
    server_log = logging.getLogger("llamon_agent.a2a")
    server_log.addFilter(_not_exposed)  # the startup warning of fault injection, as the lab
    try:
        await lifespan.__aenter__()
    finally:
        server_log.removeFilter(_not_exposed)
    stack.push_async_exit(lifespan.__aexit__)
    http = await stack.enter_async_context(
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=IN_PROCESS_URL, timeout=120.0
        )
    )
    return JsonRpcTransport(http, subject.card, url=IN_PROCESS_URL)


async def prepare(stack: AsyncExitStack, subject: Subject, diagnose: bool) -> None:
    transport = await open_direct(stack, subject)
    lab = await stack.enter_async_context(Lab(subject.agent, card=subject.card))
    agent, text, case = subject.agent, subject.text, subject.case
    if diagnose:
        collector = subject.collector = Collector()
        planned = await open_direct(stack, subject, collector=collector)
        # what the lab sends with an execute case without cleanup: the no_cleanup guard
        metadata = {FAULTS_METADATA_KEY: FaultPlan(guard="no_cleanup").to_metadata()}

        async def a2a_plan() -> Any:
            answer = await planned.send_message(send_params(text, metadata))
            assert isinstance(answer, Task), answer
            return answer, collector.take(answer.id)

        subject.run["a2a+plan"] = a2a_plan

    async def direct_a2a() -> Any:
        return await transport.send_message(send_params(text))

    async def run_lab() -> Any:
        return await lab.run_case(case)

    async def direct_call() -> Any:
        return await stub_executor_run(agent=agent, text=text)

    subject.run.update({"direct-a2a": direct_a2a, "lab": run_lab, "direct-call": direct_call})


async def check(subject: Subject) -> None:
    """Each arm's answer, once: the benchmark breaks if what is measured changes."""
    answer = await subject.run["direct-a2a"]()
    assert isinstance(answer, Task), answer
    assert answer.status.state is TaskState.completed, answer.status
    assert subject.expected in task_text(answer), task_text(answer)

    result = await subject.run["lab"]()
    assert result.outcome == "passed", (result.outcome, result.failed_assertions, result.message)
    assert result.event_source == "events", result.event_source
    expected_names = {"uncaught_server_error", "final_state", "artifact_contains"}
    if subject.name == "loop":
        expected_names |= {"selected_target", "max_rounds"}
        assert result.selected_target == "search_books", result.selected_target
        assert [(s.tool, s.ok) for s in result.steps] == [
            ("search_books", True),
            ("shipping_quote", True),
        ], result.steps
        assert result.rounds == 2, result.rounds
    assert {item.name for item in result.assertions} == expected_names, result.assertions

    events = await subject.run["direct-call"]()
    final = events[-1]
    assert isinstance(final, TaskStatusUpdateEvent), final
    assert final.status.state is TaskState.completed, final.status
    texts = [
        part.root.text
        for event in events
        if isinstance(event, TaskArtifactUpdateEvent)
        for part in event.artifact.parts
        if isinstance(part.root, TextPart)
    ]
    assert any(subject.expected in text for text in texts), texts

    if DIAGNOSTIC_ARM in subject.run:
        answer, events = await subject.run[DIAGNOSTIC_ARM]()
        assert answer.status.state is TaskState.completed, answer.status
        assert subject.expected in task_text(answer), task_text(answer)
        lab_types = [event["type"] for event in result.events]
        assert lab_types == [event.type for event in events], (lab_types, events)


# --------------------------------------------------------------------------- timing

Key = tuple[str, str]  # (agent, arm)


@dataclass
class Samples:
    runs: dict[Key, list[float]] = field(default_factory=dict)  # seconds per case
    ratios: dict[Key, list[float]] = field(default_factory=dict)  # (agent, baseline) per round
    rounds: int = 0


async def time_round(
    pairs: dict[Key, Callable[[], Awaitable[Any]]], batch: int, rng: random.Random
) -> dict[Key, list[float]]:
    keys = list(pairs)
    times: dict[Key, list[float]] = {key: [] for key in keys}
    gc.collect()
    for _ in range(batch):
        for key in rng.sample(keys, len(keys)):
            run = pairs[key]
            start = time.perf_counter()
            await run()
            times[key].append(time.perf_counter() - start)
    return times


async def measure(
    batch: int,
    min_rounds: int,
    max_rounds: int,
    budget: float,
    profile_cases: int,
    arms: Sequence[str],
) -> tuple[Samples, list[Subject], pstats.Stats | None]:
    async with AsyncExitStack() as stack:
        found = subjects()
        for subject in found:
            await prepare(stack, subject, DIAGNOSTIC_ARM in arms)
            await check(subject)
        pairs = {(s.name, arm): s.run[arm] for s in found for arm in arms}
        rng = random.Random(20261201)  # noqa: S311 - a fixed seed: the same orders every run
        await time_round(pairs, max(3, batch // 2), rng)  # warm-up
        samples = Samples(runs={key: [] for key in pairs})
        bases = [arm for arm in arms if arm != "lab"]
        samples.ratios = {(s.name, base): [] for s in found for base in bases}
        stop = time.monotonic() + budget
        while samples.rounds < max_rounds:
            if samples.rounds >= min_rounds and time.monotonic() >= stop:
                break
            times = await time_round(pairs, batch, rng)
            for key, values in times.items():
                samples.runs[key].extend(values)
            for s in found:
                lab = median(times[(s.name, "lab")])
                for base in bases:
                    samples.ratios[(s.name, base)].append(lab / median(times[(s.name, base)]))
            samples.rounds += 1
        stats = await profile_lab(found[0], profile_cases) if profile_cases else None
    return samples, found, stats


def print_table(samples: Samples, batch: int, arms: Sequence[str]) -> None:
    runs = samples.runs
    print()
    print(
        f"µs per case, median ({samples.rounds} rounds x {batch} interleaved cases of each "
        "agent and arm)"
    )
    header = f"{'agent':<8}{'arm':<14}{'cases':>7}{'p50 µs':>10}{'p90 µs':>10}"
    print(header)
    print("-" * len(header))
    for agent in AGENTS:
        for arm in arms:
            values = runs[(agent, arm)]
            p90 = statistics.quantiles(values, n=10)[-1]
            print(
                f"{agent:<8}{arm:<14}{len(values):>7}{median(values) * 1e6:>10.0f}"
                f"{p90 * 1e6:>10.0f}"
            )
    print()
    header = f"{'agent':<8}{'ratio':<24}{'per round':>10}{'IQR':>15}{'pooled':>9}{'lab - base':>12}"
    print(header)
    print("-" * len(header))
    for agent in AGENTS:
        lab = median(runs[(agent, "lab")])
        for base in [arm for arm in arms if arm != "lab"]:
            ratios = samples.ratios[(agent, base)]
            lo, hi = quartiles(ratios)
            base_p50 = median(runs[(agent, base)])
            verdict = ""
            if base == "direct-a2a":
                verdict = "  met" if median(ratios) <= TARGET else "  NOT met"
                verdict += f" (target <= {TARGET:.2f})"
            print(
                f"{agent:<8}{'lab / ' + base:<24}{median(ratios):>9.3f}x"
                f"{f'{lo:.3f}-{hi:.3f}':>15}{lab / base_p50:>8.3f}x"
                f"{(lab - base_p50) * 1e6:>9.0f} µs{verdict}"
            )
    print(
        "  per round: median over rounds of (lab median / baseline median) in the round; "
        "pooled: ratio of the overall medians; lab - base: difference of the overall medians"
    )


# --------------------------------------------------------------------------- profile


async def profile_lab(subject: Subject, cases: int) -> pstats.Stats:
    run = subject.run["lab"]
    for _ in range(max(10, cases // 10)):  # warm
        await run()
    gc.collect()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(cases):
        await run()
    profiler.disable()
    return pstats.Stats(profiler)


def print_profile(stats: pstats.Stats, subject: str, cases: int, top: int) -> None:
    stdlib = STDLIB + os.sep
    ours = SRC + os.sep
    site = os.sep + "site-packages" + os.sep
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("cumulative").print_stats(top)
    print()
    print(f"profile: {cases} lab cases of the {subject!r} agent, cProfile, top {top} by cumtime")
    for text in out.getvalue().splitlines():
        if not text.strip() or text.startswith(("   Ordered by", "   List reduced")):
            continue
        text = text.rstrip().replace(stdlib, "").replace(ours, "")
        if site in text:
            text = text.split(site, 1)[0].rsplit(" ", 1)[0] + " " + text.split(site, 1)[1]
        print("   " + text)
    total = stats.total_tt  # type: ignore[attr-defined]
    marker = os.sep + "llamon_agent" + os.sep + "lab" + os.sep
    own: list[tuple[float, str]] = []
    lab_tt = 0.0
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if marker not in filename:
            continue
        lab_tt += tt
        module = "lab/" + filename.split(marker, 1)[1]
        own.append(
            (
                ct,
                f"    {module}:{line} {func}: {nc / cases:.1f} calls/case, cumulative "
                f"{ct * 1e6 / cases:.1f} µs/case, own {tt * 1e6 / cases:.1f} µs/case",
            )
        )
    print(
        f"  llamon_agent/lab/ code: own time {lab_tt * 1e6 / cases:.1f} µs/case of "
        f"{total * 1e6 / cases:.0f} µs/case profiled ({lab_tt / total * 100:.1f}%); "
        "its functions by cumulative time (what each lab step costs, callees included; "
        "a coroutine's calls count its resumes, and _send's time includes the in-memory "
        "server, which runs in the same task):"
    )
    for _, text in sorted(own, reverse=True)[:top]:
        print(text)


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run (< 15 s)")
    parser.add_argument("--batch", type=int, default=None, help="cases of each kind per round")
    parser.add_argument("--rounds", type=int, default=None, help="max benchmark rounds")
    parser.add_argument("--seconds", type=float, default=None, help="time budget of the rounds")
    parser.add_argument("--profile", action="store_true", help="cProfile the lab arm once")
    parser.add_argument("--profile-cases", type=int, default=None, help="cases profiled")
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help=f"add the {DIAGNOSTIC_ARM} arm: the lab's app and request, not its client side",
    )
    args = parser.parse_args()
    arms = (*ARMS, DIAGNOSTIC_ARM) if args.diagnose else ARMS

    quick = args.quick
    batch = args.batch or (20 if quick else 50)
    max_rounds = args.rounds or (4 if quick else 1000)
    min_rounds = min(max_rounds, 2 if quick else 10)
    budget = args.seconds if args.seconds is not None else (4.0 if quick else 45.0)
    profile_cases = 0
    if args.profile:
        profile_cases = args.profile_cases or (200 if quick else 1000)

    print(
        f"bench_lab: python {platform.python_version()}, a2a-sdk {package_version('a2a-sdk')}, "
        f"httpx {package_version('httpx')}, {os.cpu_count()} cpus, "
        f"{'quick' if quick else 'full'} run"
    )
    started = time.monotonic()
    busy0, own0 = machine_busy(), time.process_time()
    samples, found, stats = asyncio.run(
        measure(batch, min_rounds, max_rounds, budget, profile_cases, arms)
    )
    wall = time.monotonic() - started
    print_table(samples, batch, arms)
    print(f"  other processes used {others_share(busy0, own0, wall)} of the machine's CPU")
    for subject in found:
        if subject.collector is not None:
            print(
                f"  {subject.name} {DIAGNOSTIC_ARM}: {subject.collector.late} answers came before "
                "their task's end event"
            )
    if stats is not None:
        print_profile(stats, found[0].name, profile_cases, 15)
    print(f"\ntotal {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
