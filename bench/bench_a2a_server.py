"""A2A server benchmark: llamon's ``create_app`` against a raw a2a-sdk executor, as ratios.

    python bench/bench_a2a_server.py            # the real figures (~2.5 minutes)
    python bench/bench_a2a_server.py --quick    # a short run: does the benchmark still work?
    python bench/bench_a2a_server.py --profile llamon   # cProfile of one server, top functions

What is measured (``bench/README.md`` says how to read the output):

1. ``message/send`` throughput and p50/p99 latency of a trivial agent: ``llamon`` vs ``raw``.
   Target: llamon >= 0.95 x raw throughput.
2. The failure path: ``llamon-fail`` (the agent raises ``ComponentInvokeError("down")``,
   answered as a failed task with text + data parts) vs the ``raw`` success path.
   Target: >= 0.90 x raw throughput.
   ``llamon-unmapped`` (the agent raises an unmapped ``RuntimeError``: a failed task with an
   incident id, and the ERROR incident line with its scrubbed traceback) vs the ``llamon``
   success path. Target: >= 0.90 x llamon throughput.
3. ``message/stream`` time to the first SSE event and to the first artifact chunk:
   ``llamon-stream`` vs ``raw-stream``.
4. The floor: ``floor`` is a bare Starlette JSON-RPC endpoint (no a2a-sdk, no llamon) on
   the same uvicorn settings, answering ``message/send`` with a canned completed task of
   the same shape and size as llamon's. Each send variant's server CPU per request is
   printed as a multiple of the floor's. Targets (printed, not part of the verdict):
   llamon's CPU per send <= 1.5 x the floor's; llamon >= 2 x raw throughput at c >= 16.

How: every server runs in its own process (``bench/a2a_servers.py``: uvicorn, one worker,
log level warning, a free 127.0.0.1 port reported on stdout). This script is the load
generator (``bench/loadgen.py``, imported: raw asyncio HTTP/1.1, one keep-alive connection
per concurrent worker) and runs no server code itself.

For each mode (send, stream) and concurrency, fresh servers are started for every variant
of the comparison, each is warmed up, and then the variants take turns in short slices of
a fixed number of requests (raw, llamon, llamon-fail, floor, then floor, llamon-fail ...),
so noise from other processes on the machine hits every side alike and every server holds
the same number of finished tasks (a2a-sdk's in-memory store keeps them all) at the same
point. A ratio is the median, over the slices, of llamon's throughput over raw's in the
adjacent slice; the aggregate ratio (all requests / all time) and the server CPU per
request are printed next to it. Everything is bounded: each slice stops after its
requests or ``--duration`` seconds, each server when this script closes its stdin (or
after ``--max-seconds``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import loadgen  # bench/ is on sys.path when this file runs as a script

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SERVERS = BENCH / "a2a_servers.py"

SEND_TARGET = 0.95
FAIL_TARGET = 0.90


@dataclass(frozen=True)
class Variant:
    name: str
    mode: str  # "send" | "stream"
    expect: str


VARIANTS = {
    "raw": Variant("raw", "send", '"state":"completed"'),
    "llamon": Variant("llamon", "send", '"state":"completed"'),
    "llamon-fail": Variant("llamon-fail", "send", '"state":"failed"'),
    "llamon-unmapped": Variant("llamon-unmapped", "send", '"state":"failed"'),
    "raw-stream": Variant("raw-stream", "stream", '"state":"completed"'),
    "llamon-stream": Variant("llamon-stream", "stream", '"state":"completed"'),
    "raw-working": Variant("raw-working", "send", '"state":"completed"'),  # diagnosis only
    "raw-failed": Variant("raw-failed", "send", '"state":"failed"'),  # diagnosis only
    "llamon-otel": Variant("llamon-otel", "send", '"state":"completed"'),  # OpenTelemetry on
    "llamon-fail-otel": Variant("llamon-fail-otel", "send", '"state":"failed"'),
    "floor": Variant("floor", "send", '"state":"completed"'),  # bare Starlette, no a2a-sdk
    "floor-models": Variant("floor-models", "send", '"state":"completed"'),  # + types, store
}
DEFAULT_VARIANTS = ("raw", "llamon", "llamon-fail", "floor", "raw-stream", "llamon-stream")

# (label, numerator, denominator, target)
RATIOS: tuple[tuple[str, str, str, float | None], ...] = (
    ("send:   llamon / raw", "llamon", "raw", SEND_TARGET),
    ("fail:   llamon-fail / raw success", "llamon-fail", "raw", FAIL_TARGET),
    ("unmapped: llamon-unmapped / llamon", "llamon-unmapped", "llamon", FAIL_TARGET),
    ("stream: llamon / raw (streams/s)", "llamon-stream", "raw-stream", None),
    ("diag:   raw-working / raw", "raw-working", "raw", None),
    ("diag:   llamon / raw-working", "llamon", "raw-working", None),
    ("diag:   raw-failed / raw-working", "raw-failed", "raw-working", None),
    ("diag:   llamon-fail / raw-failed", "llamon-fail", "raw-failed", None),
    ("otel:   llamon-otel / llamon", "llamon-otel", "llamon", None),
    ("otel:   llamon-otel / raw", "llamon-otel", "raw", None),
    ("otel:   llamon-fail-otel / llamon-fail", "llamon-fail-otel", "llamon-fail", None),
    ("floor:  llamon / floor", "llamon", "floor", None),
    ("floor:  raw / floor", "raw", "floor", None),
)

# Against the floor (a bare Starlette endpoint answering the same task, no a2a-sdk):
FLOOR_SEND_TARGET = 2.0  # llamon / raw throughput, at c >= 16
FLOOR_CPU_TARGET = 1.5  # llamon's server CPU per send / the floor's, at most

A2A_OTEL_ENV = "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"

Results = dict[str, dict[int, list[dict[str, Any]]]]


# -- processes -----------------------------------------------------------------------------


def child_env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    env.setdefault("LLAMON_WORKER_ID", "bench")
    if args.no_a2a_otel:
        env[A2A_OTEL_ENV] = "false"
    return env


class Server:
    """One benchmark server process; ``stop()`` closes its stdin and waits."""

    def __init__(
        self,
        variant: str,
        args: argparse.Namespace,
        log: Path,
        profile: Path | None,
        extra: Sequence[str] = (),
    ):
        cmd = [sys.executable, str(SERVERS), variant, "--max-seconds", str(args.max_seconds)]
        cmd += extra  # more a2a_servers.py options (bench_stores.py: --db-dir, --dsn, ...)
        if profile is not None:
            cmd += ["--profile", str(profile)]
        if args.gc_freeze:
            cmd.append("--gc-freeze")
        self.variant = variant
        self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(  # noqa: S603 - our own script
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=child_env(args),
            cwd=ROOT,
        )
        self.port: int | None = None

    def wait_port(self, timeout: float = 60.0) -> int:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while self.port is None:
            line = self.proc.stdout.readline()  # the server prints PORT within seconds
            if not line:
                raise RuntimeError(f"server {self.variant} exited with {self.proc.wait()}")
            if line.startswith(b"PORT "):
                self.port = int(line.split()[1])
            if time.monotonic() > deadline:
                raise RuntimeError(f"server {self.variant} did not report its port")
        return self.port

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                self.proc.wait(timeout=5)
        self._log.close()


def start_servers(
    names: Sequence[str],
    args: argparse.Namespace,
    logdir: Path,
    extras: Sequence[Sequence[str]] | None = None,
) -> list[Server]:
    """One server per variant (``extras[i]``: more a2a_servers.py options); wait for ports."""
    options = extras if extras is not None else [()] * len(names)
    servers = [
        Server(n, args, logdir / f"{n}.log", None, tuple(extra))
        for n, extra in zip(names, options, strict=True)
    ]
    try:
        for server in servers:
            server.wait_port()
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


def run_slice(
    server: Server, concurrency: int, requests: int, warmup: int, args: argparse.Namespace
) -> dict[str, Any]:
    """One measurement against ``server``; the load runs in this process."""
    variant = VARIANTS[server.variant]
    ns = loadgen.parse_args(
        [
            "--port", str(server.port),
            "--mode", variant.mode,
            "--concurrency", str(concurrency),
            "--requests", str(requests),
            "--warmup-requests", str(warmup),
            "--duration", str(args.duration),
            "--warmup", str(args.warmup if warmup else 0),
            "--expect", variant.expect,
            "--server-pid", str(server.proc.pid),
            "--samples",
        ]
    )  # fmt: skip
    result: dict[str, Any] = asyncio.run(loadgen.run(ns))
    if result["errors"]:
        print(
            f"  ! {server.variant} c={concurrency}: {result['errors']} errors, first: "
            f"{result['first_error']}",
            file=sys.stderr,
        )
    return result


# -- the machine ---------------------------------------------------------------------------


def machine_busy() -> float | None:
    """Busy CPU seconds of the whole machine so far (Linux ``/proc/stat``), else None."""
    try:
        with open("/proc/stat") as handle:
            fields = [int(x) for x in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    """CPU seconds of this script and its finished children (the servers)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def foreign_share(busy0: float | None, own0: float, wall: float) -> float | None:
    """The share of the machine's CPU other processes used since ``busy0``/``own0``."""
    busy1 = machine_busy()
    if busy0 is None or busy1 is None or wall <= 0:
        return None
    return max(0.0, (busy1 - busy0) - (own_cpu() - own0)) / (wall * (os.cpu_count() or 1))


