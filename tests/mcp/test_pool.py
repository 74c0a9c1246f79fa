"""``MCPConnectionPool``: requests share one connection and one tool list per server over
streamable HTTP on 127.0.0.1, while each request keeps its own failure budget."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from llamon_agent.mcp import MCPConnectionPool, MCPTool, MCPToolLoader, unavailable_text
from llamon_agent.mcp.loader import _Pooled
from mcp import Client
from tests.mcp.conftest import free_port, serving
from tests.mcp.servers import build_test_server

LIMIT_S = 10.0


def by_name(tools: list[MCPTool]) -> dict[str, MCPTool]:
    return {tool.name: tool for tool in tools}


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``tools/list`` page a client asks for (its cursor)."""
    seen: list[str] = []
    original = Client.list_tools

    async def counting(self: Client, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(kwargs.get("cursor")))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(Client, "list_tools", counting)
    return seen


async def test_requests_share_one_connection_and_one_listing(
    server: MCPServer, listings: list[str]
) -> None:
    async with serving(server) as http, MCPConnectionPool() as pool:
        loader = MCPToolLoader(http.url, pool=pool)
        first = loader.session()
        async with first as tools:
            assert (await by_name(tools)["echo"].call({"text": "a"})).text == "a"
            connection = first._connection
        second = MCPToolLoader(http.url, pool=pool, tool_prefix="shop_").session()
        async with second as tools:
            assert (await by_name(tools)["shop_echo"].call({"text": "b"})).text == "b"
            assert second._connection is connection
        assert connection is not None
        assert connection.usable  # closing a session keeps it
        assert first.budget is not second.budget
    assert listings == ["None"]
    assert not connection.usable  # closing the pool closes it


async def test_the_tool_list_is_listed_again_after_its_ttl(
    server: MCPServer, listings: list[str]
) -> None:
    now = [100.0]
    async with (
        serving(server) as http,
        MCPConnectionPool(tools_ttl_seconds=30, clock=lambda: now[0]) as pool,
    ):
        loader = MCPToolLoader(http.url, pool=pool)
        for advance in (0.0, 29.0, 2.0, 1.0):
            now[0] += advance
            async with loader.session() as tools:
                assert "echo" in by_name(tools)
    assert listings == ["None", "None"]  # at 100 and at 131 (past 130)


async def test_a_tool_list_change_is_seen_by_the_next_request(
    monkeypatch: pytest.MonkeyPatch, listings: list[str]
) -> None:
    server = build_test_server()

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Adds a tool and says so."""

        @server.tool()
        def extra() -> str:
            """A tool added at run time."""
            return "extra"

        await ctx.notify_tools_changed()
        return "grown"

    changed = asyncio.Event()
    original = _Pooled.tools_changed

    def noting(self: _Pooled) -> None:
        original(self)
        changed.set()

    monkeypatch.setattr(_Pooled, "tools_changed", noting)
    async with serving(server) as http, MCPConnectionPool(tools_ttl_seconds=None) as pool:
        loader = MCPToolLoader(http.url, pool=pool)
        async with loader.session() as tools:
            assert "extra" not in by_name(tools)
            changed.clear()
            assert (await by_name(tools)["grow"].call({})).text == "grown"
        async with asyncio.timeout(LIMIT_S):
            await changed.wait()
        async with loader.session() as tools:
            assert (await by_name(tools)["extra"].call({})).text == "extra"
    assert listings == ["None", "None"]


async def test_a_broken_connection_is_reopened_and_budgets_stay_per_request(
    listings: list[str],
) -> None:
    port = free_port()
    async with MCPConnectionPool() as pool:
        async with serving(build_test_server(), port=port) as http:
            loader = MCPToolLoader(http.url, pool=pool)
            first = loader.session()
            tools = by_name(await first.to_tools())
            assert not (await tools["get_book"].call({"title": "Dune"})).is_error
            before = first._connection
            await http.stop()  # refused from now on
            failed = await tools["get_book"].call({"title": "Dune"})
            assert (failed.text, failed.is_error) == (unavailable_text("get_book"), True)
            assert first.budget.failures("get_book") == 1
        async with serving(build_test_server(), port=port):  # the server is back, same URL
            second = loader.session()
            async with second as others:
                assert second.budget.failures("get_book") == 0  # its own budget
                answer = await by_name(others)["get_book"].call({"title": "Dune"})
                assert not answer.is_error
                assert second._connection is not before
            again = await tools["get_book"].call({"title": "Dune"})  # the first request too
            assert not again.is_error
            assert first.budget.failures("get_book") == 1
            await first.aclose()
    assert len(listings) == 2  # listed again over the new connection


async def test_concurrent_requests_share_the_connection(
    server: MCPServer, listings: list[str]
) -> None:
    async with serving(server) as http, MCPConnectionPool() as pool:
        loader = MCPToolLoader(http.url, pool=pool)

        async def request(index: int) -> tuple[str, object]:
            session = loader.session()
            async with session as tools:
                output = await by_name(tools)["echo"].call({"text": str(index)})
                return output.text, session._connection

        answers = await asyncio.gather(*(request(index) for index in range(8)))
        listed = len(listings)  # the first requests may each list (nothing kept yet)
        later, connection = await request(8)
    assert [text for text, _ in answers] == [str(index) for index in range(8)]
    assert {id(connection) for _, connection in answers} == {id(connection)}
    assert later == "8"
    assert len(listings) == listed  # the kept list


async def test_the_documented_pool_gives_requests_one_connection_and_one_listing(
    server: MCPServer, listings: list[str]
) -> None:
    """docs/mcp.md's pool block, pointed at a real server: two requests, one listing."""
    doc = (Path(__file__).parents[2] / "docs" / "mcp.md").read_text(encoding="utf-8")
    (block,) = [
        block
        for block in re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
        if "MCPConnectionPool(" in block
    ]
    async with serving(server) as http:
        namespace: dict[str, Any] = {}
        exec(block.replace("http://bookshop:8765/mcp", http.url), namespace)  # noqa: S102
        pool, bookshop = namespace["pool"], namespace["bookshop"]
        assert isinstance(pool, MCPConnectionPool)
        async with pool:
            for text in ("a", "b"):
                session = bookshop.session()
                async with session as tools:
                    assert (await by_name(tools)["shop_echo"].call({"text": text})).text == text
    assert listings == ["None"]
