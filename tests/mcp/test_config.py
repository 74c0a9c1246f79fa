"""``MCPToolLoader()`` without a server: the servers of an ``mcp.json``, real processes."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from a2a.types import TaskState
from mcp.server import MCPServer

from llamon_agent.a2a import AgentContext, create_app
from llamon_agent.core.classify import classify_exception
from llamon_agent.exceptions import ConfigValidationError
from llamon_agent.mcp import (
    MCPConfigError,
    MCPLoadError,
    MCPTool,
    MCPToolLoader,
    read_mcp_config,
)
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    user_message,
)
from tests.mcp.conftest import ROOT, serving
from tests.mcp.servers import SECRET

BOOKSHOP = str(ROOT / "examples" / "bookshop_mcp_server.py")
TOKEN = "sk-live-config-token-0123456789abcdef"

ENV_SERVER = """
import os
from mcp.server import MCPServer

server = MCPServer("env")


@server.tool()
def greeting() -> str:
    \"\"\"The greeting this process was started with, and where it runs.\"\"\"
    return os.environ.get("GREETING", "unset") + " from " + os.getcwd()


server.run("stdio")
"""


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """An empty working directory and an empty LLAMON_HOME; LLAMON_MCP_CONFIG unset."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("LLAMON_HOME", str(home))
    monkeypatch.delenv("LLAMON_MCP_CONFIG", raising=False)
    return work, home


