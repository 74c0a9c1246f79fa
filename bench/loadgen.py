"""A lean A2A JSON-RPC load generator: raw asyncio HTTP/1.1, keep-alive, no client library.

``python bench/loadgen.py --port P --mode send|stream --concurrency N --requests R``
prints one JSON object on stdout with the counts and latencies (milliseconds).

Each of the N workers owns one keep-alive connection (``asyncio.open_connection``) and
sends one request after another, so N is the number of requests in flight. First a
warm-up (``--warmup-requests`` completed requests, at most ``--warmup`` seconds) is run
and discarded; then the measured window opens and lasts until ``--requests`` requests
have completed in it (at most ``--duration`` seconds; with ``--requests 0`` exactly
``--duration`` seconds). Throughput = requests completed in the window / its length.
A fixed request count makes both servers of a comparison hold the same number of tasks
(a2a-sdk's in-memory store keeps them all) at the same point, so garbage collection
weighs the same on both.

* ``send``: ``message/send``; latency is request written -> whole response read. The
  body must hold ``--expect`` (``"state":"completed"`` by default), else it is an error.
* ``stream``: ``message/stream`` (SSE over chunked encoding); per request the time to the
  first ``data:`` event (ttfe), to the first ``artifact-update`` event (ttfc), and to the
  end of the stream (latency). The last event must hold ``--expect``. With ``--allow-cut``
  a stream the server breaks off after at least one event (the connection closes before
  the last chunk, as a2a-sdk does when an executor raises) ends at the cut and its "last
  event" is ``(stream cut)``: pass ``--expect '(stream cut)'`` to require exactly that.

Errors are counted, the first one is kept whole, and ``error_kinds`` counts them by a
short key (the JSON-RPC error code and message, the task state found, or the exception).

Why not httpx: its own CPU per request grows with concurrency and would be measured
instead of the server (see DESIGN.md). This client spends ~100 us of CPU per send
(~500 us per 6-event stream) against the server's ~1000 us (~2000 us): the server
process, on one core, is the bottleneck on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

SEND_TEMPLATE = (
    '{"jsonrpc":"2.0","id":%d,"method":"%s","params":{"message":{"kind":"message",'
    '"role":"user","messageId":"bench-%s-%d-%d","parts":[{"kind":"text","text":"ping"}]}}}'
)


STREAM_CUT = b"(stream cut)"
"""The "last event" of a stream the server broke off (``--allow-cut``)."""


class ProtocolError(Exception):
    """The server answered something this client does not understand."""


_RPC_ERROR = re.compile(rb'"code":\s*(-?\d+)\s*,\s*"message":\s*"([^"]{0,80})')
_STATE = re.compile(rb'"state":\s*"([a-z-]+)"')


def error_key(payload: bytes) -> str:
    """A short, id-free description of an unexpected answer, to count errors by kind."""
    if payload == STREAM_CUT:
        return "stream cut"
    found = _RPC_ERROR.search(payload)
    if found is not None and b'"error"' in payload:
        return f"JSON-RPC error {found[1].decode()}: {found[2].decode(errors='replace')}"
    states = _STATE.findall(payload)
    if states:
        return f"state {states[-1].decode()}"
    return f"answer {payload[:60]!r}"


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    ttfe: list[float] = field(default_factory=list)
    ttfc: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None
    kinds: Counter[str] = field(default_factory=Counter)

    def error(self, text: str, key: str | None = None) -> None:
        self.errors += 1
        self.kinds[key or text[:100]] += 1
        if self.first_error is None:
            self.first_error = text[:500]


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.head_ns = 0
        """``time.time_ns()`` when the last streaming answer's HTTP head arrived."""

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    def request(self, body: bytes, stream: bool) -> bytes:
        accept = b"text/event-stream" if stream else b"application/json"
        return (
            b"POST / HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
            b"Accept: %s\r\nContent-Length: %d\r\n\r\n"
            % (self.host.encode(), self.port, accept, len(body))
        ) + body

    async def _head(self) -> tuple[int, dict[bytes, bytes]]:
        assert self.reader is not None
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(b":")
                headers[name.strip().lower()] = value.strip()
        return status, headers

    async def _chunks(self) -> AsyncIterator[bytes]:
        assert self.reader is not None
        while True:
            size_line = await self.reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")  # no trailers expected
                return
            data = await self.reader.readexactly(size + 2)
            yield data[:-2]

    async def send(self, body: bytes) -> bytes:
        assert self.reader is not None
        assert self.writer is not None
        self.writer.write(self.request(body, stream=False))
        status, headers = await self._head()
        if b"content-length" in headers:
            payload = await self.reader.readexactly(int(headers[b"content-length"]))
        elif headers.get(b"transfer-encoding") == b"chunked":
            payload = b"".join([chunk async for chunk in self._chunks()])
        else:
            raise ProtocolError(f"no length in response headers {headers!r}")
        if status != 200:
            raise ProtocolError(f"HTTP {status}: {payload[:300]!r}")
        return payload

    async def events(self, body: bytes) -> AsyncIterator[bytes]:
        """Send ``body`` as a streaming request; yield each SSE event's data as it arrives.

        Comments (pings) and empty events are skipped; ``head_ns`` is set when the HTTP
        head arrives. It ends with the stream's last chunk; ``ProtocolError`` when the
        answer is not a chunked HTTP 200, and ``asyncio.IncompleteReadError`` when the
        server cuts the stream (the connection is then dead: reopen it).
        """
        assert self.writer is not None
        self.writer.write(self.request(body, stream=True))
        status, headers = await self._head()
        self.head_ns = time.time_ns()
        if status != 200 or headers.get(b"transfer-encoding") != b"chunked":
            raise ProtocolError(f"HTTP {status} headers {headers!r}")
        buffer = b""
        async for chunk in self._chunks():
            buffer += chunk.replace(b"\r\n", b"\n")
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                data = b"\n".join(
                    line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")
                )
                if data:
                    yield data

    async def stream(
        self, body: bytes, t0: float, allow_cut: bool = False
    ) -> tuple[float, float | None, bytes]:
        """Send a message/stream; (ttfe, ttfc, last event) with times since ``t0``.

        With ``allow_cut``, a stream the server breaks off after its first event returns
        ``STREAM_CUT`` as its last event (the connection is then dead: reopen it).
        """
        ttfe = -1.0
        ttfc: float | None = None
        last = b""
        try:
            async for data in self.events(body):
                now = time.perf_counter() - t0
                if ttfe < 0:
                    ttfe = now
                if ttfc is None and b'"artifact-update"' in data:
                    ttfc = now
                last = data
        except asyncio.IncompleteReadError:
            if not allow_cut or ttfe < 0:
                raise
            return ttfe, ttfc, STREAM_CUT
        if ttfe < 0:
            raise ProtocolError("the stream ended without a data event")
        return ttfe, ttfc, last


