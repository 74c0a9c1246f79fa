"""Task stores, failure promptness and memory: llamon's A2A server against raw a2a-sdk.

    python bench/bench_stores.py throughput [--quick] [--method send stream] [--postgres DSN]
    python bench/bench_stores.py failure    [--quick] [--json FILE]
    python bench/bench_stores.py rss        [--quick] [--rss-minutes M] [--rss-baseline]
    python bench/bench_stores.py all        [--quick] [--json FILE]

What is measured (``bench/README.md``, "Stores and failure promptness", says how to read it):

1. ``throughput``: ``message/send`` to a trivial agent at c = 1, 16, 64, over each task
   store: ``raw-memory`` and ``raw-sqlite`` (a2a-sdk's ``InMemoryTaskStore`` and its
   ``DatabaseTaskStore`` on aiosqlite as shipped: the baseline), ``llamon-memory`` and
   ``llamon-sqlite`` (``create_app`` over ``open_stores("memory" | "sqlite")``),
   ``llamon-serve`` (the same agent through ``serve_agent``, as ``llamon serve`` runs it:
   SQLite, reconciliation, ``gc.freeze``), and with ``--postgres DSN`` ``llamon-postgres``
   (llamon's own store on asyncpg) against ``sdk-postgres`` (the same server over a2a-sdk's
   ``DatabaseTaskStore`` on SQLAlchemy + asyncpg, the same database), interleaved like the
   others. Targets, for llamon-sqlite and llamon-serve: >= 5 x raw-sqlite throughput at
   c=16 and c=64; p99 <= 100 ms at c=16. For llamon-postgres: >= 4 x sdk-postgres at c=16
   and c=64; p99 <= 150 ms at c=16. ``--method stream`` (or ``send stream``) adds
   ``message/stream`` to an agent streaming three chunks (variants labelled ``V/stream``;
   raw a2a-sdk streams its one artifact). For the embedded store against memory
   (``llamon-sqlite / llamon-memory``, send and stream): >= 0.9 at every concurrency.
2. ``failure``: at c=1, the latency of an agent that waits 10 ms (its I/O) and answers,
   against the same agent raising after the wait; raw a2a-sdk and llamon, ``message/send``
   and ``message/stream``. The figure is ``raise p50 - ok p50``: how much later a failure
   reaches the caller than a success. Target: llamon <= 5 ms (raw a2a-sdk notices an
   executor's exception only at its event consumer's next 0.5 s poll).
3. ``rss``: the ``llamon-memory`` server's resident memory (``VmRSS``) under c=16 load for
   M minutes after a warm-up, sampled every 5 s. Target: the highest sample after the
   warm-up <= 1.10 x the sample at the end of the warm-up.

How: every server is its own process (``bench/a2a_servers.py``); this script only drives
them with ``bench/loadgen.py`` (imported; raw asyncio HTTP/1.1, one keep-alive connection
per concurrent worker) and reads ``/proc``. Throughput: for each concurrency fresh servers
(and fresh database files) are started, each gets a discarded warm-up, then the variants
take turns in time-bounded slices (A B C D, then D C B A, ...) so noise from other
processes hits all alike. Every answer is checked (``"state":"completed"``, ``"failed"``,
the JSON-RPC error, or a broken-off stream, as each variant should answer); a mismatch or
a failed request is an error. The exit status is 1 if any error occurred (the verdicts on
the targets are printed, they do not set the exit status).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_a2a_server as base  # bench/ is on sys.path when this file runs as a script
import loadgen

COMPLETED = '"state":"completed"'
FAILED = '"state":"failed"'
RPC_INTERNAL_ERROR = '"code":-32603'  # what raw a2a-sdk answers when its executor raises
STREAM_CUT = loadgen.STREAM_CUT.decode()

STORE_VARIANTS = ("raw-memory", "raw-sqlite", "llamon-memory", "llamon-sqlite", "llamon-serve")
SQLITE_TARGETED = ("llamon-sqlite", "llamon-serve")  # the targets apply to both
POSTGRES_VARIANT = "llamon-postgres"
SDK_POSTGRES = "sdk-postgres"  # the PostgreSQL baseline: a2a-sdk's DatabaseTaskStore
POSTGRES_VARIANTS = (POSTGRES_VARIANT, SDK_POSTGRES)
TARGET_POSTGRES_SPEEDUP = 4.0  # llamon-postgres / sdk-postgres at SPEEDUP_AT
TARGET_POSTGRES_P99_MS = 150.0  # llamon-postgres p99 at c=16
BASELINE = "raw-sqlite"
TARGET_SPEEDUP = 5.0  # llamon-sqlite (and -serve) / raw-sqlite throughput, at these concurrencies:
SPEEDUP_AT = (16, 64)
TARGET_EMBEDDED = 0.9  # llamon-sqlite / llamon-memory throughput, every method and concurrency
EMBEDDED_PAIR = ("llamon-sqlite", "llamon-memory")
TARGET_P99_MS = 100.0  # llamon-sqlite (and -serve) p99 at c=16
P99_AT = 16
TARGET_FAILURE_MS = 5.0  # llamon raise p50 - ok p50
TARGET_RSS_RATIO = 1.10
RSS_INTERVAL = 5.0  # seconds between VmRSS samples (one load window each)
RSS_CONCURRENCY = 16
STORE_DEFAULT_MAX_FINISHED = 10_000  # MemoryLimits() default: finished tasks kept
QUICK_MAX_FINISHED = 2_000  # --quick: small enough to fill within the 10 s warm-up

LOG_PATTERNS = ("database is locked", "Traceback")
LIMITS_WARNING = "takes no memory_limits"

Runs = list[dict[str, Any]]


# -- servers and load ----------------------------------------------------------------------


def start(
    specs: Sequence[tuple[str, list[str]]], args: argparse.Namespace, logdir: Path
) -> list[base.Server]:
    """Start one server per ``(variant, extra a2a_servers.py options)``; wait for their ports."""
    return base.start_servers([n for n, _ in specs], args, logdir, [e for _, e in specs])


def drive(
    server: base.Server,
    *,
    concurrency: int,
    seconds: float,
    requests: int = 0,
    mode: str = "send",
    expect: str = COMPLETED,
    warmup_requests: int = 0,
    warmup_seconds: float = 0.0,
    allow_cut: bool = False,
    samples: bool = True,
) -> dict[str, Any]:
    """One loadgen run against ``server`` in this process; its result dict (see loadgen).

    The window lasts ``seconds`` (or until ``requests`` answers if that is not 0), after
    ``warmup_requests`` answers or ``warmup_seconds`` (none if both are 0).
    """
    argv = [
        "--port", str(server.port),
        "--mode", mode,
        "--concurrency", str(concurrency),
        "--requests", str(requests),
        "--duration", str(seconds),
        "--warmup-requests", str(warmup_requests),
        "--warmup", str(warmup_seconds),
        "--expect", expect,
        "--server-pid", str(server.proc.pid),
    ]  # fmt: skip
    if samples:
        argv.append("--samples")
    if allow_cut:
        argv.append("--allow-cut")
    result: dict[str, Any] = asyncio.run(loadgen.run(loadgen.parse_args(argv)))
    if result["errors"]:
        print(
            f"  ! {server.variant} {mode} c={concurrency}: {result['errors']} errors "
            f"{result['error_kinds']}; first: {result['first_error']}",
            file=sys.stderr,
            flush=True,
        )
    return result


def log_counts(log: Path) -> dict[str, int]:
    """How often each of ``LOG_PATTERNS`` occurs in a server's stderr log."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return {}
    return {pattern: text.count(pattern) for pattern in LOG_PATTERNS if pattern in text}


