"""N ``llamon serve`` replicas on one shared PostgreSQL store, behind one real nginx.

``async with replicas(3, database_url=dsn) as fleet:`` starts three ``python -m llamon_agent
serve --store postgres --database-url DSN`` processes of the demo agent (or ``agent``,
``module:agent``) on free loopback ports, each with its own ``LLAMON_HOME`` and worker id
(``replica-0``, ``replica-1``, ...), and one nginx (``daemon off``, one worker, its own
prefix directory and configuration in a temporary directory; the system's nginx service is
never touched) that balances round-robin over them:

* keep-alive to the replicas is ON (``keepalive 32`` idle connections per nginx worker,
  closed by nginx after 4 s idle, before uvicorn's 5 s, so nginx never reuses a connection
  a replica is closing); ``upstream_keepalive=0`` turns it off (a fresh connection per
  request);
* ``proxy_next_upstream error timeout`` (nginx's default set, written out): a request whose
  replica refuses the connection or fails before the request was sent goes to the next
  replica; a POST already sent is not retried (nginx never retries non-idempotent requests
  unless told to); a replica that failed once is skipped for ``FAIL_TIMEOUT``
  (``max_fails=1``);
* the access log holds one line per request: the ``X-Test-Tag`` request header, the status,
  ``$upstream_addr`` (every replica tried, ``", "``-separated, the last one answered) and
  ``$upstream_status``. ``fleet.access_log()`` reads it as ``AccessLine`` records.

On entry it waits until every replica printed its ``serving`` line and nginx answers
``GET /.well-known/agent-card.json``. On exit nginx and the replicas get SIGTERM, then
SIGKILL (their whole process group) after ``STOP_TIMEOUT`` seconds: nothing is left
running. ``fleet.kill(i)`` SIGKILLs replica ``i`` and waits for it to be gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from llamon_agent.core.settings import HOME_ENV, WORKER_ID_ENV
from llamon_agent.demo import demo_agent_path

__all__ = [
    "FAIL_TIMEOUT",
    "READY_TIMEOUT",
    "STOP_TIMEOUT",
    "TAG_HEADER",
    "AccessLine",
    "Fleet",
    "Replica",
    "nginx_path",
    "replicas",
]

READY_TIMEOUT = 30.0
"""Seconds a replica or nginx may take to be ready."""

STOP_TIMEOUT = 10.0
"""Seconds a process may take to stop after SIGTERM before it is SIGKILLed."""

TAG_HEADER = "X-Test-Tag"
"""The request header whose value the access log records (to find a request's line)."""

FAIL_TIMEOUT = "30s"
"""How long nginx skips a replica after one failed attempt (``max_fails=1``)."""

_LOG_FIELDS = 4


def nginx_path() -> str | None:
    """The nginx executable (``PATH``, then ``/usr/sbin``), or None when not installed."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


@dataclass
class Replica:
    """One ``llamon serve`` process: its index, worker id, process and base URL."""

    index: int
    worker_id: str
    process: asyncio.subprocess.Process
    url: str
    stderr: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, as nginx's ``$upstream_addr`` names this replica."""
        return self.url.split("://", 1)[1].rstrip("/")

    @property
    def pid(self) -> int:
        """The process id (its CPU time is in ``/proc/PID/stat``)."""
        return self.process.pid


@dataclass(frozen=True)
class AccessLine:
    """One nginx access-log line: the request's tag, status, every replica tried (in
    order; the last one answered) and their statuses (``"502, 200"``)."""

    tag: str
    status: int
    upstreams: tuple[str, ...]
    upstream_status: str

    @property
    def answered_by(self) -> str:
        """The address of the replica whose answer the client got."""
        return self.upstreams[-1]


@dataclass
class Fleet:
    """The running replicas and nginx in front of them (``url``)."""

    replicas: list[Replica]
    url: str
    nginx: asyncio.subprocess.Process
    access_log_path: Path

    def access_log(self) -> list[AccessLine]:
        """Every access-log line so far (requests without a tag have tag ``"-"``)."""
        lines: list[AccessLine] = []
        for raw in self.access_log_path.read_text().splitlines():
            parts = raw.split("|")
            if len(parts) != _LOG_FIELDS:
                continue
            tag, status, upstreams, upstream_status = parts
            lines.append(
                AccessLine(tag, int(status), tuple(upstreams.split(", ")), upstream_status)
            )
        return lines

    async def logged(self, tags: list[str], within: float = 5.0) -> dict[str, AccessLine]:
        """The access-log line of each of ``tags``, once all are written (nginx writes the
        line just after the response: a client may be a moment early);
        ``TimeoutError`` when one is still missing after ``within`` seconds."""
        deadline = time.monotonic() + within
        while True:
            found = {line.tag: line for line in self.access_log() if line.tag in tags}
            if len(found) == len(set(tags)):
                return found
            if time.monotonic() > deadline:
                missing = sorted(set(tags) - set(found))
                raise TimeoutError(f"no access-log line for {missing} after {within} s")
            await asyncio.sleep(0.01)

    def by_address(self, address: str) -> Replica:
        """The replica listening at ``address`` (``127.0.0.1:PORT``)."""
        for replica in self.replicas:
            if replica.address == address:
                return replica
        raise KeyError(address)

    async def kill(self, index: int) -> None:
        """SIGKILL replica ``index`` and wait until it is gone (its port refuses)."""
        process = self.replicas[index].process
        if process.returncode is None:
            process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(process.wait(), STOP_TIMEOUT)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _nginx_conf(prefix: Path, port: int, addresses: list[str], keepalive: int) -> str:
    servers = "\n".join(
        f"        server {address} max_fails=1 fail_timeout={FAIL_TIMEOUT};"
        for address in addresses
    )
    user = "user root;\n" if os.geteuid() == 0 else ""
    upstream_keepalive = (
        f"        keepalive {keepalive};\n        keepalive_timeout 4s;\n" if keepalive else ""
    )
    connection = '""' if keepalive else "close"
    return f"""{user}worker_processes 1;
daemon off;
master_process on;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    log_format replicas '$http_x_test_tag|$status|$upstream_addr|$upstream_status';
    upstream llamon {{
{servers}
{upstream_keepalive}    }}
    server {{
        listen 127.0.0.1:{port};
        access_log {prefix}/access.log replicas;
        location / {{
            proxy_pass http://llamon;
            proxy_http_version 1.1;
            proxy_set_header Connection {connection};
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_next_upstream error timeout;
            proxy_connect_timeout 5s;
            proxy_read_timeout 120s;
        }}
    }}
}}
"""


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, then SIGKILL of the process group after ``STOP_TIMEOUT`` seconds."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # also an nginx worker left behind
    await asyncio.wait_for(process.wait(), STOP_TIMEOUT)


async def _drain(process: asyncio.subprocess.Process, into: list[str]) -> None:
    """Keep reading ``process``'s stderr (a full pipe would block it); keep the lines."""
    assert process.stderr is not None
    while line := await process.stderr.readline():
        into.append(line.decode(errors="replace"))


async def _start_replica(
    index: int, home: Path, options: list[str], agent: tuple[str, ...], extra: dict[str, str]
) -> Replica:
    worker_id = f"replica-{index}"
    env = {**os.environ, **extra, HOME_ENV: str(home), WORKER_ID_ENV: worker_id}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llamon_agent",
        "serve",
        "--port",
        "0",
        *options,
        *agent,
        env=env,
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )
    assert process.stderr is not None
    lines: list[str] = []
    url = ""
    try:
        while not url:
            raw = await asyncio.wait_for(process.stderr.readline(), READY_TIMEOUT)
            line = raw.decode(errors="replace")
            if not line:
                raise RuntimeError(f"replica {index} exited before it was ready: {lines}")
            lines.append(line)
            if line.startswith("llamon: serving"):
                url = line.split(" at ", 1)[1].split(" ", 1)[0]
    except BaseException:
        await _stop(process)
        raise
    return Replica(index, worker_id, process, url, lines)


