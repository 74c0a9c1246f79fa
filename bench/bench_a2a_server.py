"""A2A server benchmark: llamon's ``create_app`` against a raw a2a-sdk executor, as ratios.

    python bench/bench_a2a_server.py            # the real figures (~3 minutes)
    python bench/bench_a2a_server.py --quick    # a short run: does the benchmark still work?
    python bench/bench_a2a_server.py --profile llamon   # cProfile of one server, top functions

What is measured (see ``bench/README.md`` for how to read the output):

1. ``message/send`` throughput and p50/p99 latency of a trivial agent: ``llamon`` vs ``raw``.
   Target: llamon >= 0.95 x raw throughput.
2. The failure path: ``llamon-fail`` (the agent raises ``ComponentInvokeError("down")``,
   answered as a failed task with text + data parts) vs the ``raw`` success path.
   Target: >= 0.90 x raw throughput.
3. ``message/stream`` time to the first SSE event and to the first artifact chunk:
   ``llamon-stream`` vs ``raw-stream``.

Every server runs in its own process (``bench/a2a_servers.py``: uvicorn, one worker, log
level warning, a free 127.0.0.1 port reported on stdout) and a fresh one is started for
every round, so a server's in-memory task store only holds that round's tasks. The load
comes from another process (``bench/loadgen.py``: raw asyncio HTTP/1.1, one keep-alive
connection per concurrent worker). In every round each variant is measured at every
concurrency; the order of the variants alternates between rounds (raw first, then
llamon first ...) so drift and noise on the machine hit both sides. A figure is the median
over the rounds; a ratio is llamon's median over raw's median. Everything is bounded:
each measurement lasts ``--duration`` seconds (at most ``--max-requests``), each server
stops when this script closes its stdin (or after ``--max-seconds``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SERVERS = BENCH / "a2a_servers.py"
LOADGEN = BENCH / "loadgen.py"

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
    "raw-stream": Variant("raw-stream", "stream", '"state":"completed"'),
    "llamon-stream": Variant("llamon-stream", "stream", '"state":"completed"'),
    "raw-working": Variant("raw-working", "send", '"state":"completed"'),  # diagnosis only
}
DEFAULT_VARIANTS = ("raw", "llamon", "llamon-fail", "raw-stream", "llamon-stream")
RAW_SIDE = ("raw", "raw-stream", "raw-working")


A2A_OTEL_ENV = "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"
NO_A2A_OTEL = False  # set by --no-a2a-otel


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    if NO_A2A_OTEL:
        env[A2A_OTEL_ENV] = "false"
    src = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    env.setdefault("LLAMON_WORKER_ID", "bench")
    return env


class Server:
    """One benchmark server process; ``stop()`` closes its stdin and waits."""

    def __init__(self, variant: str, log: Path, max_seconds: float, profile: Path | None) -> None:
        cmd = [sys.executable, str(SERVERS), variant, "--max-seconds", str(max_seconds)]
        if profile is not None:
            cmd += ["--profile", str(profile)]
        self.variant = variant
        self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=child_env(),
            cwd=ROOT,
        )
        self.port: int | None = None

    def wait_port(self, timeout: float = 30.0) -> int:
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
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait(timeout=5)
        finally:
            self._log.close()


def run_load(server: Server, concurrency: int, args: argparse.Namespace) -> dict[str, Any]:
    variant = VARIANTS[server.variant]
    cmd = [
        sys.executable,
        str(LOADGEN),
        "--port", str(server.port),
        "--mode", variant.mode,
        "--concurrency", str(concurrency),
        "--duration", str(args.duration),
        "--warmup", str(args.warmup),
        "--max-requests", str(args.max_requests),
        "--expect", variant.expect,
        "--server-pid", str(server.proc.pid),
    ]  # fmt: skip
    out = subprocess.run(
        cmd, capture_output=True, check=True, timeout=args.duration + args.warmup + 60, cwd=ROOT
    )
    result: dict[str, Any] = json.loads(out.stdout)
    if result["errors"]:
        print(
            f"  ! {server.variant} c={concurrency}: {result['errors']} errors, first: "
            f"{result['first_error']}",
            file=sys.stderr,
        )
    return result


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def measure(args: argparse.Namespace, logdir: Path) -> dict[str, dict[int, list[dict[str, Any]]]]:
    names = list(args.variants)
    results: dict[str, dict[int, list[dict[str, Any]]]] = {
        n: {c: [] for c in args.concurrency} for n in names
    }
    for round_no in range(args.rounds):
        # alternate which side goes first: raw-side first on even rounds, llamon first on odd
        order = sorted(
            names,
            key=lambda n: (VARIANTS[n].mode, (n not in RAW_SIDE) == (round_no % 2 == 0)),
        )
        servers = {n: Server(n, logdir / f"{n}.log", args.max_seconds, None) for n in order}
        try:
            for server in servers.values():
                server.wait_port()
            for name in order:
                for concurrency in args.concurrency:
                    result = run_load(servers[name], concurrency, args)
                    results[name][concurrency].append(result)
                    print(
                        f"round {round_no + 1}/{args.rounds}  {name:<14} c={concurrency:<3} "
                        f"{result['rps']:8.1f} req/s  p50 {fmt(result['p50_ms'])} ms  "
                        f"p99 {fmt(result['p99_ms'])} ms  server "
                        f"{fmt(result['server_cpu_us_per_req'], 0)} us/req  "
                        f"client {fmt(result['client_cpu_us_per_req'], 0)} us/req",
                        flush=True,
                    )
                servers[name].stop()
        finally:
            for server in servers.values():
                if server.proc.poll() is None:
                    server.stop()
    return results


def summarize(
    results: dict[str, dict[int, list[dict[str, Any]]]], args: argparse.Namespace
) -> tuple[str, bool]:
    lines: list[str] = []
    ok = True

    def agg(name: str, c: int, key: str) -> float | None:
        return median([r.get(key) for r in results.get(name, {}).get(c, [])])

    lines.append("")
    lines.append(
        f"{'variant':<14} {'conc':>4} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'srv us/req':>10} {'errors':>6}"
    )
    for name in results:
        for c in args.concurrency:
            runs = results[name][c]
            lines.append(
                f"{name:<14} {c:>4} {fmt(agg(name, c, 'rps'), 1):>8} "
                f"{fmt(agg(name, c, 'p50_ms')):>8} {fmt(agg(name, c, 'p99_ms')):>8} "
                f"{fmt(agg(name, c, 'server_cpu_us_per_req'), 0):>10} "
                f"{sum(r['errors'] for r in runs):>6}"
            )
    if "raw-stream" in results or "llamon-stream" in results:
        lines.append("")
        lines.append(
            f"{'stream':<14} {'conc':>4} {'ttfe p50':>9} {'ttfe p99':>9} {'ttfc p50':>9} "
            f"{'ttfc p99':>9} {'end p50':>8} {'streams/s':>9}"
        )
        for name in ("raw-stream", "llamon-stream"):
            for c in args.concurrency if name in results else ():
                lines.append(
                    f"{name:<14} {c:>4} {fmt(agg(name, c, 'ttfe_p50_ms')):>9} "
                    f"{fmt(agg(name, c, 'ttfe_p99_ms')):>9} {fmt(agg(name, c, 'ttfc_p50_ms')):>9} "
                    f"{fmt(agg(name, c, 'ttfc_p99_ms')):>9} {fmt(agg(name, c, 'p50_ms')):>8} "
                    f"{fmt(agg(name, c, 'rps'), 1):>9}"
                )

    def ratio_line(label: str, name: str, base: str, target: float | None) -> None:
        nonlocal ok
        for c in args.concurrency:
            num, den = agg(name, c, "rps"), agg(base, c, "rps")
            if num is None or den is None or den == 0:
                continue
            value = num / den
            paired = [
                a["rps"] / b["rps"]
                for a, b in zip(results[name][c], results[base][c], strict=False)
                if b["rps"]
            ]
            verdict = ""
            if target is not None:
                passed = value >= target
                ok = ok and passed
                verdict = (
                    f"target >= {target:.2f}: "
                    + ("PASS" if passed else f"MISS by {target - value:.3f}")
                )
            lines.append(
                f"{label:<34} c={c:<3} {value:6.3f}   per round "
                f"[{', '.join(f'{p:.3f}' for p in paired)}]   {verdict}"
            )

    lines.append("")
    lines.append("ratios (throughput, median of rounds; per-round paired ratios in brackets)")
    if "llamon" in results and "raw" in results:
        ratio_line("send:   llamon / raw", "llamon", "raw", SEND_TARGET)
    if "llamon-fail" in results and "raw" in results:
        ratio_line("fail:   llamon-fail / raw success", "llamon-fail", "raw", FAIL_TARGET)
    if "llamon" in results and "raw-working" in results:
        ratio_line("send:   llamon / raw-working", "llamon", "raw-working", None)
    if "llamon-stream" in results and "raw-stream" in results:
        ratio_line("stream: llamon / raw (streams/s)", "llamon-stream", "raw-stream", None)
        for c in args.concurrency:
            for key in ("ttfe_p50_ms", "ttfc_p50_ms"):
                raw_v, ll_v = agg("raw-stream", c, key), agg("llamon-stream", c, key)
                if raw_v and ll_v:
                    lines.append(
                        f"{'stream: ' + key[:4] + ' p50 llamon / raw':<34} c={c:<3} "
                        f"{ll_v / raw_v:6.3f}   (time: lower is better)"
                    )
    return "\n".join(lines), ok


def profile(args: argparse.Namespace, logdir: Path) -> None:
    """One server under cProfile at the highest concurrency; print its top functions."""
    for name in args.profile:
        stats_file = logdir / f"{name}.prof"
        server = Server(name, logdir / f"{name}.log", args.max_seconds, stats_file)
        try:
            server.wait_port()
            result = run_load(server, max(args.concurrency), args)
        finally:
            server.stop()
        print(
            f"\n== {name} under cProfile: {result['requests']} requests, "
            f"{result['rps']:.1f} req/s (cProfile slows it down) ==",
            flush=True,
        )
        stats = pstats.Stats(str(stats_file))
        stats.sort_stats("tottime").print_stats(args.profile_top)
        stats.sort_stats("cumulative").print_stats("llamon_agent", args.profile_top)
        print(f"(stats kept in {stats_file})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a short check that it all works")
    parser.add_argument("--duration", type=float, default=None, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=None, help="discarded seconds per run")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--max-requests", type=int, default=100_000, help="per measurement")
    parser.add_argument("--max-seconds", type=float, default=240.0, help="server lifetime cap")
    parser.add_argument(
        "--variants", nargs="+", default=list(DEFAULT_VARIANTS), choices=list(VARIANTS),
        metavar="V", help=f"any of {', '.join(VARIANTS)}",
    )
    parser.add_argument(
        "--no-a2a-otel", action="store_true",
        help="serve with OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false (a2a-sdk's spans off)",
    )
    parser.add_argument(
        "--profile", nargs="+", default=None, choices=list(VARIANTS), metavar="V",
        help="profile these servers instead of benchmarking",
    )  # fmt: skip
    parser.add_argument("--profile-top", type=int, default=25)
    parser.add_argument("--json", type=Path, default=None, help="write all results here")
    args = parser.parse_args()
    global NO_A2A_OTEL
    NO_A2A_OTEL = args.no_a2a_otel
    quick = args.quick
    args.duration = args.duration or (1.5 if quick else 4.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if quick else 1.0)
    args.rounds = args.rounds or (1 if quick else 3)

    started = time.monotonic()
    if args.profile:  # the stats files are kept for pstats / snakeviz
        profile(args, Path(tempfile.mkdtemp(prefix="llamon-bench-profile-")))
        return
    with tempfile.TemporaryDirectory(prefix="llamon-bench-") as tmp:
        logdir = Path(tmp)
        print(
            f"A2A server benchmark: {platform.python_version()} on {os.cpu_count()} cores, "
            f"{args.rounds} round(s) x {len(args.variants)} variants x c={args.concurrency}, "
            f"{args.duration:g} s each after {args.warmup:g} s warm-up",
            flush=True,
        )
        results = measure(args, logdir)
        table, ok = summarize(results, args)
        print(table)
        print(f"\ntotal {time.monotonic() - started:.0f} s; targets {'met' if ok else 'MISSED'}")
        if args.json is not None:
            args.json.write_text(json.dumps(results, indent=1))
    # the exit status is not the verdict: --quick only checks the benchmark still works
    errors = sum(r["errors"] for v in results.values() for runs in v.values() for r in runs)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
