"""The server processes the replica benchmarks measure, and what they read of the machine.

* ``llamon_serve(worker_id, target, options)``: ``python -m llamon_agent serve TARGET
  --port 0 OPTIONS`` with its own ``LLAMON_HOME`` and ``LLAMON_WORKER_ID``; ready once it
  prints its ``llamon: serving ... at URL`` line. Stopped with SIGTERM (SIGKILL after
  ``STOP_TIMEOUT`` s).
* ``a2a_variant(variant)``: ``python bench/a2a_servers.py VARIANT``; ready once it prints
  ``PORT n``; stopped by closing its stdin.
* ``rss_mib(pid)``: ``VmRSS`` of a process; ``Machine``: load average and the share of the
  CPU the machine spent, all processes together, between two readings.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "READY_TIMEOUT",
    "STOP_TIMEOUT",
    "Machine",
    "Proc",
    "a2a_variant",
    "llamon_serve",
    "raise_fd_limit",
    "rss_mib",
]

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0


@dataclass
class Proc:
    """A running server: its name, process, port, and the lines it wrote so far."""

    name: str
    process: asyncio.subprocess.Process
    port: int
    lines: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, **extra}
    paths = (str(ROOT / "src"), str(BENCH), env.get("PYTHONPATH", ""))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


async def _drain(stream: asyncio.StreamReader, into: list[str]) -> None:
    """Keep reading a pipe (a full one would block the server); keep the last lines."""
    while line := await stream.readline():
        into.append(line.decode(errors="replace"))
        del into[:-200]


async def _stop(process: asyncio.subprocess.Process, close_stdin: bool) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            if close_stdin and process.stdin is not None:
                process.stdin.close()
            else:
                process.send_signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()


async def _ready_line(stream: asyncio.StreamReader, marker: str, lines: list[str]) -> str:
    """The first line holding ``marker``; ``RuntimeError`` if the stream ends first."""
    async with asyncio.timeout(READY_TIMEOUT):
        while raw := await stream.readline():
            line = raw.decode(errors="replace")
            lines.append(line)
            if marker in line:
                return line
    raise RuntimeError(f"the server exited before it was ready: {''.join(lines[-20:])}")


@asynccontextmanager
async def llamon_serve(
    worker_id: str, target: str, options: Sequence[str], env: dict[str, str] | None = None
) -> AsyncIterator[Proc]:
    """``llamon serve TARGET`` as worker ``worker_id`` (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="llamon-bench-") as home:
        extra = {**(env or {}), "LLAMON_HOME": home, "LLAMON_WORKER_ID": worker_id}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "llamon_agent", "serve", target, "--port", "0", *options,
            env=_env(extra), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        assert process.stderr is not None
        lines: list[str] = []
        drain: asyncio.Task[None] | None = None
        try:
            line = await _ready_line(process.stderr, "llamon: serving", lines)
            url = line.split(" at ", 1)[1].split(" ", 1)[0]
            drain = asyncio.create_task(_drain(process.stderr, lines))
            yield Proc(worker_id, process, int(url.rstrip("/").rsplit(":", 1)[1]), lines)
        finally:
            await _stop(process, close_stdin=False)
            if drain is not None:
                await drain


@asynccontextmanager
async def a2a_variant(variant: str, *extra: str) -> AsyncIterator[Proc]:
    """``python bench/a2a_servers.py VARIANT EXTRA...`` (see the module docstring)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(BENCH / "a2a_servers.py"), variant, "--max-seconds", "3600", *extra,
        env=_env({"LLAMON_WORKER_ID": f"bench-{variant}"}), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True, cwd=ROOT,
    )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    drain: asyncio.Task[None] | None = None
    try:
        line = await _ready_line(process.stdout, "PORT ", lines)
        drain = asyncio.create_task(_drain(process.stdout, lines))
        yield Proc(variant, process, int(line.split()[1]), lines)
    finally:
        await _stop(process, close_stdin=True)
        if drain is not None:
            await drain


def rss_mib(pid: int) -> float:
    """The resident set size of ``pid`` in MiB (``VmRSS``); 0.0 once it is gone."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's open-file limit (inherited by the servers) to ``wanted`` if the
    hard limit allows; the soft limit now in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        soft = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return soft


def _busy_and_total() -> tuple[float, float]:
    """CPU seconds the whole machine was busy, and elapsed over all CPUs (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]  # idle + iowait
    ticks = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - idle) / ticks, sum(fields) / ticks


@dataclass
class Machine:
    """How busy the machine is: ``Machine.now()`` then ``since()`` / ``describe()``."""

    busy: float
    total: float
    at: float

    @classmethod
    def now(cls) -> Machine:
        busy, total = _busy_and_total()
        return cls(busy, total, time.monotonic())

    def since(self) -> float:
        """The share of all CPUs busy (every process, ours included) since this reading."""
        busy, total = _busy_and_total()
        return (busy - self.busy) / (total - self.total) if total > self.total else 0.0

    def elapsed_cpu(self) -> float:
        """CPU seconds the machine had since this reading (wall time x CPUs)."""
        return _busy_and_total()[1] - self.total

    @staticmethod
    def load() -> str:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