class Phase:
    """Warm-up, then the measured window, then stop; shared by the workers."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.server_pid: int | None = args.server_pid
        self.warm_left = args.warmup_requests or sys.maxsize  # 0: warm up by time only
        self.left = args.requests or args.max_requests
        self.measuring = False
        self.stop = False
        self.begun = asyncio.Event()
        self.ended = asyncio.Event()
        self.started = self.finished = 0.0
        self.cpu = [0.0, 0.0]
        self.server_cpu: list[float | None] = [None, None]

    def warmed(self) -> None:
        """One warm-up request done; the window opens after the last one."""
        self.warm_left -= 1
        if self.warm_left <= 0 and not self.measuring and not self.stop:
            self.begin()

    def begin(self) -> None:
        if self.measuring or self.stop:
            return
        self.server_cpu[0] = process_cpu(self.server_pid)
        self.cpu[0] = time.process_time()
        self.started = time.perf_counter()
        self.measuring = True
        self.begun.set()

    def end(self) -> None:
        if self.stop:
            return
        self.finished = time.perf_counter()
        self.cpu[1] = time.process_time()
        self.server_cpu[1] = process_cpu(self.server_pid)
        self.measuring = False
        self.stop = True
        self.ended.set()


async def worker(index: int, args: argparse.Namespace, phase: Phase, stats: Stats) -> None:
    method = "message/stream" if args.mode == "stream" else "message/send"
    expect = args.expect.encode()
    conn = Connection(args.host, args.port)
    await conn.open()
    seq = 0
    # a fresh messageId for every send of every run: a repeated one is answered with its
    # first task (idempotent send) and would measure a lookup, not a run
    run = os.urandom(6).hex()
    ttfe: float = 0.0
    ttfc: float | None = None
    try:
        while not phase.stop:
            seq += 1
            body = (SEND_TEMPLATE % (seq, method, run, index, seq)).encode()
            t0 = time.perf_counter()
            try:
                if args.mode == "stream":
                    ttfe, ttfc, payload = await conn.stream(body, t0, args.allow_cut)
                else:
                    payload = await conn.send(body)
                elapsed = time.perf_counter() - t0
                if payload == STREAM_CUT:  # the server closed this connection
                    conn.close()
                    await conn.open()
                if expect not in payload:
                    stats.error(f"{args.expect!r} not in {payload[:400]!r}", error_key(payload))
                    continue
            except (ProtocolError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                stats.error(f"{type(exc).__name__}: {exc}", f"{type(exc).__name__}: {exc}"[:100])
                conn.close()
                await conn.open()
                continue
            if not phase.measuring:
                if not phase.stop:
                    phase.warmed()
                continue  # completed before (or after) the measured window
            stats.latencies.append(elapsed * 1000)
            if args.mode == "stream":
                stats.ttfe.append(ttfe * 1000)
                if ttfc is not None:
                    stats.ttfc.append(ttfc * 1000)
            phase.left -= 1
            if phase.left <= 0:
                phase.end()
    finally:
        conn.close()


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def process_cpu(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``), else None."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


async def run(args: argparse.Namespace) -> dict[str, object]:
    phase = Phase(args)
    stats = Stats()
    workers = [asyncio.create_task(worker(i, args, phase, stats)) for i in range(args.concurrency)]
    try:
        await asyncio.wait_for(phase.begun.wait(), timeout=args.warmup)
    except TimeoutError:  # the warm-up's time cap came first
        phase.begin()
    try:
        await asyncio.wait_for(phase.ended.wait(), timeout=args.duration)
    except TimeoutError:  # the window's time cap came first
        phase.end()
    done, pending = await asyncio.wait(workers, timeout=args.request_timeout)
    for task in pending:  # a request still unanswered --request-timeout s after the window
        task.cancel()
        stats.error(f"no answer {args.request_timeout} s after the window closed", "no answer")
    for task in done:
        if task.exception() is not None:
            stats.error(f"worker: {task.exception()!r}")
    elapsed = phase.finished - phase.started
    count = len(stats.latencies)
    cpu0, cpu1 = phase.server_cpu
    result: dict[str, object] = {
        "mode": args.mode,
        "concurrency": args.concurrency,
        "requests": count,
        "errors": stats.errors,
        "first_error": stats.first_error,
        "error_kinds": dict(stats.kinds),
        "seconds": round(elapsed, 3),
        "rps": count / elapsed if elapsed > 0 else 0.0,
        "p50_ms": percentile(stats.latencies, 50),
        "p99_ms": percentile(stats.latencies, 99),
        "client_cpu_s": phase.cpu[1] - phase.cpu[0],
        "server_cpu_s": cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None,
        "client_cpu_us_per_req": (phase.cpu[1] - phase.cpu[0]) / count * 1e6 if count else None,
        "server_cpu_us_per_req": (cpu1 - cpu0) / count * 1e6
        if count and cpu0 is not None and cpu1 is not None
        else None,
    }
    if args.samples:
        result["samples"] = {"latency": stats.latencies, "ttfe": stats.ttfe, "ttfc": stats.ttfc}
    if args.mode == "stream":
        result.update(
            ttfe_p50_ms=percentile(stats.ttfe, 50),
            ttfe_p99_ms=percentile(stats.ttfe, 99),
            ttfc_p50_ms=percentile(stats.ttfc, 50),
            ttfc_p99_ms=percentile(stats.ttfc, 99),
            streams_without_chunk=count - len(stats.ttfc),
        )
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=("send", "stream"), default="send")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument(
        "--requests", type=int, default=0, help="measure this many requests (0: use --duration)"
    )
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds at most")
    parser.add_argument("--warmup-requests", type=int, default=0, help="discarded requests first")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds at most")
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument("--request-timeout", type=float, default=10.0)
    parser.add_argument("--server-pid", type=int, default=None, help="report its CPU use")
    parser.add_argument("--expect", default='"state":"completed"')
    parser.add_argument(
        "--allow-cut", action="store_true",
        help="stream: a stream broken off after its first event ends there, as '(stream cut)'",
    )  # fmt: skip
    parser.add_argument("--samples", action="store_true", help="include every latency sample")
    args = parser.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("this load generator only targets the loopback interface")
    return args


def main() -> None:
    result = asyncio.run(run(parse_args()))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