def write_config(path: Path, servers: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def by_name(tools: list[MCPTool]) -> dict[str, MCPTool]:
    return {tool.name: tool for tool in tools}


def weather_server() -> MCPServer:
    server = MCPServer("weather")

    @server.tool()
    def forecast(city: str) -> str:
        """Tomorrow's weather in a city."""
        return f"sunny in {city}"

    return server


def requiring_token(app: Any) -> Any:
    """``app`` answering 401 to HTTP requests without ``Authorization: Bearer TOKEN``."""
    expected = (b"authorization", f"Bearer {TOKEN}".encode())

    async def guarded(scope: dict[str, Any], receive: Callable[..., Any], send: Any) -> None:
        if scope["type"] == "http" and expected not in scope["headers"]:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


async def test_without_a_config_it_names_every_place_it_looked(
    places: tuple[Path, Path],
) -> None:
    work, home = places
    with pytest.raises(MCPConfigError) as raised:
        MCPToolLoader()
    message = str(raised.value)
    assert "LLAMON_MCP_CONFIG (not set)" in message
    assert str(work / "mcp.json") in message
    assert str(home / "mcp.json") in message
    assert isinstance(raised.value, ConfigValidationError)
    found = classify_exception(raised.value)
    assert (found.code.value, found.reason, found.retriable, found.expose_text) == (
        "INTERNAL_ERROR",
        "mcp_config_invalid",
        False,
        False,
    )


async def test_llamon_mcp_config_naming_a_missing_file_says_so(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    work, _ = places
    write_config(work / "mcp.json", {"shop": {"command": sys.executable, "args": [BOOKSHOP]}})
    missing = work / "elsewhere.json"
    monkeypatch.setenv("LLAMON_MCP_CONFIG", str(missing))
    with pytest.raises(MCPConfigError, match=r"LLAMON_MCP_CONFIG names .*elsewhere\.json"):
        MCPToolLoader()


async def test_stdio_server_from_llamon_mcp_config(
    places: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(
        tmp_path / "servers.json", {"bookshop": {"command": sys.executable, "args": [BOOKSHOP]}}
    )
    monkeypatch.setenv("LLAMON_MCP_CONFIG", str(config))
    loader = MCPToolLoader()
    async with loader:
        tools = await loader.to_tools()
        assert set(by_name(tools)) == {"search_books", "get_book", "order_book"}
        out = await by_name(tools)["get_book"].call({"title": "Dune"})
        missing = await by_name(tools)["get_book"].call({"title": "Nothing"})
    assert not out.is_error
    assert "Frank Herbert" in out.text
    assert (missing.is_error, missing.reason) == (True, "tool_error")
    assert repr(loader) == "MCPToolLoader('bookshop')"


async def test_stdio_env_cwd_and_variables(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, home = places
    (home / "server").mkdir()
    (home / "server" / "env_server.py").write_text(ENV_SERVER, encoding="utf-8")
    write_config(
        home / "mcp.json",  # found under LLAMON_HOME: nothing in the working directory
        {
            "env": {
                "type": "stdio",
                "command": "${PYTHON}",
                "args": ["env_server.py"],
                "env": {"GREETING": "${GREETING:-hello}"},
                "cwd": "server",  # relative to the file
            }
        },
    )
    monkeypatch.setenv("PYTHON", sys.executable)
    async with MCPToolLoader().session() as tools:
        out = await by_name(tools)["greeting"].call({})
    assert out.text == f"hello from {home / 'server'}"


async def test_http_server_with_headers_and_a_stdio_server_in_one_file(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    work, _ = places
    monkeypatch.setenv("WEATHER_TOKEN", TOKEN)
    async with serving(weather_server(), wrap=requiring_token) as http:
        write_config(
            work / "mcp.json",
            {
                "bookshop": {"command": sys.executable, "args": [BOOKSHOP]},
                "weather": {
                    "type": "http",
                    "url": http.url,
                    "headers": {"Authorization": "Bearer ${WEATHER_TOKEN}"},
                },
                "retired": {"command": "no-such-program", "disabled": True},
            },
        )
        loader = MCPToolLoader(tool_prefix="x_")
        assert loader.label == "bookshop, weather"
        session = loader.session()
        async with session as tools:
            assert set(by_name(tools)) == {
                "x_search_books",
                "x_get_book",
                "x_order_book",
                "x_forecast",
            }
            forecast = await by_name(tools)["x_forecast"].call({"city": "Seoul"})
            book = await by_name(tools)["x_get_book"].call({"title": "Dune"})
            raw = await session.call_tool("forecast", {"city": "Busan"})
        assert forecast.text == "sunny in Seoul"
        assert not book.is_error
        assert not raw.is_error

        # the header is what let us in: without it the same server refuses
        monkeypatch.setenv("WEATHER_TOKEN", "wrong")
        with pytest.raises(MCPLoadError, match="'weather'"):
            async with MCPToolLoader(servers=["weather"]).session():
                pass
        monkeypatch.setenv("WEATHER_TOKEN", TOKEN)
        async with MCPToolLoader(servers=["weather"]).session() as again:
            assert [tool.name for tool in again] == ["forecast"]


async def test_two_servers_offering_one_tool_name_is_a_clear_error(
    places: tuple[Path, Path],
) -> None:
    work, _ = places
    shop = {"command": sys.executable, "args": [BOOKSHOP]}
    write_config(work / "mcp.json", {"one": shop, "two": shop})
    with pytest.raises(MCPConfigError, match="'one' and 'two' both offer a tool 'search_books'"):
        async with MCPToolLoader().session():
            pass
    async with MCPToolLoader(servers=["two"]).session() as tools:
        assert "get_book" in by_name(tools)
    with pytest.raises(MCPConfigError, match="no enabled server called 'three'"):
        MCPToolLoader(servers=["three"])


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ("{not json", "is not valid JSON (line 1, column 2"),
        ("[]", "the top level must be an object"),
        ("{}", 'the top level has no "mcpServers" object'),
        ('{"mcpServers": []}', "mcpServers must be an object, not array"),
        ('{"mcpServers": {}}', "mcpServers lists no enabled server"),
        ('{"mcpServers": {"a": 1}}', "mcpServers.a must be an object, not integer"),
        ('{"mcpServers": {"a": {}}}', 'mcpServers.a needs exactly one of "command"'),
        ('{"mcpServers": {"a": {"command": ""}}}', "mcpServers.a.command must not be empty"),
        (
            '{"mcpServers": {"a": {"command": "x", "args": ["ok", 3]}}}',
            "mcpServers.a.args[1] must be a string, not integer",
        ),
        (
            '{"mcpServers": {"my server": {"command": "x", "env": {"K": true}}}}',
            "mcpServers['my server'].env.K must be a string, not boolean",
        ),
        (
            '{"mcpServers": {"a": {"url": "http://h/mcp", "headers": {"Authorization": 5}}}}',
            "mcpServers.a.headers.Authorization must be a string, not integer",
        ),
        (
            '{"mcpServers": {"a": {"type": "sse", "url": "http://h/sse"}}}',
            "mcpServers.a.type must be http or streamable-http",
        ),
        (
            '{"mcpServers": {"a": {"command": "x", "env": {"T": "${LLAMON_TEST_UNSET}"}}}}',
            "mcpServers.a.env.T uses ${LLAMON_TEST_UNSET}, but the environment variable"
            " LLAMON_TEST_UNSET is not set",
        ),
    ],
)
def test_a_bad_file_names_the_file_and_the_key_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, document: str, problem: str
) -> None:
    monkeypatch.delenv("LLAMON_TEST_UNSET", raising=False)
    path = tmp_path / "mcp.json"
    path.write_text(document, encoding="utf-8")
    with pytest.raises(MCPConfigError) as raised:
        read_mcp_config(path)
    assert str(raised.value).startswith(str(path)), raised.value
    assert problem in str(raised.value)


def test_errors_and_reprs_never_show_a_configured_value(tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "mcp.json",
        {
            "api": {
                "url": f"https://user:{SECRET}@internal-host.example:8443/mcp?key={SECRET}",
                "headers": {"Authorization": f"Bearer {SECRET}", "X-Count": 5},
            },
            "tool": {"command": "x", "env": {"TOKEN": SECRET}, "args": f"--key={SECRET}"},
        },
    )
    with pytest.raises(MCPConfigError) as raised:
        read_mcp_config(path)
    assert "mcpServers.api.headers.X-Count must be a string" in str(raised.value)
    path.write_text(path.read_text().replace('"X-Count": 5', '"X-Count": "5"'))
    with pytest.raises(MCPConfigError) as raised_again:
        read_mcp_config(path)
    assert "mcpServers.tool.args must be an array of strings" in str(raised_again.value)
    path.write_text(path.read_text().replace(f'"--key={SECRET}"', "[]"))
    config = read_mcp_config(path)
    shown = [str(raised.value), str(raised_again.value), repr(config), repr(config.servers)]
    for text in shown:
        assert SECRET not in text
        assert "internal-host" not in text
    with pytest.raises(MCPConfigError, match="'missing'") as unknown:
        config.select(["missing"])
    assert SECRET not in str(unknown.value)


async def test_a_request_that_meets_no_config_fails_safely_and_the_next_one_works(
    places: tuple[Path, Path],
) -> None:
    work, _ = places

    async def agent(ctx: AgentContext) -> str:
        async with MCPToolLoader() as loader:
            tools = await loader.to_tools()
        return ", ".join(sorted(tool.name for tool in tools))

    async with running_server(create_app(agent, make_card())) as url, a2a_client(url) as client:
        failed = await send(client, user_message("list"))
        write_config(work / "mcp.json", {"shop": {"command": sys.executable, "args": [BOOKSHOP]}})
        done = await send(client, user_message("list"))
    assert failed.status.state == TaskState.failed
    data = error_data(failed)
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "INTERNAL_ERROR",
        "mcp_config_invalid",
        False,
    )
    assert str(work) not in json.dumps(failed.model_dump(mode="json"))
    assert done.status.state == TaskState.completed


def test_config_argument_and_mistaken_combinations(
    places: tuple[Path, Path], tmp_path: Path
) -> None:
    path = write_config(tmp_path / "x.json", {"shop": {"command": "python", "args": ["s.py"]}})
    assert MCPToolLoader(config=path).label == "shop"  # read now, connected later
    with pytest.raises(MCPConfigError, match=r"none\.json does not exist"):
        MCPToolLoader(config=tmp_path / "none.json")
    with pytest.raises(ValueError, match="either a server or config/servers"):
        MCPToolLoader("http://127.0.0.1:1/mcp", config=path)
    with pytest.raises(ValueError, match="headers need a server given by its URL"):
        MCPToolLoader(["python", "s.py"], headers={"Authorization": "Bearer x"})