def wait_quiet(limit: float) -> None:
    """Wait (up to ``limit`` seconds) until other processes leave the machine mostly idle."""
    deadline = time.monotonic() + limit
    while True:
        busy0, own0 = machine_busy(), own_cpu()
        time.sleep(1.0)
        share = foreign_share(busy0, own0, 1.0)
        if share is None or share < 0.10:
            return
        if time.monotonic() >= deadline:
            print(f"  ! the machine is busy ({share:.0%} of its CPU used by others)", flush=True)
            return
        print(f"  waiting: other processes use {share:.0%} of the CPU", flush=True)
        time.sleep(4.0)


# -- measuring -----------------------------------------------------------------------------


def groups(names: Sequence[str]) -> list[list[str]]:
    """The variants to compare with each other: one group per mode, in the given order."""
    by_mode: dict[str, list[str]] = {}
    for name in names:
        by_mode.setdefault(VARIANTS[name].mode, []).append(name)
    return list(by_mode.values())


NOISY = 0.15  # a comparison during which other processes used more of the CPU is flagged

Foreign = dict[tuple[str, int], float]  # (mode, concurrency) -> share of the machine's CPU


def measure(args: argparse.Namespace, logdir: Path) -> tuple[Results, Foreign]:
    results: Results = {n: {c: [] for c in args.concurrency} for n in args.variants}
    foreign: Foreign = {}
    for names in groups(args.variants):
        mode = VARIANTS[names[0]].mode
        per_slice = args.stream_requests if mode == "stream" else args.requests
        for concurrency in args.concurrency:
            if args.wait_quiet > 0:
                wait_quiet(args.wait_quiet)
            # from before the servers start: their whole lifetime counts as our own CPU
            busy0, own0, wall0 = machine_busy(), own_cpu(), time.monotonic()
            servers = start_servers(names, args, logdir)
            try:
                for server in servers:  # warm-up, discarded
                    run_slice(server, concurrency, args.warmup_requests, 0, args)
                for index in range(args.slices):
                    order = servers if index % 2 == 0 else servers[::-1]
                    for server in order:
                        result = run_slice(server, concurrency, per_slice, args.slice_warmup, args)
                        results[server.variant][concurrency].append(result)
            finally:
                for server in servers:
                    server.stop()
            share = foreign_share(busy0, own0, time.monotonic() - wall0)
            line = "  ".join(
                f"{n} {agg_rps(results[n][concurrency]):.0f}/s" for n in names
            )  # fmt: skip
            note = f"; other processes used {share:.0%} of the CPU" if share is not None else ""
            if share is not None:
                foreign[mode, concurrency] = share
            print(f"{mode:<6} c={concurrency:<3} {line}{note}", flush=True)
    return results, foreign