def merged_kinds(runs: Runs) -> dict[str, int]:
    kinds: Counter[str] = Counter()
    for run in runs:
        kinds.update(run.get("error_kinds") or {})
    return dict(kinds)


def first_error(runs: Runs) -> str | None:
    return next((r["first_error"] for r in runs if r.get("first_error")), None)


def verdict(passed: bool, target: str) -> str:
    return f"target {target}: " + ("PASS" if passed else "MISS")


def fmt(value: float | None, digits: int = 2) -> str:
    return base.fmt(value, digits)


# -- 1. store throughput -------------------------------------------------------------------


def store_options(
    name: str, run_dir: Path, args: argparse.Namespace, method: str = "send"
) -> list[str]:
    """The a2a_servers.py options of a store variant (a fresh database directory each)."""
    extra = ["--stream-agent"] if method == "stream" else []
    if name in ("raw-sqlite", *SQLITE_TARGETED):
        directory = run_dir / f"{name}-{method}"  # all on the file system of one temporary dir
        directory.mkdir()
        return ["--db-dir", str(directory), *extra]
    if name in POSTGRES_VARIANTS:
        return ["--dsn", args.postgres, *extra]
    return extra


def results_names(args: argparse.Namespace) -> list[str]:
    """The variants measured (without their method)."""
    return [*args.variants, *(POSTGRES_VARIANTS if args.postgres else ())]


