"""Failure queries over 100,000 records on SQLite: the failure store against the same table
without its indexes.

    python bench/bench_failures.py [--rows 100000] [--repeat 100] [--quick] [--json FILE]

What is measured (``bench/README.md``, "Failure queries", says how to read it): two SQLite
files are filled with the same ``--rows`` failures (30 days, 24 reasons, 8 errorCodes, 10
tools, 5 agents, 20 flow nodes, as ``StoredFailure`` rows written through the store's own
insert); ``indexed`` is the file as ``open_stores("sqlite")`` creates it, ``no-index`` the
same file with the failure indexes dropped (the named baseline: what the table alone
gives). Each query below runs through ``SQLiteFailureStore.query`` / ``group_by`` (the
reader thread, as ``llamon failures`` and a served agent use it; the last row is ``prune``
with nothing to drop, what the writer thread pays every 500 failures), ``--repeat`` times per
variant, the two variants taking turns call by call so noise hits both alike. Printed per
query: p50 and p99 in ms for each variant and the ratio no-index / indexed. Target: every
query's p99 <= 50 ms on ``indexed``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from llamon_agent.a2a.stores import FailureRetention, Stores, open_stores
from llamon_agent.a2a.stores.failures import FailureQuery, StoredFailure
from llamon_agent.a2a.stores.failures_sql import _INSERT, SQLiteFailureStore, _params
from llamon_agent.core.codes import ErrorCode

TARGET_P99_MS = 50.0
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
REASONS = [f"reason_{i:02d}" for i in range(24)]
CODES = [code.value for code in ErrorCode]
STAGES = ["execute", "tool_call", "model_call", "flow_node", "a2a_call", "service"]
TOOLS = [f"tool_{i}" for i in range(10)]
AGENTS = [f"agent_{i}" for i in range(5)]
NODES = [f"node_{i:02d}" for i in range(20)]
KEEP = FailureRetention(max_age=None, max_rows=None)


def rows(count: int, seed: int = 14) -> list[StoredFailure]:
    """``count`` failures spread over the 30 days before ``NOW`` (a fixed seed)."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    made = []
    for index in range(count):
        reason = REASONS[min(int(rng.expovariate(0.25)), len(REASONS) - 1)]  # a few dominate
        made.append(
            StoredFailure(
                task_id=f"task-{index:07d}",
                time=NOW - timedelta(seconds=rng.uniform(0, 30 * 86400)),
                error_code=CODES[hash(reason) % len(CODES)],
                stage=rng.choice(STAGES),
                reason=reason,
                message="The tool did not answer in time.",
                operator_action="check_timeout_paging_and_downstream_latency",
                retryable=True,
                context_id=f"ctx-{index:07d}",
                agent=rng.choice(AGENTS),
                tool=rng.choice(TOOLS) if rng.random() < 0.6 else None,
                node=rng.choice(NODES) if rng.random() < 0.3 else None,
                incident_id=f"{index:012x}",
                evidence={"exception_type": "TimeoutError", "retried": 2},
            )
        )
    return made


async def filled(home: Path, failures: list[StoredFailure], *, indexed: bool) -> Stores:
    """A store under ``home`` holding ``failures`` (without the failure indexes unless
    ``indexed``)."""
    stores = await open_stores("sqlite", home=home, failure_retention=KEEP)
    assert stores.database is not None
    params = [_params(failure) for failure in failures]

    def load(connection: Any) -> None:
        connection.executemany(_INSERT, params)
        if not indexed:
            names = connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index'"
                " AND tbl_name = 'llamon_failures' AND name LIKE 'llamon_failures_%'"
            ).fetchall()
            for (name,) in names:
                connection.execute(f"DROP INDEX {name}")

    await stores.database.write_returning(load)
    assert stores.failures is not None
    await stores.failures.prune()  # as every 500 writes: the planner's statistics
    return stores


@dataclass
class Case:
    name: str
    run: Callable[[SQLiteFailureStore], Awaitable[object]]