async def _nginx_ready(url: str, nginx: asyncio.subprocess.Process, prefix: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    async with httpx.AsyncClient(timeout=2) as http:
        while True:
            if nginx.returncode is not None:
                error = (
                    (prefix / "error.log").read_text() if (prefix / "error.log").exists() else ""
                )
                raise RuntimeError(f"nginx exited ({nginx.returncode}): {error}")
            with contextlib.suppress(httpx.TransportError):
                response = await http.get(
                    f"{url}.well-known/agent-card.json", headers={TAG_HEADER: "ready"}
                )
                if response.status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"nginx at {url} did not answer in {READY_TIMEOUT} s")
            await asyncio.sleep(0.02)


@asynccontextmanager
async def replicas(
    n: int,
    *,
    database_url: str,
    redis_url: str | None = None,
    agent: str | None = None,
    upstream_keepalive: int = 32,
    options: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> AsyncIterator[Fleet]:
    """``n`` replicas of ``agent`` (``module:agent`` with its default card; None: the demo
    agent) on PostgreSQL at ``database_url``, behind one nginx; see the module docstring.
    ``redis_url`` is passed as ``--redis-url`` when given; ``options`` are more ``serve``
    options for every replica, ``env`` more environment variables (``LLAMON_HEARTBEAT_SECONDS``
    ...) for each."""
    executable = nginx_path()
    if executable is None:
        raise RuntimeError("nginx is not installed (apt-get install nginx)")
    path = demo_agent_path()
    target = (agent,) if agent else ("--card", f"{path}:card", f"{path}:agent")
    serve_options = ["--store", "postgres", "--database-url", database_url, *options]
    if redis_url is not None:
        serve_options += ["--redis-url", redis_url]
    async with AsyncExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="llamon-replicas-")))
        started: list[Replica] = []
        drains: list[asyncio.Task[None]] = []

        async def stop_replicas() -> None:
            await asyncio.gather(*(_stop(r.process) for r in started), return_exceptions=True)
            for task in drains:
                task.cancel()
            await asyncio.gather(*drains, return_exceptions=True)

        stack.push_async_callback(stop_replicas)
        # one at a time: the first creates the tables, the others find them
        for index in range(n):
            home = root / f"home-{index}"
            home.mkdir()
            replica = await _start_replica(index, home, serve_options, target, env or {})
            started.append(replica)
            drains.append(asyncio.create_task(_drain(replica.process, replica.stderr)))
        prefix = root / "nginx"
        prefix.mkdir()
        addresses = [r.address for r in started]
        nginx: asyncio.subprocess.Process | None = None
        for _attempt in range(3):  # a free port may be taken before nginx binds it
            port = _free_port()
            conf = prefix / "nginx.conf"
            conf.write_text(_nginx_conf(prefix, port, addresses, upstream_keepalive))
            nginx = await asyncio.create_subprocess_exec(
                executable,
                "-p",
                str(prefix),
                "-e",
                str(prefix / "error.log"),
                "-c",
                str(conf),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
            stack.push_async_callback(_stop, nginx)
            url = f"http://127.0.0.1:{port}/"
            try:
                await _nginx_ready(url, nginx, prefix)
            except RuntimeError:
                if _attempt == 2:
                    raise
                continue
            break
        assert nginx is not None
        yield Fleet(started, url, nginx, prefix / "access.log")
