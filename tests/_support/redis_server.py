"""Redis for the relay tests: a unique key prefix on the shared server, or a private
``redis-server`` of the test's own (the one an outage test may stop)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis

SHARED_REDIS_URL = "redis://127.0.0.1:6379/0"
READY_TIMEOUT = 10.0

__all__ = [
    "SHARED_REDIS_URL",
    "PrivateRedis",
    "delete_prefix",
    "free_port",
    "private_redis",
    "unique_prefix",
]


def unique_prefix() -> str:
    """A key prefix no other test uses."""
    return f"llamon:test:{uuid.uuid4().hex}:"


async def delete_prefix(prefix: str, url: str = SHARED_REDIS_URL) -> None:
    """Delete every key under ``prefix``."""
    client = Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrivateRedis:
    """A ``redis-server`` on a loopback port of its own, without persistence."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Start it; return once it accepts connections."""
        binary = shutil.which("redis-server")
        assert binary is not None, "redis-server is not installed"
        self.process = await asyncio.create_subprocess_exec(
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), READY_TIMEOUT)
            assert line, "redis-server exited before it was ready"
            if b"Ready to accept connections" in line:
                break

    async def stop(self) -> None:
        """Stop it (and wait until it has exited)."""
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            await asyncio.wait_for(self.process.wait(), READY_TIMEOUT)
        self.process = None


@asynccontextmanager
async def private_redis() -> AsyncIterator[PrivateRedis]:
    """A started ``PrivateRedis``, stopped afterwards."""
    server = PrivateRedis(free_port())
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