def label(name: str, method: str) -> str:
    """How a variant's figures are named: ``name`` for message/send, ``name/stream``."""
    return name if method == "send" else f"{name}/stream"


def throughput(args: argparse.Namespace, workdir: Path) -> tuple[str, dict[str, Any], int]:
    """Measure, print as it goes; (the table and ratio lines, the figures, error count)."""
    names = results_names(args)
    labels = [label(n, m) for m in args.method for n in names]
    results: dict[str, dict[int, Runs]] = {n: {c: [] for c in args.concurrency} for n in labels}
    foreign: dict[int, float] = {}
    logs: dict[str, dict[int, dict[str, int]]] = {n: {} for n in labels}
    print(
        f"== throughput: {' and '.join(f'message/{m}' for m in args.method)}, {args.slices} "
        f"slices x {args.slice_seconds} s per variant after a {args.warmup_seconds} s "
        f"warm-up; concurrency {args.concurrency}",
        flush=True,
    )
    for c in args.concurrency:
        if args.wait_quiet > 0:
            base.wait_quiet(args.wait_quiet)
        busy0, own0, wall0 = base.machine_busy(), base.own_cpu(), time.monotonic()
        for method in args.method:
            run_dir = Path(tempfile.mkdtemp(prefix=f"throughput-c{c}-{method}-", dir=workdir))
            specs = [(n, store_options(n, run_dir, args, method)) for n in names]
            servers = start(specs, args, run_dir)
            try:
                for server in servers:  # warm-up, discarded
                    drive(
                        server,
                        concurrency=c,
                        seconds=args.warmup_seconds,
                        mode=method,
                        samples=False,
                    )
                for index in range(args.slices):
                    for server in servers if index % 2 == 0 else servers[::-1]:
                        result = drive(
                            server,
                            concurrency=c,
                            seconds=args.slice_seconds,
                            mode=method,
                            warmup_requests=c,  # refill the slice's new connections
                            warmup_seconds=min(0.5, args.slice_seconds / 2),
                        )
                        results[label(server.variant, method)][c].append(result)
            finally:
                for server in servers:
                    server.stop()
            for name in names:
                logs[label(name, method)][c] = log_counts(run_dir / f"{name}.log")
        share = base.foreign_share(busy0, own0, time.monotonic() - wall0)
        if share is not None:
            foreign[c] = share
        line = "  ".join(f"{n} {base.agg_rps(results[n][c]):.0f}/s" for n in labels)
        note = f"; other processes used {share:.0%} of the CPU" if share is not None else ""
        print(f"c={c:<3} {line}{note}", flush=True)
    return summarize_throughput(results, foreign, logs, args)


def speedup_target(numerator: str, denominator: str, concurrency: int) -> float | None:
    """The throughput ratio a pair must reach at ``concurrency``, or None (no target)."""
    if (numerator.split("/")[0], denominator.split("/")[0]) == EMBEDDED_PAIR:
        return TARGET_EMBEDDED
    if concurrency not in SPEEDUP_AT:
        return None
    if numerator in SQLITE_TARGETED and denominator == BASELINE:
        return TARGET_SPEEDUP
    if (numerator, denominator) == POSTGRES_VARIANTS:
        return TARGET_POSTGRES_SPEEDUP
    return None


def p99_target(variant: str) -> float | None:
    """The p99 (ms, at ``P99_AT``) ``variant`` must stay under, or None."""
    if variant in SQLITE_TARGETED:
        return TARGET_P99_MS
    return TARGET_POSTGRES_P99_MS if variant == POSTGRES_VARIANT else None


def paired(a: Runs, b: Runs) -> list[float]:
    """Slice-by-slice throughput ratios a / b (adjacent slices of one round)."""
    return [x["rps"] / y["rps"] for x, y in zip(a, b, strict=True) if y["rps"] and x["rps"]]


