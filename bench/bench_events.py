"""Events benchmark: what runner events cost a loop round and an A2A request.

    python bench/bench_events.py            # the real figures (~30 s on 2 cores)
    python bench/bench_events.py --quick    # a short run: does the benchmark still work?
    python bench/bench_events.py --baseline main

Run from the repository root. Nothing leaves the machine.

What is compared (every figure a ratio against a named baseline, all in one run): the
baseline is the package as it was at ``--baseline`` (a git revision, default: the
merge-base of HEAD and ``main``), extracted with ``git archive`` into a temporary folder.
Each side runs in its own worker process (``--worker SRC``), and the parent sends them
the same measurement commands in turns, in a fresh random order each round, so drift and
load from other processes hit every side alike. ``before`` (the baseline) and ``after``
(this tree) run the same two plain variants; ``subs`` (this tree) runs the plain ones
and those with a bus, so each subscribed variant is compared with no bus in the same
process (a process's heap layout alone moves timings by a few percent: ``subs`` against
``after`` on the same code is the A/A line).

Variants (one operation each):

* ``loop``: ``run_loop`` with a scripted model, R = 10 tool rounds of a trivial async tool
  and one answer round (as ``bench_loop.py``'s native variant); reported per round.
  33 events a run: run.started, 11 x model.completed, 10 x step.started, 10 x
  step.completed, run.completed (nothing else: no model adapter, no MCP; the worker
  checks the count).
  ``loop`` has no bus; ``loop-empty`` runs inside ``event_scope(bus)`` of a bus with no
  subscriber; ``loop-noop`` of a bus whose one subscriber is an inline function doing
  nothing (the cost of making the events and handing them over: the floor of any
  subscriber); ``loop-jsonl`` inside ``event_scope(bus)`` of a bus with a JSON-lines
  subscriber writing to a file, the subscriber's work included (``await bus.flush()``
  at the end of each timed batch).
* ``a2a``: one blocking ``message/send`` of a trivial agent through ``create_app``'s ASGI
  app, called in process (no socket: the request's own cost, not the network's).
  ``a2a`` has no bus; ``a2a-bus`` is ``create_app(..., events=bus)`` with no subscriber
  of yours (the SSE route's per-task log is the bus's one subscriber); ``a2a-jsonl``
  adds a JSON-lines subscriber (3 events per request), flushed inside the timed batch.

Targets (issue 14): no subscriber <= 1.03 x the baseline; the JSON-lines subscriber
<= 1.10 x.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROUNDS = 10
EVENTS = {"loop": 33, "a2a": 3}
"""Events one operation emits (checked by the worker's warm-up)."""
QUEUE = 8192
"""The JSON-lines subscriber's queue in ``loop-jsonl``: a scripted run never yields to
the event loop, so a batch's events (150 runs x 33) all wait until its end; with the
default 1024 most would be dropped, not written (and not counted as cost)."""
ROOT = Path(__file__).resolve().parent.parent
PLAIN_VARIANTS = ("loop", "a2a")
SUBSCRIBED_VARIANTS = (
    "loop",
    "loop-empty",
    "loop-noop",
    "loop-jsonl",
    "a2a",
    "a2a-bus",
    "a2a-jsonl",
)


# ------------------------------------------------------------------------- the worker


class Worker:
    """Runs measurement commands in this process, with the package at ``src``."""

    def __init__(self, tmp: str) -> None:
        self.tmp = tmp
        self.runners: dict[str, Any] = {}
        self.buses: dict[str, Any] = {}

    async def setup(self, variants: list[str]) -> None:
        for variant in variants:
            self.runners[variant] = await self._make(variant)
            await self.measure(variant, 50)  # warm-up (and a check that it works)
            bus = self.buses.get(variant)
            if bus is not None and bus.active:  # each subscriber got every event
                kind = variant.split("-")[0]
                for sub in bus.subscriptions:
                    assert sub.delivered == 50 * EVENTS[kind], (variant, sub.delivered)

    async def _make(self, variant: str) -> Any:
        from llamon_agent.loop import ScriptedModel, Tool, ToolRegistry, run_loop, tool_call

        if variant.startswith("loop"):

            async def echo(n: int) -> dict[str, int]:
                """Echo the number back."""
                return {"echo": n}

            view = ToolRegistry([Tool.from_function(echo)]).view()
            script = [tool_call("echo", {"n": i}) for i in range(1, ROUNDS + 1)] + ["done"]
            bus = None
            if variant != "loop":
                from llamon_agent.core.events import EventBus, event_scope

                bus = EventBus()
                if variant == "loop-noop":  # the floor: events built and handed over
                    bus.subscribe_inline(lambda event: None, name="noop")
                if variant == "loop-jsonl":  # a run never yields: room for a whole batch
                    path = os.path.join(self.tmp, f"loop-{os.getpid()}.jsonl")
                    bus.subscribe_jsonl(path, maxsize=QUEUE)
                self.buses[variant] = bus

            async def run() -> None:
                if bus is None:
                    outcome = await run_loop(ScriptedModel(script), view, "go", max_rounds=11)
                else:
                    with event_scope(bus):
                        outcome = await run_loop(ScriptedModel(script), view, "go", max_rounds=11)
                assert outcome.answer == "done"

            return run
        return self._a2a(variant)

    def _a2a(self, variant: str) -> Any:
        from llamon_agent.a2a.card import build_agent_card, skill
        from llamon_agent.a2a.server import create_app

        async def agent(ctx: Any) -> str:
            return "pong"

        card = build_agent_card(
            name="bench-agent",
            description="Answers pong.",
            url="http://127.0.0.1:1/",
            version="1.0.0",
            skills=[skill("pong", "Pong", "Answers pong.", tags=["bench"])],
        )
        options: dict[str, Any] = {"gc_freeze": False}
        bus = None
        if variant != "a2a":
            from llamon_agent.core.events import EventBus

            bus = EventBus()
            if variant == "a2a-jsonl":
                bus.subscribe_jsonl(os.path.join(self.tmp, f"a2a-{os.getpid()}.jsonl"))
            options["events"] = bus
            self.buses[variant] = bus
        app = create_app(agent, card, **options)

        async def run() -> None:
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "message/send",
                    "params": {
                        "message": {
                            "kind": "message",
                            "role": "user",
                            "messageId": uuid.uuid4().hex,
                            "parts": [{"kind": "text", "text": "ping"}],
                        }
                    },
                }
            ).encode()
            answer = await asgi_post(app, body)
            assert b'"completed"' in answer, answer[:300]

        return run

    async def measure(self, variant: str, n: int) -> float:
        """Seconds per operation over ``n`` operations."""
        run = self.runners[variant]
        bus = self.buses.get(variant)
        started = time.perf_counter()
        for _ in range(n):
            await run()
        if bus is not None:  # the subscribers' work is part of the cost
            assert await bus.flush()
        seconds = (time.perf_counter() - started) / n
        if bus is not None:  # every event was written: none dropped for a full queue
            assert bus.dropped == 0, f"{variant}: {bus.dropped} events dropped"
        return seconds