# -- summary -------------------------------------------------------------------------------


def agg_rps(runs: list[dict[str, Any]]) -> float:
    seconds = sum(r["seconds"] for r in runs)
    return sum(r["requests"] for r in runs) / seconds if seconds else 0.0


def pooled(runs: list[dict[str, Any]], key: str) -> list[float]:
    return [x for r in runs for x in r["samples"][key]]


def cpu_per_req(runs: list[dict[str, Any]]) -> float | None:
    if any(r["server_cpu_s"] is None for r in runs):
        return None
    count = sum(r["requests"] for r in runs)
    return sum(r["server_cpu_s"] for r in runs) / count * 1e6 if count else None


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def summarize(
    results: Results, foreign: Foreign, args: argparse.Namespace
) -> tuple[str, dict[str, Any], bool]:
    lines: list[str] = []
    summary: dict[str, Any] = {"variants": {}, "ratios": []}
    ok = True
    pct = loadgen.percentile

    lines.append("")
    lines.append(
        f"{'variant':<14} {'conc':>4} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'srv us/req':>10} {'requests':>8} {'errors':>6}"
    )
    for name, per_c in results.items():
        for c, runs in per_c.items():
            lat = pooled(runs, "latency")
            row = {
                "rps": agg_rps(runs),
                "p50_ms": pct(lat, 50),
                "p99_ms": pct(lat, 99),
                "server_cpu_us_per_req": cpu_per_req(runs),
                "requests": sum(r["requests"] for r in runs),
                "errors": sum(r["errors"] for r in runs),
                "slices_rps": [r["rps"] for r in runs],
                "slices_cpu_us_per_req": [r.get("server_cpu_us_per_req") for r in runs],
            }
            if VARIANTS[name].mode == "stream":
                for key in ("ttfe", "ttfc"):
                    values = pooled(runs, key)
                    row[f"{key}_p50_ms"] = pct(values, 50)
                    row[f"{key}_p99_ms"] = pct(values, 99)
            summary["variants"].setdefault(name, {})[c] = row
            lines.append(
                f"{name:<14} {c:>4} {row['rps']:>8.1f} {fmt(row['p50_ms']):>8} "
                f"{fmt(row['p99_ms']):>8} {fmt(row['server_cpu_us_per_req'], 0):>10} "
                f"{row['requests']:>8} {row['errors']:>6}"
            )
    streams = [n for n in results if VARIANTS[n].mode == "stream"]
    if streams:
        lines.append("")
        lines.append(
            f"{'stream':<14} {'conc':>4} {'ttfe p50':>9} {'ttfe p99':>9} {'ttfc p50':>9} "
            f"{'ttfc p99':>9} {'end p50':>8} {'end p99':>8}   (ms)"
        )
        for name in streams:
            for c in results[name]:
                row = summary["variants"][name][c]
                lines.append(
                    f"{name:<14} {c:>4} {fmt(row['ttfe_p50_ms']):>9} "
                    f"{fmt(row['ttfe_p99_ms']):>9} {fmt(row['ttfc_p50_ms']):>9} "
                    f"{fmt(row['ttfc_p99_ms']):>9} {fmt(row['p50_ms']):>8} "
                    f"{fmt(row['p99_ms']):>8}"
                )

    lines.append("")
    lines.append(
        "throughput ratios: median over slices of the paired ratio [quartiles], aggregate "
        "(all requests / all time), server CPU per request (denominator / numerator)"
    )
    for label, num, den, target in RATIOS:
        if num not in results or den not in results:
            continue
        for c in args.concurrency:
            a, b = results[num][c], results[den][c]
            paired = [x["rps"] / y["rps"] for x, y in zip(a, b, strict=True) if y["rps"]]
            if not paired:
                continue
            q1, med, q3 = quartiles(paired)
            aggregate = agg_rps(a) / agg_rps(b) if agg_rps(b) else None
            cpu_a, cpu_b = cpu_per_req(a), cpu_per_req(b)
            cpu = cpu_b / cpu_a if cpu_a and cpu_b else None
            verdict = ""
            busy = foreign.get((VARIANTS[num].mode, c))
            if busy is not None and busy > NOISY:
                verdict = f"(noisy: others used {busy:.0%} of the CPU) "
            if target is not None:
                passed = med >= target
                ok = ok and passed
                verdict += f"target >= {target:.2f}: " + (
                    "PASS" if passed else f"MISS by {target - med:.3f}"
                )
            summary["ratios"].append(
                {
                    "label": label.split(":", 1)[1].strip(),
                    "concurrency": c,
                    "median": med,
                    "q1": q1,
                    "q3": q3,
                    "aggregate": aggregate,
                    "cpu": cpu,
                    "target": target,
                    "foreign_cpu": busy,
                }
            )
            lines.append(
                f"{label:<34} c={c:<3} {med:6.3f} [{q1:.3f}-{q3:.3f}]  aggregate "
                f"{fmt(aggregate, 3)}  cpu {fmt(cpu, 3)}   {verdict}"
            )
    if "floor" in results:
        lines.extend(floor_lines(results, summary))
    if "llamon-stream" in results and "raw-stream" in results:
        for c in args.concurrency:
            for key in ("ttfe_p50_ms", "ttfc_p50_ms"):
                raw_v = summary["variants"]["raw-stream"][c][key]
                ll_v = summary["variants"]["llamon-stream"][c][key]
                if raw_v and ll_v:
                    lines.append(
                        f"{'stream: ' + key[:4] + ' p50 llamon / raw':<34} c={c:<3} "
                        f"{ll_v / raw_v:6.3f}   (a time: lower is better)"
                    )
    return "\n".join(lines), summary, ok


