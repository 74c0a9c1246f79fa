"""A TCP proxy on 127.0.0.1 that cuts server-sent-event streams after a number of events.

``CuttingProxy(port, cuts={1: 4})`` forwards every connection to ``127.0.0.1:port``; the
first SSE response passing through it (``text/event-stream``) is cut just before its 5th
event (``data:``): the bytes before it are forwarded, then both sides are closed, so the
event the server sent is lost in between -- as when a connection breaks.

With ``only=b'"kind":"artifact-update"'`` only the events whose data holds those bytes
count: ``cuts={1: 2}`` cuts the first SSE response just before its third artifact event,
however many status events (a test's progress nudges) come in between.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Final

_SSE: Final = b"text/event-stream"
_EVENT: Final = b"data:"


@dataclass
class CuttingProxy:
    """Counts SSE responses (1, 2, ... in the order they start) and cuts those in ``cuts``
    (ordinal -> events forwarded before the cut); with ``only``, the events counted are those
    whose data holds it."""

    target_port: int
    cuts: dict[int, int] = field(default_factory=dict)
    only: bytes | None = None
    sse_responses: int = 0
    cut_done: int = 0
    connections: int = 0
    url: str = ""
    cut_event: asyncio.Event = field(default_factory=asyncio.Event)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def _pipe_up(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            writer.close()

    async def _pipe_down(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream: asyncio.StreamWriter,
    ) -> None:
        ordinal: int | None = None
        events = 0
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                at = 0
                while True:  # scan this read for a new SSE response and its events
                    sse = data.find(_SSE, at)
                    event = data.find(_EVENT, at)
                    if sse != -1 and (event == -1 or sse < event):
                        self.sse_responses += 1
                        ordinal, events, at = self.sse_responses, 0, sse + len(_SSE)
                        continue
                    if event == -1:
                        break
                    at = event + len(_EVENT)
                    if not self._counts(data, event):
                        continue
                    limit = self.cuts.get(ordinal) if ordinal is not None else None
                    if limit is not None and events >= limit:
                        writer.write(data[:event])
                        await writer.drain()
                        self.cut_done += 1
                        self.cut_event.set()
                        writer.transport.abort()
                        upstream.transport.abort()
                        return
                    events += 1
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            writer.close()

    def _counts(self, data: bytes, event: int) -> bool:
        """Whether the event starting at ``event`` in ``data`` counts towards a cut."""
        if self.only is None:
            return True
        end = data.find(_EVENT, event + len(_EVENT))
        return data.find(self.only, event, len(data) if end == -1 else end) != -1

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.transport.abort()
            return
        up = asyncio.create_task(self._pipe_up(client_r, server_w))
        down = asyncio.create_task(self._pipe_down(server_r, client_w, server_w))
        for task in (up, down):
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        await asyncio.gather(up, down, return_exceptions=True)

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@asynccontextmanager
async def cutting_proxy(
    target_url: str, cuts: dict[int, int], *, only: bytes | None = None
) -> AsyncIterator[CuttingProxy]:
    """A ``CuttingProxy`` in front of ``target_url`` (``http://127.0.0.1:PORT``); its URL
    is ``proxy.url``."""
    port = int(target_url.rsplit(":", 1)[1].split("/", 1)[0])
    proxy = CuttingProxy(port, dict(cuts), only=only)
    proxy.url = await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