def cases() -> list[Case]:
    hour, day, week = (NOW - timedelta(hours=1), NOW - timedelta(days=1), NOW - timedelta(days=7))

    def q(**fields: Any) -> FailureQuery:
        return FailureQuery(until=NOW + timedelta(seconds=1), **fields)

    async def second_page(store: SQLiteFailureStore) -> object:
        first = await store.query(q(reason="reason_01", limit=50))
        assert first.next_cursor is not None
        return await store.query(q(reason="reason_01", limit=50, cursor=first.next_cursor))

    return [
        Case("newest 50", lambda s: s.query(q(limit=50))),
        Case("code=UPSTREAM_TIMEOUT, 50", lambda s: s.query(q(code="UPSTREAM_TIMEOUT", limit=50))),
        Case("reason, since 1h", lambda s: s.query(q(reason="reason_00", since=hour))),
        Case("tool, since 24h", lambda s: s.query(q(tool="tool_3", since=day))),
        Case(
            "agent+stage, since 7d, 50",
            lambda s: s.query(q(agent="agent_2", stage="tool_call", since=week, limit=50)),
        ),
        Case("node, 50", lambda s: s.query(q(node="node_07", limit=50))),
        Case("reason, page 2", second_page),
        Case("task id", lambda s: s.query(q(task_id="task-0050000"))),
        Case("group by reason, all", lambda s: s.group_by("reason", q())),
        Case("group by reason, 24h", lambda s: s.group_by("reason", q(since=day))),
        Case("group by code, 7d", lambda s: s.group_by("error_code", q(since=week))),
        Case("group by tool, code", lambda s: s.group_by("tool", q(code="UPSTREAM_TIMEOUT"))),
        Case("prune, nothing to drop", lambda s: s.prune()),  # the writer's periodic cost
    ]


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def measure(count: int, repeat: int) -> dict[str, Any]:
    failures = rows(count)
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        started = time.perf_counter()
        indexed = await filled(Path(a), failures, indexed=True)
        plain = await filled(Path(b), failures, indexed=False)
        fill_s = time.perf_counter() - started
        try:
            stores = {"indexed": indexed.failures, "no-index": plain.failures}
            for store in stores.values():  # the retention a store of this size would have
                assert store is not None
                store.retention = FailureRetention(max_age=60 * 86400.0, max_rows=count)
            results: dict[str, Any] = {}
            for case in cases():
                timings: dict[str, list[float]] = {name: [] for name in stores}
                for store in stores.values():  # warm-up, both
                    assert isinstance(store, SQLiteFailureStore)
                    await case.run(store)
                for turn in range(repeat):
                    order = list(stores.items()) if turn % 2 == 0 else list(stores.items())[::-1]
                    for name, store in order:
                        assert isinstance(store, SQLiteFailureStore)
                        begin = time.perf_counter()
                        await case.run(store)
                        timings[name].append((time.perf_counter() - begin) * 1000)
                results[case.name] = {
                    name: {
                        "p50": statistics.median(samples),
                        "p99": percentile(samples, 0.99),
                    }
                    for name, samples in timings.items()
                }
        finally:
            await indexed.close()
            await plain.close()
    return {"rows": count, "repeat": repeat, "fill_seconds": fill_s, "queries": results}


def report(result: dict[str, Any]) -> bool:
    print(
        f"failure queries over {result['rows']:,} rows on SQLite, {result['repeat']} runs"
        f" each (python {platform.python_version()}, SQLite {sqlite3.sqlite_version},"
        f" fill {result['fill_seconds']:.1f} s)"
    )
    header = f"{'query':<28} {'indexed p50':>11} {'p99':>7} {'no-index p50':>12} {'p99':>8} {'p99 ratio':>9}"  # noqa: E501
    print(header)
    worst = 0.0
    for name, variants in result["queries"].items():
        fast, slow = variants["indexed"], variants["no-index"]
        worst = max(worst, fast["p99"])
        print(
            f"{name:<28} {fast['p50']:>11.2f} {fast['p99']:>7.2f} {slow['p50']:>12.2f}"
            f" {slow['p99']:>8.2f} {slow['p99'] / fast['p99']:>8.1f}x"
        )
    verdict = worst <= TARGET_P99_MS
    print(f"worst indexed p99: {worst:.2f} ms (target <= {TARGET_P99_MS:.0f} ms): "
          f"{'met' if verdict else 'NOT met'}")  # fmt: skip
    return verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="10,000 rows, 20 runs")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    count, repeat = (10_000, 20) if args.quick else (args.rows, args.repeat)
    result = asyncio.run(measure(count, repeat))
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