async def asgi_post(app: Any, body: bytes) -> bytes:
    """POST ``body`` to ``/`` of the ASGI ``app`` in process; the response body."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/",
        "raw_path": b"/",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    delivered = False
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}  # pragma: no cover

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return b"".join(chunks)


def worker_main(src: str) -> None:
    sys.path.insert(0, src)
    import llamon_agent

    where = str(Path(llamon_agent.__file__).resolve())
    variants = json.loads(sys.stdin.readline())
    with tempfile.TemporaryDirectory() as tmp:
        worker = Worker(tmp)
        loop = asyncio.new_event_loop()
        loop.run_until_complete(worker.setup(variants))
        print(json.dumps({"ready": where}), flush=True)
        for line in sys.stdin:
            command = json.loads(line)
            seconds = loop.run_until_complete(worker.measure(command["variant"], command["n"]))
            print(json.dumps({"seconds": seconds}), flush=True)
        for task in asyncio.all_tasks(loop):  # the subscribers' queue readers
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))


# ------------------------------------------------------------------------- the parent


class Side:
    def __init__(self, name: str, src: Path, variants: tuple[str, ...]) -> None:
        self.name = name
        self.variants = variants
        self.proc = subprocess.Popen(  # noqa: S603 - our own script
            [sys.executable, __file__, "--worker", str(src)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=str(ROOT),
            env={**os.environ, "PYTHONPATH": str(src)},
        )
        self._send(list(variants))
        ready = self._read()
        self.where = ready["ready"]

    def _send(self, value: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(value) + "\n")
        self.proc.stdin.flush()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"bench_events: worker {self.name} died")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def measure(self, variant: str, n: int) -> float:
        self._send({"variant": variant, "n": n})
        return float(self._read()["seconds"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def baseline_ref(requested: str | None) -> str:
    if requested:
        return requested
    found = subprocess.run(
        ["git", "merge-base", "HEAD", "main"],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return found.stdout.strip() or "main"


def extract(ref: str, into: Path) -> Path:
    archive = subprocess.run(  # noqa: S603 - git, the revision the user named
        ["git", "archive", "--format=tar", ref, "src"],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    tar = ["tar", "-x", "-C", str(into)]
    subprocess.run(tar, input=archive.stdout, check=True)  # noqa: S603
    return into / "src"


def ratio_line(label: str, ratios: list[float], target: float | None) -> str:
    med = statistics.median(ratios)
    if len(ratios) >= 4:
        q1, _, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    else:
        q1, q3 = min(ratios), max(ratios)
    verdict = ""
    if target is not None:
        verdict = "  ok" if med <= target else f"  OVER {target:.2f}"
    return f"  {label:<34} {med:6.3f}  (IQR {q1:.3f}-{q3:.3f}){verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", help="git revision of the baseline (default: merge-base)")
    parser.add_argument("--quick", action="store_true", help="a short run (~15 s)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    if args.worker:
        worker_main(args.worker)
        return
    rounds = args.rounds or (3 if args.quick else 25)
    sizes = {"loop": 20 if args.quick else 150, "a2a": 20 if args.quick else 150}
    ref = baseline_ref(args.baseline)
    rng = random.Random(args.seed)  # noqa: S311 - a fixed seed: the same orders every run
    with tempfile.TemporaryDirectory() as tmp:
        before_src = extract(ref, Path(tmp))
        sides = [
            Side("before", before_src, PLAIN_VARIANTS),
            Side("after", ROOT / "src", PLAIN_VARIANTS),
            Side("subs", ROOT / "src", SUBSCRIBED_VARIANTS),
        ]
        print(f"baseline {ref[:12]} ({sides[0].where}); current: {sides[1].where}")
        results: dict[tuple[str, str], list[float]] = {}
        try:
            for _ in range(rounds):
                jobs = [(side, v) for side in sides for v in side.variants]
                rng.shuffle(jobs)
                for side, variant in jobs:
                    n = sizes[variant.split("-")[0]]
                    seconds = side.measure(variant, n)
                    results.setdefault((side.name, variant), []).append(seconds)
        finally:
            for side in sides:
                side.close()

    def per_op(side: str, variant: str) -> float:
        per = statistics.median(results[(side, variant)])
        return per / ROUNDS if variant.startswith("loop") else per

    print(f"\n{rounds} rounds; medians (loop: µs per round; a2a: µs per request)")
    for (side, variant), _values in sorted(results.items()):
        print(f"  {side:<7} {variant:<11} {per_op(side, variant) * 1e6:9.1f} µs")

    def ratios(side: str, variant: str, base_side: str, base: str) -> list[float]:
        return [
            a / b for a, b in zip(results[(side, variant)], results[(base_side, base)], strict=True)
        ]

    print("\nno subscriber: this tree against the baseline (two processes, same variants)")
    for kind in ("loop", "a2a"):
        print(
            ratio_line(f"after {kind} / before {kind}", ratios("after", kind, "before", kind), 1.03)
        )
    print("\nsubscribers: against no bus in the same process")
    print(ratio_line("loop-empty / loop", ratios("subs", "loop-empty", "subs", "loop"), 1.03))
    print(ratio_line("loop-noop / loop", ratios("subs", "loop-noop", "subs", "loop"), None))
    print(ratio_line("a2a-bus / a2a", ratios("subs", "a2a-bus", "subs", "a2a"), 1.10))
    for kind in ("loop", "a2a"):
        jsonl = ratios("subs", f"{kind}-jsonl", "subs", kind)
        print(ratio_line(f"{kind}-jsonl / {kind}", jsonl, 1.10))
        extra = [
            (a - b) / EVENTS[kind]
            for a, b in zip(
                results[("subs", f"{kind}-jsonl")], results[("subs", kind)], strict=True
            )
        ]
        print(f"  {kind}-jsonl: {statistics.median(extra) * 1e6:.1f} µs per event, all included")
    print("\nA/A: the same tree in two processes (the noise of comparing processes)")
    for kind in ("loop", "a2a"):
        print(ratio_line(f"subs {kind} / after {kind}", ratios("subs", kind, "after", kind), None))


if __name__ == "__main__":
    main()