def summarize_throughput(
    results: dict[str, dict[int, Runs]],
    foreign: dict[int, float],
    logs: dict[str, dict[int, dict[str, int]]],
    args: argparse.Namespace,
) -> tuple[str, dict[str, Any], int]:
    pct = loadgen.percentile
    lines = [
        "",
        f"{'variant':<22} {'conc':>4} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'srv us/req':>10} {'requests':>8} {'errors':>6}",
    ]
    figures: dict[str, Any] = {"variants": {}, "ratios": [], "p99": [], "foreign_cpu": foreign}
    errors = 0
    for name, per_c in results.items():
        for c, runs in per_c.items():
            lat = base.pooled(runs, "latency")
            row = {
                "rps": base.agg_rps(runs),
                "p50_ms": pct(lat, 50),
                "p99_ms": pct(lat, 99),
                "server_cpu_us_per_req": base.cpu_per_req(runs),
                "requests": sum(r["requests"] for r in runs),
                "errors": sum(r["errors"] for r in runs),
                "error_kinds": merged_kinds(runs),
                "first_error": first_error(runs),
                "log": logs[name].get(c, {}),
                "slices": [
                    {k: r[k] for k in ("requests", "seconds", "rps", "p50_ms", "p99_ms", "errors")}
                    for r in runs
                ],
            }
            errors += row["errors"]
            figures["variants"].setdefault(name, {})[c] = row
            lines.append(
                f"{name:<22} {c:>4} {row['rps']:>8.1f} {fmt(row['p50_ms']):>8} "
                f"{fmt(row['p99_ms']):>8} {fmt(row['server_cpu_us_per_req'], 0):>10} "
                f"{row['requests']:>8} {row['errors']:>6}"
            )

    pairs: list[tuple[str, str]] = []
    for method in args.method:  # numerator and denominator of one method
        baseline = label(BASELINE, method)
        llamon = [label(n, method) for n in results_names(args) if n.startswith("llamon-")]
        pairs += [(n, baseline) for n in llamon if n in results and baseline in results]
        for num, den in (
            EMBEDDED_PAIR,
            ("llamon-memory", "raw-memory"),
            (POSTGRES_VARIANT, SDK_POSTGRES),
        ):
            if label(num, method) in results and label(den, method) in results:
                pairs.append((label(num, method), label(den, method)))
    if pairs:
        lines += [
            "",
            "throughput ratios: median over slices of the paired ratio [quartiles], aggregate "
            "(all requests / all time), server CPU per request (denominator / numerator)",
        ]
    for num, den in pairs:
        for c in args.concurrency:
            a, b = results[num][c], results[den][c]
            ratios = paired(a, b)
            if not ratios:
                lines.append(f"{num + ' / ' + den:<30} c={c:<3} -  (no throughput)")
                continue
            q1, med, q3 = base.quartiles(ratios)
            den_rps = base.agg_rps(b)
            aggregate = base.agg_rps(a) / den_rps if den_rps else None
            cpu_a, cpu_b = base.cpu_per_req(a), base.cpu_per_req(b)
            cpu = cpu_b / cpu_a if cpu_a and cpu_b else None
            target = speedup_target(num, den, c)
            note = ""
            busy = foreign.get(c)
            if busy is not None and busy > base.NOISY:
                note = f"(noisy: others used {busy:.0%} of the CPU) "
            if target is not None:
                note += verdict(med >= target, f">= {target:g}x")
            figures["ratios"].append(
                {
                    "numerator": num,
                    "denominator": den,
                    "concurrency": c,
                    "median": med,
                    "q1": q1,
                    "q3": q3,
                    "aggregate": aggregate,
                    "cpu": cpu,
                    "target": target,
                }
            )
            lines.append(
                f"{num + ' / ' + den:<30} c={c:<3} {med:7.2f} [{q1:.2f}-{q3:.2f}]  aggregate "
                f"{fmt(aggregate)}  cpu {fmt(cpu)}   {note}"
            )

    if P99_AT in args.concurrency:
        lines.append("")
        for name in results:
            p99 = figures["variants"][name][P99_AT]["p99_ms"]
            target = p99_target(name)
            note = (
                verdict(p99 is not None and p99 <= target, f"<= {target:g} ms")
                if target is not None
                else ""
            )
            figures["p99"].append({"variant": name, "p99_ms": p99, "target_ms": target})
            lines.append(f"p99 at c={P99_AT}: {name:<16} {fmt(p99, 1):>8} ms   {note}")

    problems = [
        f"  {name} c={c}: {row['errors']} errors {row['error_kinds']}; server log: "
        f"{row['log'] or 'clean'}; first: {row['first_error']}"
        for name, per_c in figures["variants"].items()
        for c, row in per_c.items()
        if row["errors"] or row["log"]
    ]
    if problems:
        lines += ["", "errors (answers that were not completed tasks) and server log lines:"]
        lines += problems
    return "\n".join(lines), figures, errors