def floor_lines(results: Results, summary: dict[str, Any]) -> list[str]:
    """Server CPU per send of each send variant as a multiple of the floor's, and the
    floor targets (informational: not part of the exit status or the ``targets`` verdict)."""
    lines = ["", "server CPU per send against the floor (us/req; x floor), and the floor targets"]
    sends = [n for n in results if VARIANTS[n].mode == "send"]
    floor_rows: list[dict[str, Any]] = []
    for c in results["floor"]:
        base = cpu_per_req(results["floor"][c])
        row: dict[str, Any] = {"concurrency": c, "floor_cpu_us": base, "x_floor": {}}
        parts = []
        for name in sends:
            cpu = cpu_per_req(results[name][c])
            times = cpu / base if cpu and base else None
            row["x_floor"][name] = times
            parts.append(f"{name} {fmt(cpu, 0)} ({fmt(times)}x)")
        lines.append(f"  c={c:<3} " + "  ".join(parts))
        verdicts = []
        llamon_x = row["x_floor"].get("llamon")
        if llamon_x is not None:
            verdicts.append(
                f"llamon cpu <= {FLOOR_CPU_TARGET:.1f}x floor: "
                + ("PASS" if llamon_x <= FLOOR_CPU_TARGET else f"MISS ({llamon_x:.2f}x)")
            )
        if c >= 16 and "llamon" in results and "raw" in results:
            paired = [
                x["rps"] / y["rps"]
                for x, y in zip(results["llamon"][c], results["raw"][c], strict=True)
                if y["rps"]
            ]
            if paired:
                med = statistics.median(paired)
                row["llamon_over_raw"] = med
                verdicts.append(
                    f"llamon >= {FLOOR_SEND_TARGET:.1f}x raw: "
                    + ("PASS" if med >= FLOOR_SEND_TARGET else f"MISS ({med:.2f}x)")
                )
        if verdicts:
            lines.append(f"        {'; '.join(verdicts)}")
        floor_rows.append(row)
    summary["floor"] = floor_rows
    return lines


