"""A lean A2A JSON-RPC load generator: raw asyncio HTTP/1.1, keep-alive, no client library.

``python bench/loadgen.py --port P --mode send|stream --concurrency N --duration S``
prints one JSON object on stdout with the counts and latencies (milliseconds).

Each of the N workers owns one keep-alive connection (``asyncio.open_connection``) and
sends one request after another, so N is the number of requests in flight. The first
``--warmup`` seconds are run the same way and discarded. Then the workers run for
``--duration`` seconds (or until ``--max-requests``); the requests completed inside that
window are counted (throughput = completed / window).

* ``send``: ``message/send``; latency is request written -> whole response read. The
  body must hold ``--expect`` (``"state":"completed"`` by default), else it is an error.
* ``stream``: ``message/stream`` (SSE over chunked encoding); per request the time to the
  first ``data:`` event (ttfe), to the first ``artifact-update`` event (ttfc), and to the
  end of the stream (latency). The last event must hold ``--expect``.

Why not httpx: its own CPU per request grows with concurrency and would be measured
instead of the server (see DESIGN.md). This client spends a few tens of microseconds
per request, so the server process (one core) is the bottleneck on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass, field

SEND_TEMPLATE = (
    '{"jsonrpc":"2.0","id":%d,"method":"%s","params":{"message":{"kind":"message",'
    '"role":"user","messageId":"bench-%d-%d","parts":[{"kind":"text","text":"ping"}]}}}'
)


class ProtocolError(Exception):
    """The server answered something this client does not understand."""


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    ttfe: list[float] = field(default_factory=list)
    ttfc: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None

    def error(self, text: str) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = text[:500]


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

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

    async def _chunks(self) -> asyncio.AsyncIterator[bytes]:  # type: ignore[name-defined]
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
        assert self.reader is not None and self.writer is not None
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

    async def stream(self, body: bytes, t0: float) -> tuple[float, float | None, bytes]:
        """Send a message/stream; (ttfe, ttfc, last event) with times since ``t0``."""
        assert self.reader is not None and self.writer is not None
        self.writer.write(self.request(body, stream=True))
        status, headers = await self._head()
        if status != 200 or headers.get(b"transfer-encoding") != b"chunked":
            raise ProtocolError(f"HTTP {status} headers {headers!r}")
        ttfe = -1.0
        ttfc: float | None = None
        last = b""
        buffer = b""
        async for chunk in self._chunks():
            buffer += chunk.replace(b"\r\n", b"\n")
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                data = b"\n".join(
                    line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")
                )
                if not data:
                    continue  # a comment (ping) or an empty event
                now = time.perf_counter() - t0
                if ttfe < 0:
                    ttfe = now
                if ttfc is None and b'"artifact-update"' in data:
                    ttfc = now
                last = data
        if ttfe < 0:
            raise ProtocolError("the stream ended without a data event")
        return ttfe, ttfc, last


async def worker(
    index: int,
    args: argparse.Namespace,
    phase: dict[str, object],
    stats: Stats,
    budget: list[int],
) -> None:
    method = "message/stream" if args.mode == "stream" else "message/send"
    expect = args.expect.encode()
    conn = Connection(args.host, args.port)
    await conn.open()
    seq = 0
    try:
        while not phase["stop"]:
            seq += 1
            body = (SEND_TEMPLATE % (seq, method, index, seq)).encode()
            t0 = time.perf_counter()
            try:
                if args.mode == "stream":
                    ttfe, ttfc, payload = await conn.stream(body, t0)
                else:
                    payload = await conn.send(body)
                elapsed = time.perf_counter() - t0
                if expect not in payload:
                    raise ProtocolError(f"{args.expect!r} not in {payload[:400]!r}")
            except (ProtocolError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                if phase["measure"]:
                    stats.error(f"{type(exc).__name__}: {exc}")
                conn.close()
                await conn.open()
                continue
            if not phase["measure"] or budget[0] <= 0:
                continue  # completed outside the measured window
            budget[0] -= 1
            stats.latencies.append(elapsed * 1000)
            if args.mode == "stream":
                stats.ttfe.append(ttfe * 1000)
                if ttfc is not None:
                    stats.ttfc.append(ttfc * 1000)
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
    phase: dict[str, object] = {"stop": False, "measure": False}
    stats = Stats()
    budget = [args.max_requests]
    workers = [
        asyncio.create_task(worker(i, args, phase, stats, budget)) for i in range(args.concurrency)
    ]
    await asyncio.sleep(args.warmup)
    server_cpu0 = process_cpu(args.server_pid)
    own_cpu0 = time.process_time()
    phase["measure"] = True
    started = time.perf_counter()
    deadline = started + args.duration
    while time.perf_counter() < deadline and budget[0] > 0:
        if all(w.done() for w in workers):
            break
        await asyncio.sleep(0.01)
    phase["measure"] = False
    phase["stop"] = True
    measured_until = time.perf_counter()
    own_cpu = time.process_time() - own_cpu0
    server_cpu1 = process_cpu(args.server_pid)
    done, pending = await asyncio.wait(workers, timeout=args.request_timeout)
    for task in pending:
        task.cancel()
    for task in done:
        if task.exception() is not None:
            stats.error(f"worker: {task.exception()!r}")
    finished = time.perf_counter()
    elapsed = measured_until - started
    count = len(stats.latencies)
    result: dict[str, object] = {
        "mode": args.mode,
        "concurrency": args.concurrency,
        "requests": count,
        "errors": stats.errors,
        "first_error": stats.first_error,
        "seconds": round(elapsed, 3),
        "drain_seconds": round(finished - measured_until, 3),
        "rps": count / elapsed if elapsed > 0 else 0.0,
        "p50_ms": percentile(stats.latencies, 50),
        "p99_ms": percentile(stats.latencies, 99),
        "client_cpu_us_per_req": own_cpu / count * 1e6 if count else None,
        "server_cpu_us_per_req": (server_cpu1 - server_cpu0) / count * 1e6
        if count and server_cpu0 is not None and server_cpu1 is not None
        else None,
    }
    if args.mode == "stream":
        result.update(
            ttfe_p50_ms=percentile(stats.ttfe, 50),
            ttfe_p99_ms=percentile(stats.ttfe, 99),
            ttfc_p50_ms=percentile(stats.ttfc, 50),
            ttfc_p99_ms=percentile(stats.ttfc, 99),
            streams_without_chunk=count - len(stats.ttfc),
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=("send", "stream"), default="send")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=1.0, help="discarded seconds first")
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument("--request-timeout", type=float, default=10.0)
    parser.add_argument("--server-pid", type=int, default=None, help="report its CPU use")
    parser.add_argument("--expect", default='"state":"completed"')
    args = parser.parse_args()
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("this load generator only targets the loopback interface")
    result = asyncio.run(run(args))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