# -- 2. failure promptness -----------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One server driven one way, and what each of its answers must be."""

    server: str
    mode: str  # "send" | "stream"
    expect: str
    allow_cut: bool = False

    @property
    def label(self) -> str:
        return f"{self.server} {self.mode}"


FAILURE_CASES = (
    Case("raw-ok", "send", COMPLETED),
    Case("raw-raise", "send", RPC_INTERNAL_ERROR),
    Case("llamon-ok", "send", COMPLETED),
    Case("llamon-raise", "send", FAILED),
    Case("raw-ok", "stream", COMPLETED),
    Case("raw-raise", "stream", STREAM_CUT, allow_cut=True),
    Case("llamon-ok", "stream", COMPLETED),
    Case("llamon-raise", "stream", FAILED),
    Case("llamon-raise-late", "stream", FAILED),
)
FAILURE_SERVERS = ("raw-ok", "raw-raise", "llamon-ok", "llamon-raise", "llamon-raise-late")

# (label, raising case, its success case, target applies, the raise re-runs the I/O once)
DELTAS = (
    ("raw send", "raw-raise send", "raw-ok send", False, False),
    ("llamon send", "llamon-raise send", "llamon-ok send", True, False),
    ("raw stream", "raw-raise stream", "raw-ok stream", False, False),
    ("llamon stream, raise before chunk", "llamon-raise stream", "llamon-ok stream", True, True),
    (
        "llamon stream, raise after chunk",
        "llamon-raise-late stream",
        "llamon-ok stream",
        True,
        False,
    ),
)