# -- profiling -----------------------------------------------------------------------------


def profile(args: argparse.Namespace, logdir: Path) -> None:
    """Each named server under cProfile at the highest concurrency; its top functions."""
    concurrency = max(args.concurrency)
    for name in args.profile:
        stats_file = logdir / f"{name}.prof"
        server = Server(name, args, logdir / f"{name}.log", stats_file)
        try:
            server.wait_port()
            per_slice = args.stream_requests if VARIANTS[name].mode == "stream" else args.requests
            result = run_slice(server, concurrency, per_slice * 2, args.warmup_requests, args)
        finally:
            server.stop()
        print(
            f"\n== {name} under cProfile: {result['requests']} requests at c={concurrency}, "
            f"{result['rps']:.1f} req/s (cProfile slows it down) ==",
            flush=True,
        )
        stats = pstats.Stats(str(stats_file))
        stats.sort_stats("tottime").print_stats(args.profile_top)
        stats.sort_stats("cumulative").print_stats("llamon_agent", args.profile_top)
        print(f"(stats kept in {stats_file})")


# -- command line --------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a short check that it all works")
    parser.add_argument("--slices", type=int, default=None, help="measured slices per variant")
    parser.add_argument("--requests", type=int, default=None, help="sends per slice")
    parser.add_argument("--stream-requests", type=int, default=None, help="streams per slice")
    parser.add_argument("--warmup-requests", type=int, default=None, help="per server, discarded")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--duration", type=float, default=30.0, help="time cap per slice (s)")
    parser.add_argument("--warmup", type=float, default=10.0, help="time cap per warm-up (s)")
    parser.add_argument("--max-seconds", type=float, default=300.0, help="server lifetime cap")
    parser.add_argument(
        "--variants", nargs="+", default=list(DEFAULT_VARIANTS), choices=list(VARIANTS),
        metavar="V", help=f"any of {', '.join(VARIANTS)}",
    )  # fmt: skip
    parser.add_argument(
        "--wait-quiet", type=float, default=0.0, metavar="S",
        help="before each comparison wait up to S seconds for other processes to go idle",
    )  # fmt: skip
    parser.add_argument(
        "--no-a2a-otel", action="store_true",
        help=f"serve with {A2A_OTEL_ENV}=false (a2a-sdk's tracing spans off)",
    )  # fmt: skip
    parser.add_argument(
        "--gc-freeze", action="store_true",
        help="diagnosis: every server calls gc.freeze() after building its app",
    )  # fmt: skip
    parser.add_argument(
        "--profile", nargs="+", default=None, choices=list(VARIANTS), metavar="V",
        help="profile these servers (cProfile) instead of benchmarking",
    )  # fmt: skip
    parser.add_argument("--profile-top", type=int, default=25)
    parser.add_argument("--json", type=Path, default=None, help="write the summary here")
    args = parser.parse_args()
    defaults: dict[str, int] = (
        {"slices": 2, "requests": 150, "stream_requests": 80, "warmup_requests": 50}
        if args.quick
        else {"slices": 10, "requests": 1000, "stream_requests": 500, "warmup_requests": 500}
    )
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.slice_warmup = min(20, args.requests // 10)  # refill the new connections
    return args


def main() -> None:
    args = parse_args()
    if args.profile:  # the stats files are kept for pstats / snakeviz
        profile(args, Path(tempfile.mkdtemp(prefix="llamon-bench-profile-")))
        return
    started = time.monotonic()
    otel = child_env(args).get(A2A_OTEL_ENV, "true").lower() == "true"
    print(
        f"A2A server benchmark, Python {platform.python_version()}, {os.cpu_count()} cores: "
        f"{args.slices} slices x {args.requests} sends / {args.stream_requests} streams per "
        f"variant and concurrency {args.concurrency}; a2a-sdk OTel spans "
        f"{'on' if otel else 'off'}{'; gc.freeze() after startup' if args.gc_freeze else ''}; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="llamon-bench-") as tmp:
        results, foreign = measure(args, Path(tmp))
    table, summary, ok = summarize(results, foreign, args)
    print(table)
    shares = ", ".join(f"{m} c={c} {x:.0%}" for (m, c), x in foreign.items()) or "?"
    print(
        f"\ntotal {time.monotonic() - started:.0f} s; other processes' share of the CPU during "
        f"the comparisons: {shares}; targets {'met' if ok else 'MISSED'}"
    )
    if args.json is not None:
        summary["foreign_cpu"] = {f"{m} c={c}": x for (m, c), x in foreign.items()}
        summary["args"] = {k: v for k, v in vars(args).items() if k != "json"}
        args.json.write_text(json.dumps(summary, indent=1, default=str))
    # the exit status is not the verdict: --quick only checks that the benchmark works
    errors = sum(r["errors"] for per_c in results.values() for rs in per_c.values() for r in rs)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
