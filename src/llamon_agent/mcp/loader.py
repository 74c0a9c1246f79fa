"""Load an MCP server's tools as loop tools, one connection per request.

::

    loader = MCPToolLoader("http://127.0.0.1:8765/mcp")      # or an MCPServer, or a command
    async with loader.session() as tools:                      # one request
        result = await tools[0].call({"title": "Dune"})        # McpToolOutput

    tools = await MCPToolLoader().to_tools()    # every server of mcp.json (see .config)

``MCPToolLoader`` only holds where the server is and how to talk to it; it is cheap and
may be shared. ``loader.session()`` is one request's worth of MCP: one ``mcp.Client``
connection (opened on entry, closed on exit), the server's tools listed once, and a fresh
``RequestBudget`` so transport failures are counted per tool *per request*. Every tool is
wrapped by ``wrap_tool_output_normalizer``. The short spelling works too:
``tools = await loader.to_tools()`` opens the loader's own session (then the loader is the
per-request object; ``await loader.aclose()`` or ``async with loader:`` ends it).

The connection is entered and exited by a task of its own, so a transport that dies
(the server killed, the HTTP connection refused) ends that task only, never the request's
task; calls then fail with ``MCPError`` -32000, which the normalizer counts. After such a
failure the next call reconnects (so "Retry may succeed" can come true: a restarted
server is found again); a timeout keeps the connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Hashable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from types import TracebackType
from typing import Any, Final, TypeAlias
from urllib.parse import urlsplit

from llamon_agent._extras import requires_extra
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode, Stage
from llamon_agent.core.events import emit, observed
from llamon_agent.mcp.config import MCPConfigError, MCPServerConfig, load_mcp_config
from llamon_agent.mcp.errors import MCPLoadError
from llamon_agent.mcp.normalizer import (
    DEFAULT_MAX_TRANSPORT_FAILURES,
    MCPTool,
    RequestBudget,
    ToolCaller,
    wrap_tool_output_normalizer,
)
from llamon_agent.mcp.transport import is_session_lost

with requires_extra("mcp", "llamon_agent.mcp"):
    from mcp.client._transport import Transport, TransportStreams
    from mcp.client.client import Client
    from mcp.client.session import IncomingMessage
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server import MCPServer, Server
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED, CallToolResult, Tool, ToolListChangedNotification

__all__ = ["MCPConnectionPool", "MCPSession", "MCPToolLoader", "ServerTarget"]

logger = logging.getLogger("llamon_agent.mcp")

ServerTarget: TypeAlias = (
    "MCPServer[Any] | Server[Any] | str | StdioServerParameters | Sequence[str] | Transport"
)
"""An in-process server, a streamable HTTP URL, a stdio command (``StdioServerParameters``
or ``["python", "server.py"]``) or any mcp ``Transport``."""

_CLOSE_TIMEOUT: Final = 5.0
_MAX_LIST_PAGES: Final = 100


def _label(target: object) -> str:
    """A short, secret-free name of the server for messages and logs."""
    if isinstance(target, MCPServer | Server):
        return str(target.name)
    if isinstance(target, str):
        parts = urlsplit(target)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"
    if isinstance(target, StdioServerParameters):
        first = os.path.basename(target.args[0]) if target.args else ""
        return f"{os.path.basename(target.command)} {first}".strip()
    return type(target).__name__


@asynccontextmanager
async def _http_with_headers(
    url: str, headers: Mapping[str, str]
) -> AsyncIterator[TransportStreams]:
    """Streamable HTTP to ``url`` sending ``headers`` on every request (a fresh HTTP client
    per connection, closed with it)."""
    async with (
        create_mcp_http_client(headers=dict(headers)) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


class _Connection:
    """One ``mcp.Client``, entered and exited by its own task.

    anyio task groups inside the client cancel the task that entered them when the
    transport fails; owning the client in a dedicated task keeps that cancellation away
    from the request. Calls from any task go through ``client``.
    """

    def __init__(
        self, loader: MCPToolLoader, on_tools_changed: Callable[[], None] | None = None
    ) -> None:
        self._loader = loader
        self._on_tools_changed = on_tools_changed
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.client: Client | None = None
        self.error: Exception | None = None
        self.stale = False

    @property
    def usable(self) -> bool:
        task = self._task
        return self.client is not None and not self.stale and task is not None and not task.done()

    async def _run(self) -> None:
        watcher: asyncio.Task[None] | None = None
        try:
            async with self._loader._make_client(self._notified) as client:
                self.client = client
                self._ready.set()
                if self._on_tools_changed is not None:
                    watcher = asyncio.create_task(self._watch(client))
                await self._stop.wait()
                if watcher is not None:  # end the listen stream before the client
                    watcher.cancel()
                    await asyncio.wait({watcher}, timeout=_CLOSE_TIMEOUT)
        except Exception as exc:  # the transport died or never came up; callers see it
            self.error = exc
            logger.debug("MCP connection to %s ended: %r", self._loader.label, exc)
        finally:
            self.client = None
            if watcher is not None:
                watcher.cancel()

    async def _notified(self, message: IncomingMessage) -> None:
        """A server's ``notifications/tools/list_changed`` (servers before 2026-07-28)."""
        if isinstance(message, ToolListChangedNotification) and self._on_tools_changed:
            self._on_tools_changed()

    async def _watch(self, client: Client) -> None:
        """Listen for tool-list changes (2026-07-28 servers: ``subscriptions/listen``);
        older servers send ``notifications/tools/list_changed`` to ``_notified``."""
        callback = self._on_tools_changed
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    if callback is not None:
                        callback()
        except Exception as exc:  # no listen (an older server) or the stream was lost
            logger.debug("MCP tool-list listen on %s ended: %r", self._loader.label, exc)
            if callback is not None:
                callback()  # changes may go unseen from now on: list again next time

    async def open(self, limit_s: float | None) -> Client:
        """Connect (handshake included) within ``limit_s`` seconds; raise what failed."""
        self._task = task = asyncio.create_task(
            self._run(), name=f"llamon-mcp-connection {self._loader.label}"
        )
        ready = asyncio.create_task(self._ready.wait())
        try:
            async with asyncio.timeout(limit_s):
                await asyncio.wait({ready, task}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the connect timeout, or the caller was cancelled
            await self.close(graceful=False)
            raise
        finally:
            ready.cancel()
        client = self.client
        if client is None or task.done():
            error = self.error or MCPError(code=CONNECTION_CLOSED, message="Connection closed")
            await self.close(graceful=False)
            raise error
        return client

    async def close(self, limit_s: float = _CLOSE_TIMEOUT, *, graceful: bool = True) -> None:
        """Ask the owner task to exit the client (cancel it at once unless ``graceful``);
        cancel it if it has not ended within ``limit_s``."""
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        if graceful:
            await asyncio.wait({task}, timeout=limit_s)
        if not task.done():
            if graceful:
                logger.warning("MCP connection to %s did not close in time", self._loader.label)
            task.cancel()
            await asyncio.wait({task}, timeout=limit_s)


class MCPSession:
    """One request's MCP: one connection, the tools listed once, one ``RequestBudget``.

    ``async with loader.session() as tools`` gives the tools (``list[MCPTool]``); the
    session object itself (``loader.session()``) exposes ``budget``, ``to_tools()``,
    ``call_tool()`` and ``aclose()``. Not reusable once closed: make one per request.
    """

    def __init__(self, loader: MCPToolLoader, budget: RequestBudget | None = None) -> None:
        self.loader = loader
        self.budget = budget or RequestBudget(loader.max_transport_failures)
        self._lock = asyncio.Lock()
        self._connection: _Connection | None = None
        self._tools: list[MCPTool] | None = None
        self._closed = False
        # a loader of several configured servers: one session each, sharing the budget
        self._members = [member.session(budget=self.budget) for member in loader.members]
        self._owners: dict[str, MCPSession] = {}

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> list[MCPTool]:
        try:
            return await self.to_tools()
        except BaseException:
            await self.aclose()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def to_tools(self) -> list[MCPTool]:
        """Connect if needed and list the server's tools (once); each one normalized.

        Raises ``MCPLoadError`` (classified like its cause) when the server cannot be
        reached or refuses ``tools/list``.
        """
        if self._tools is not None:
            return list(self._tools)
        if self._closed:
            raise RuntimeError("this MCP session is closed; open a new one per request")
        if self._members:
            return await self._member_tools()
        try:
            connection, client = await self._client()
            pool = self.loader.pool
            if pool is None:
                listed = await self._list(client)
            else:
                listed = await pool._tools(self.loader, connection, lambda: self._list(client))
        except Exception as exc:
            found = classify_exception(exc)
            raise MCPLoadError(
                f"Could not load tools from MCP server '{self.loader.label}' ({found.reason}).",
                cause=exc,
            ) from exc
        prefix = self.loader.tool_prefix
        self._tools = [
            wrap_tool_output_normalizer(
                tool,
                self._caller(tool.name),
                budget=self.budget,
                name=prefix + tool.name,
                server=self.loader.label,
            )
            for tool in listed
        ]
        return list(self._tools)

    async def _member_tools(self) -> list[MCPTool]:
        """Every configured server's tools, listed concurrently, in config order."""
        listed = await asyncio.gather(
            *(member.to_tools() for member in self._members), return_exceptions=True
        )
        per_member: list[list[MCPTool]] = []
        for result in listed:
            if isinstance(result, BaseException):
                raise result
            per_member.append(result)
        tools: list[MCPTool] = []
        offered_by: dict[str, str] = {}
        prefix = self.loader.tool_prefix
        for member, member_tools in zip(self._members, per_member, strict=True):
            for tool in member_tools:
                if tool.name in offered_by:
                    raise MCPConfigError(
                        f"MCP servers {offered_by[tool.name]!r} and {member.loader.label!r} "
                        f"both offer a tool {tool.name!r}; load them apart, each with its "
                        "own prefix: MCPToolLoader(servers=[name], tool_prefix=...)"
                    )
                offered_by[tool.name] = member.loader.label
                self._owners[tool.name.removeprefix(prefix)] = member
                tools.append(tool)
        self._tools = tools
        return list(tools)

    async def _list(self, client: Client) -> list[Tool]:
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        include = self.loader.include
        return [t for t in tools if include is None or t.name in include]

    def _caller(self, remote_name: str) -> ToolCaller:
        return partial(self.call_tool, remote_name)  # no coroutine of its own

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call tool ``name`` (the server's name) once, raw: no normalization.

        Reconnects first when the previous connection failed; marks the connection for a
        reconnect when this call fails with ``UPSTREAM_UNAVAILABLE``. When the server lost
        the HTTP session (it restarted), the call never reached the tool: it is sent once
        more over a new connection. On a loader of several servers the call goes to the
        server that listed ``name``.
        """
        if self._members:
            await self.to_tools()
            owner = self._owners.get(name)
            if owner is None:
                raise ValueError(f"no MCP server of this session offers a tool {name!r}")
            return await owner.call_tool(name, arguments)
        # one coroutine down to the client's call (each frame between the loop and the
        # remote call is resumed every time the call wakes up); a lost session: once more
        retried = False
        while True:
            try:
                current = self._connection
                client = current.client if current is not None and not self._closed else None
                if current is None or client is None or not current.usable:
                    current, client = await self._client()
                try:
                    return await client.call_tool(name, arguments)
                except Exception as exc:
                    found = classify_exception(exc)
                    if found.code is ErrorCode.UPSTREAM_UNAVAILABLE and found.retriable:
                        current.stale = True
                    raise
            except MCPError as exc:
                if retried or not is_session_lost(exc):
                    raise
                retried = True
                logger.info("MCP session with %s was lost; reconnecting once", self.loader.label)
                if observed():
                    metadata = {"failure_reason": "session_lost", "retryable": True}
                    emit("mcp.reconnect", Stage.MCP_CALL, tool=name, metadata=metadata)

    async def _client(self) -> tuple[_Connection, Client]:
        pool = self.loader.pool
        if pool is not None:
            if self._closed:
                raise RuntimeError("this MCP session is closed; open a new one per request")
            connection, client = await pool._connection(self.loader)
            self._connection = connection
            return connection, client
        async with self._lock:
            if self._closed:
                raise RuntimeError("this MCP session is closed; open a new one per request")
            current = self._connection
            if current is not None and current.usable and current.client is not None:
                return current, current.client
            if current is not None:
                self._connection = None
                await current.close(limit_s=1.0)
            connection = _Connection(self.loader)
            client = await connection.open(self.loader.connect_timeout_seconds)
            self._connection = connection
            return connection, client

    async def aclose(self) -> None:
        """Close the connection; further calls raise ``RuntimeError``. Idempotent."""
        async with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None and self.loader.pool is None:  # a pool's stays open
            await connection.close()
        if self._members:
            await asyncio.gather(*(member.aclose() for member in self._members))


class _Pooled:
    """One server's entry in an ``MCPConnectionPool``: its connection and tool list."""

    def __init__(self, loader: MCPToolLoader) -> None:
        self.loader = loader
        self.lock = asyncio.Lock()
        self.connection: _Connection | None = None
        self.tools: list[Tool] | None = None
        self.listed_at = 0.0
        self.generation = 0

    def tools_changed(self) -> None:
        """The server's tools changed: the next session lists them again."""
        self.generation += 1
        self.tools = None


class MCPConnectionPool:
    """MCP connections and tool lists kept across requests (``MCPToolLoader(pool=...)``).

    One connection per server (loaders with the same server, headers and options share
    it), opened by the first session that needs it and used by every session
    concurrently; a connection that failed (the transport broke, the server is gone) is
    closed and a new one opened by the next call. The tool list is listed again when
    ``tools_ttl_seconds`` have passed since it was listed (``None``: kept until a change),
    when the server announces a change (``notifications/tools/list_changed``, or a
    ``subscriptions/listen`` tool-list event on 2026-07-28 servers) and after a
    reconnect. Each session keeps its own failure budget. ``await pool.aclose()`` (or
    ``async with pool``) closes every connection. A pool belongs to one event loop. If the
    server's change announcements cannot be followed (the listen stream is lost), the
    list is listed again once and from then on only the TTL renews it.
    """

    def __init__(
        self,
        *,
        tools_ttl_seconds: float | None = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if tools_ttl_seconds is not None and tools_ttl_seconds < 0:
            raise ValueError("tools_ttl_seconds must not be negative")
        self.tools_ttl_seconds = tools_ttl_seconds
        self._clock = clock
        self._entries: dict[Hashable, _Pooled] = {}
        self._closed = False

    def _entry(self, loader: MCPToolLoader) -> _Pooled:
        key = loader._pool_key()
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Pooled(loader)
        return entry

    async def _connection(self, loader: MCPToolLoader) -> tuple[_Connection, Client]:
        """The open connection to ``loader``'s server; a new one if it has none or the
        last one failed."""
        if self._closed:
            raise RuntimeError("this MCP connection pool is closed")
        entry = self._entry(loader)
        async with entry.lock:
            current = entry.connection
            if current is not None and current.usable and current.client is not None:
                return current, current.client
            if current is not None:
                entry.connection = None
                await current.close(limit_s=1.0)
            entry.tools_changed()  # a new connection: list again (the server may be new)
            connection = _Connection(entry.loader, on_tools_changed=entry.tools_changed)
            client = await connection.open(loader.connect_timeout_seconds)
            entry.connection = connection
            return connection, client

    async def _tools(
        self,
        loader: MCPToolLoader,
        connection: _Connection,
        list_tools: Callable[[], Any],
    ) -> list[Tool]:
        """The server's tools: the pool's list while fresh, else ``list_tools()``."""
        entry = self._entry(loader)
        ttl = self.tools_ttl_seconds
        now = self._clock()
        if (
            entry.tools is not None
            and entry.connection is connection
            and (ttl is None or now - entry.listed_at < ttl)
        ):
            return entry.tools
        generation = entry.generation
        listed: list[Tool] = await list_tools()
        if entry.generation == generation and entry.connection is connection:
            entry.tools, entry.listed_at = listed, now
        return listed

    async def aclose(self) -> None:
        """Close every connection; sessions using the pool fail from now on. Idempotent."""
        self._closed = True
        entries, self._entries = list(self._entries.values()), {}
        connections = [entry.connection for entry in entries if entry.connection is not None]
        for entry in entries:
            entry.connection = None
        await asyncio.gather(*(connection.close() for connection in connections))

    async def __aenter__(self) -> MCPConnectionPool:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class MCPToolLoader:
    """Where an MCP server is and how to load its tools.

    ``server``: an in-process ``MCPServer``/``Server`` (tests, embedding), a streamable
    HTTP URL (``"http://host:port/mcp"``), a stdio command (``StdioServerParameters`` or
    ``["python", "server.py"]``) or an mcp ``Transport``. Without ``server``, every
    enabled server of an ``mcp.json`` (``config``, else ``$LLAMON_MCP_CONFIG``, else
    ``./mcp.json``, else ``$LLAMON_HOME/mcp.json``; ``servers`` picks some by name): their
    tools come together, one connection per server per session, one budget. Raises
    ``MCPConfigError`` when there is no such file or it is not valid.

    ``read_timeout_seconds`` bounds each ``tools/call`` (mcp raises ``MCPError`` -32001,
    a transport failure); ``connect_timeout_seconds`` bounds connecting plus the
    handshake; ``max_transport_failures`` per tool per request (the last escalates);
    ``tool_prefix`` is put before every tool name the model sees; ``include`` keeps only
    the named tools; ``headers`` go with every HTTP request to a URL ``server``;
    ``client_options`` go to ``mcp.Client`` as they are. ``name`` (for a configured
    server: its ``mcp.json`` name) is the server's name in messages and each tool's
    ``MCPTool.server`` (a fault plan's ``mcp_connection_drop`` names it); without it, the
    in-process server's name or the URL without credentials.

    ``pool`` (an ``MCPConnectionPool``) keeps the connection and the tool list across
    sessions: each ``session()`` then borrows the pool's open connection to this server
    (opened on first use, reopened after a failure) and its listed tools, and closing
    the session leaves both open. The failure budget stays per session.
    """

    def __init__(
        self,
        server: ServerTarget | None = None,
        *,
        name: str | None = None,
        read_timeout_seconds: float | None = 30.0,
        connect_timeout_seconds: float | None = 10.0,
        max_transport_failures: int = DEFAULT_MAX_TRANSPORT_FAILURES,
        tool_prefix: str = "",
        include: Sequence[str] | None = None,
        headers: Mapping[str, str] | None = None,
        client_options: Mapping[str, Any] | None = None,
        config: str | os.PathLike[str] | None = None,
        servers: Sequence[str] | None = None,
        pool: MCPConnectionPool | None = None,
    ) -> None:
        if isinstance(server, Sequence) and not isinstance(server, str):
            if not server:
                raise ValueError("a stdio command needs at least the program to run")
            server = StdioServerParameters(command=server[0], args=list(server[1:]))
        if max_transport_failures < 1:
            raise ValueError("max_transport_failures must be at least 1")
        if server is not None and (config is not None or servers is not None):
            raise ValueError("give either a server or config/servers (an mcp.json), not both")
        if headers and not isinstance(server, str):
            raise ValueError("headers need a server given by its URL")
        self.server: Any = server
        self.read_timeout_seconds = read_timeout_seconds
        self.connect_timeout_seconds = connect_timeout_seconds
        self.max_transport_failures = max_transport_failures
        self.tool_prefix = tool_prefix
        self.include = frozenset(include) if include is not None else None
        self.headers = dict(headers or {})
        self.client_options = dict(client_options or {})
        self.pool = pool
        self.members: tuple[MCPToolLoader, ...] = ()
        self.label: str
        if server is None:
            configured = load_mcp_config(config)
            if servers is not None:
                configured = configured.select(tuple(servers))
            self.members = tuple(self._member(entry) for entry in configured.servers)
            self.label = name or ", ".join(member.label for member in self.members)
        else:
            self.label = name or _label(server)
        self._own: MCPSession | None = None

    def _member(self, entry: MCPServerConfig) -> MCPToolLoader:
        """The loader of one configured server, with this loader's options."""
        target: ServerTarget = entry.url if entry.url is not None else entry.stdio_parameters()
        return MCPToolLoader(
            target,
            name=entry.name,
            read_timeout_seconds=self.read_timeout_seconds,
            connect_timeout_seconds=self.connect_timeout_seconds,
            max_transport_failures=self.max_transport_failures,
            tool_prefix=self.tool_prefix,
            include=sorted(self.include) if self.include is not None else None,
            headers=entry.headers if entry.url is not None else None,
            client_options=self.client_options,
            pool=self.pool,
        )

    def __repr__(self) -> str:
        return f"MCPToolLoader({self.label!r})"

    def _make_client(self, notified: Callable[[IncomingMessage], Any] | None = None) -> Client:
        server = self.server
        if self.headers:
            server = _http_with_headers(server, self.headers)
        options = dict(self.client_options)
        if notified is not None and self.pool is not None:
            own = options.get("message_handler")

            async def message_handler(message: IncomingMessage) -> None:
                await notified(message)
                if own is not None:
                    await own(message)

            options["message_handler"] = message_handler
        return Client(server, read_timeout_seconds=self.read_timeout_seconds, **options)

    def _pool_key(self) -> Hashable:
        """What makes two loaders' connections interchangeable: the server, how it is
        reached and the options of the client and the tool list."""
        server = self.server
        if isinstance(server, str):
            where: Hashable = ("url", server)
        elif isinstance(server, StdioServerParameters):
            where = ("stdio", server.model_dump_json())
        else:
            where = ("object", id(server))  # the pool keeps the loader, so the server too
        return (
            where,
            tuple(sorted(self.headers.items())),
            self.read_timeout_seconds,
            self.connect_timeout_seconds,
            tuple(sorted((key, id(value)) for key, value in self.client_options.items())),
            self.include,
        )

    def session(self, *, budget: RequestBudget | None = None) -> MCPSession:
        """A new per-request session (its own connection and, unless given, budget)."""
        return MCPSession(self, budget)

    async def to_tools(self) -> list[MCPTool]:
        """The tools of the loader's own session (opened on first use, listed once)."""
        if self._own is None or self._own.closed:
            self._own = self.session()
        return await self._own.to_tools()

    @property
    def budget(self) -> RequestBudget | None:
        """The budget of the loader's own session, once ``to_tools()`` opened it."""
        return self._own.budget if self._own is not None else None

    async def aclose(self) -> None:
        """Close the loader's own session (if ``to_tools()`` opened one)."""
        own, self._own = self._own, None
        if own is not None:
            await own.aclose()

    async def __aenter__(self) -> MCPToolLoader:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