def failure(args: argparse.Namespace, workdir: Path) -> tuple[str, dict[str, Any], int]:
    """Measure, print as it goes; (the tables and delta lines, the figures, error count)."""
    print(
        f"== failure promptness: c=1, agent I/O {args.io_delay * 1000:g} ms, "
        f"{args.fail_slices} slices x {args.fail_requests} requests per case (at most "
        f"{args.fail_cap} s per slice)",
        flush=True,
    )
    if args.wait_quiet > 0:
        base.wait_quiet(args.wait_quiet)
    run_dir = Path(tempfile.mkdtemp(prefix="failure-", dir=workdir))
    extra = ["--io-delay", str(args.io_delay)]
    results: dict[str, Runs] = {case.label: [] for case in FAILURE_CASES}
    busy0, own0, wall0 = base.machine_busy(), base.own_cpu(), time.monotonic()
    servers = {s.variant: s for s in start([(n, extra) for n in FAILURE_SERVERS], args, run_dir)}
    try:

        def run(case: Case, requests: int, cap: float, warmup: int) -> dict[str, Any]:
            return drive(
                servers[case.server],
                concurrency=1,
                seconds=cap,
                requests=requests,
                mode=case.mode,
                expect=case.expect,
                warmup_requests=warmup,
                warmup_seconds=1.0 if warmup else 0.0,
                allow_cut=case.allow_cut,
            )

        for case in FAILURE_CASES:  # warm-up, discarded (the first requests are slower)
            run(case, args.fail_warmup, args.fail_cap / 2, 0)
        for index in range(args.fail_slices):
            for case in FAILURE_CASES if index % 2 == 0 else FAILURE_CASES[::-1]:
                results[case.label].append(run(case, args.fail_requests, args.fail_cap, 1))
    finally:
        for server in servers.values():
            server.stop()
    share = base.foreign_share(busy0, own0, time.monotonic() - wall0)

    pct = loadgen.percentile
    figures: dict[str, Any] = {"cases": {}, "deltas": [], "foreign_cpu": share}
    errors = 0
    lines = [
        "",
        f"{'case':<26} {'answer':<14} {'n':>5} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} "
        f"{'errors':>6}",
    ]
    for case in FAILURE_CASES:
        runs = results[case.label]
        lat = base.pooled(runs, "latency")
        row = {
            "server": case.server,
            "mode": case.mode,
            "expect": case.expect,
            "n": len(lat),
            "p50_ms": pct(lat, 50),
            "p90_ms": pct(lat, 90),
            "p99_ms": pct(lat, 99),
            "errors": sum(r["errors"] for r in runs),
            "error_kinds": merged_kinds(runs),
            "first_error": first_error(runs),
        }
        errors += row["errors"]
        figures["cases"][case.label] = row
        answer = {COMPLETED: "completed", FAILED: "failed", STREAM_CUT: "stream cut"}.get(
            case.expect, "JSON-RPC error"
        )
        lines.append(
            f"{case.label:<26} {answer:<14} {row['n']:>5} {fmt(row['p50_ms']):>8} "
            f"{fmt(row['p90_ms']):>8} {fmt(row['p99_ms']):>8} {row['errors']:>6}"
        )
    lines += ["", "raise p50 - ok p50 (how much later a failure reaches the caller):"]
    io_ms = args.io_delay * 1000
    for label, raising, ok, targeted, rerun in DELTAS:
        a, b = figures["cases"][raising]["p50_ms"], figures["cases"][ok]["p50_ms"]
        if a is None or b is None:
            lines.append(f"  {label:<38} -")
            continue
        delta = a - b
        net = delta - io_ms if rerun else delta
        note = ""
        if rerun:
            note = (
                f"(includes the fallback to invoke(), which waits its {io_ms:g} ms I/O "
                f"again; net of it {net:+.2f} ms) "
            )
        if targeted:
            note += verdict(net <= TARGET_FAILURE_MS, f"<= {TARGET_FAILURE_MS:g} ms")
            if rerun:
                note += " (net)"
        target = TARGET_FAILURE_MS if targeted else None
        figures["deltas"].append(
            {"label": label, "delta_ms": delta, "net_ms": net, "target_ms": target}
        )
        lines.append(f"  {label:<38} {delta:+9.2f} ms   {note}")
    problems = [
        f"  {label}: {row['errors']} errors {row['error_kinds']}; first: {row['first_error']}"
        for label, row in figures["cases"].items()
        if row["errors"]
    ]
    if problems:
        lines += ["", "errors (answers not as expected):", *problems]
    if share is not None:
        lines.append(f"\nother processes used {share:.0%} of the CPU during the comparison")
    return "\n".join(lines), figures, errors


# -- 3. memory over sustained load ---------------------------------------------------------


def vm_rss_mb(pid: int) -> float | None:
    """The resident set size of process ``pid`` in MB (``VmRSS`` in ``/proc/<pid>/status``)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_run(name: str, args: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], int]:
    """Load ``name`` at c=16 in 5 s windows, sampling VmRSS after each; its figures."""
    warm_windows = max(1, round(args.rss_warmup / RSS_INTERVAL))
    windows = warm_windows + max(1, round(args.rss_minutes * 60 / RSS_INTERVAL))
    server_args = copy.copy(args)
    server_args.max_seconds = max(args.max_seconds, windows * RSS_INTERVAL * 1.5 + 120)
    limited = name == "llamon-memory" and args.max_finished is not None
    extra = ["--max-finished", str(args.max_finished)] if limited else []
    run_dir = Path(tempfile.mkdtemp(prefix=f"rss-{name}-", dir=workdir))
    (server,) = start([(name, extra)], server_args, run_dir)
    samples: list[dict[str, Any]] = []
    errors = 0
    kinds: Counter[str] = Counter()
    try:
        warning = LIMITS_WARNING in (run_dir / f"{name}.log").read_text(errors="replace")
        if warning:
            print(f"  note: {name}: open_stores() takes no memory_limits yet; store defaults")
        print(f"{name}: {'t s':>7} {'RSS MB':>8} {'requests':>9} {'req/s':>7}")
        started = time.monotonic()
        total = 0

        def sample(rps: float | None) -> None:
            row = {
                "t_s": round(time.monotonic() - started, 1),
                "rss_mb": vm_rss_mb(server.proc.pid),
                "requests": total,
                "rps": rps,
            }
            samples.append(row)
            mark = "  <- end of warm-up" if len(samples) == warm_windows + 1 else ""
            print(
                f"{'':<{len(name) + 1}} {row['t_s']:>7.1f} {fmt(row['rss_mb'], 1):>8} "
                f"{total:>9} {fmt(rps, 0):>7}{mark}",
                flush=True,
            )

        sample(None)
        for _ in range(windows):
            result = drive(server, concurrency=RSS_CONCURRENCY, seconds=RSS_INTERVAL, samples=False)
            total += result["requests"]
            errors += result["errors"]
            kinds.update(result["error_kinds"])
            sample(result["rps"])
    finally:
        server.stop()
    warm = samples[warm_windows]["rss_mb"]
    bound = args.max_finished if limited and not warning else STORE_DEFAULT_MAX_FINISHED
    filled = samples[warm_windows]["requests"] >= bound
    after = [s["rss_mb"] for s in samples[warm_windows + 1 :] if s["rss_mb"] is not None]
    figures = {
        "samples": samples,
        "warmup_s": warm_windows * RSS_INTERVAL,
        "minutes": (windows - warm_windows) * RSS_INTERVAL / 60,
        "warmup_rss_mb": warm,
        "min_after_mb": min(after) if after else None,
        "max_after_mb": max(after) if after else None,
        "ratio": max(after) / warm if after and warm else None,
        "requests": total,
        "errors": errors,
        "error_kinds": dict(kinds),
        "max_finished": args.max_finished,
        "memory_limits_ignored": warning,
        "store_full_after_warmup": filled,
    }
    return figures, errors


def rss(args: argparse.Namespace, workdir: Path) -> tuple[str, dict[str, Any], int]:
    """Measure (printing the samples as they come); (the summary lines, figures, errors)."""
    names = ["llamon-memory", *(["raw-memory"] if args.rss_baseline else [])]
    limits = f"max_finished={args.max_finished}" if args.max_finished is not None else "defaults"
    print(
        f"== rss: c={RSS_CONCURRENCY} message/send, warm-up {args.rss_warmup:g} s then "
        f"{args.rss_minutes:g} min; VmRSS every {RSS_INTERVAL:g} s; llamon-memory store "
        f"limits: {limits}",
        flush=True,
    )
    figures: dict[str, Any] = {}
    errors = 0
    lines = [""]
    for name in names:
        if args.wait_quiet > 0:
            base.wait_quiet(args.wait_quiet)
        figures[name], count = rss_run(name, args, workdir)
        errors += count
    for name, row in figures.items():
        ratio = row["ratio"]
        note = ""
        if name == "llamon-memory":
            note = verdict(
                ratio is not None and ratio <= TARGET_RSS_RATIO, f"<= {TARGET_RSS_RATIO}"
            )
        lines.append(
            f"{name:<14} RSS at the end of the {row['warmup_s']:g} s warm-up "
            f"{fmt(row['warmup_rss_mb'], 1)} MB; over the next {row['minutes']:g} min min "
            f"{fmt(row['min_after_mb'], 1)} / max {fmt(row['max_after_mb'], 1)} MB; "
            f"max / warm-up {fmt(ratio, 3)}   {note}"
        )
        lines.append(
            f"{'':<14} {row['requests']} requests in the windows, {row['errors']} errors "
            f"{row['error_kinds'] or ''}"
        )
        if name == "llamon-memory" and not row["store_full_after_warmup"]:
            lines.append(
                f"{'':<14} note: fewer requests in the warm-up than the store keeps finished "
                "tasks: the ratio includes the store filling up (lengthen --rss-warmup or "
                "lower --max-finished)"
            )
    return "\n".join(lines), figures, errors


# -- command line --------------------------------------------------------------------------


QUICK = {
    "slices": 2,
    "slice_seconds": 1.0,
    "warmup_seconds": 0.5,
    "fail_slices": 3,
    "fail_requests": 30,
    "fail_cap": 2.0,
    "fail_warmup": 5,
    "rss_minutes": 1.0,
    "rss_warmup": 10.0,
    "max_finished": QUICK_MAX_FINISHED,
}
FULL = {
    "slices": 6,
    "slice_seconds": 3.0,
    "warmup_seconds": 3.0,
    "fail_slices": 10,
    "fail_requests": 40,
    "fail_cap": 5.0,
    "fail_warmup": 20,
    "rss_minutes": 10.0,
    "rss_warmup": 60.0,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=("throughput", "failure", "rss", "all"))
    parser.add_argument("--quick", action="store_true", help="short runs: does it all work?")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    group = parser.add_argument_group("throughput")
    group.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    group.add_argument(
        "--method", nargs="+", default=["send"], choices=("send", "stream"),
        help="message/send, message/stream (an agent streaming three chunks), or both",
    )  # fmt: skip
    group.add_argument("--slices", type=int, default=None, help="measured slices per variant")
    group.add_argument("--slice-seconds", type=float, default=None, help="length of a slice")
    group.add_argument("--warmup-seconds", type=float, default=None, help="per server")
    group.add_argument(
        "--postgres", metavar="DSN", default=None, help="add llamon-postgres and sdk-postgres"
    )
    group.add_argument(
        "--variants", nargs="*", default=list(STORE_VARIANTS), choices=STORE_VARIANTS,
        metavar="V", help=f"a subset of {', '.join(STORE_VARIANTS)} (default: all; none:"
        " only the --postgres pair)",
    )  # fmt: skip
    group = parser.add_argument_group("failure")
    group.add_argument("--io-delay", type=float, default=0.010, help="the agent's I/O wait (s)")
    group.add_argument("--fail-slices", type=int, default=None)
    group.add_argument("--fail-requests", type=int, default=None, help="per case and slice")
    group.add_argument("--fail-cap", type=float, default=None, help="seconds per case and slice")
    group.add_argument("--fail-warmup", type=int, default=None, help="discarded, per case")
    group = parser.add_argument_group("rss")
    group.add_argument("--rss-minutes", type=float, default=None, help="after the warm-up")
    group.add_argument("--rss-warmup", type=float, default=None, help="seconds")
    group.add_argument("--rss-baseline", action="store_true", help="also raw-memory")
    group.add_argument(
        "--max-finished", type=int, default=None, metavar="N",
        help="llamon-memory: MemoryLimits(max_finished=N) (ignored before open_stores takes it)",
    )  # fmt: skip
    group = parser.add_argument_group("machine")
    group.add_argument(
        "--wait-quiet", type=float, default=0.0, metavar="S",
        help="before each comparison wait up to S s for other processes to go idle",
    )  # fmt: skip
    group.add_argument("--max-seconds", type=float, default=1800.0, help="server lifetime cap")
    group.add_argument("--no-a2a-otel", action="store_true", help="a2a-sdk tracing spans off")
    group.add_argument("--logs", type=Path, default=None, help="keep the server logs here")
    group.add_argument(
        "--gc-freeze", action="store_true", help="diagnosis: servers gc.freeze() after startup"
    )
    args = parser.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    print(
        f"stores benchmark ({args.what}{', quick' if args.quick else ''}), Python "
        f"{platform.python_version()}, {os.cpu_count()} cores, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    sections = ("throughput", "failure", "rss") if args.what == "all" else (args.what,)
    measures = {"throughput": throughput, "failure": failure, "rss": rss}
    report: dict[str, Any] = {}
    errors = 0
    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="llamon-bench-stores-", dir=args.logs) as tmp:
        for section in sections:
            text, figures, count = measures[section](args, Path(tmp))
            print(text, flush=True)
            report[section] = figures
            errors += count
        if args.logs is not None:  # keep them: move out of the temporary directory
            kept = args.logs / f"run-{time.strftime('%Y%m%d-%H%M%S')}"
            Path(tmp).rename(kept)
            Path(tmp).mkdir()
            print(f"server logs kept in {kept}")
    print(
        f"\ntotal {time.monotonic() - started:.0f} s; {errors} errors"
        + (" (exit status 1)" if errors else "")
    )
    if args.json is not None:
        report["args"] = {k: v for k, v in vars(args).items() if k not in ("json", "postgres")}
        report["args"]["postgres"] = bool(args.postgres)  # never write the DSN (password)
        args.json.write_text(json.dumps(report, indent=1, default=str))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
