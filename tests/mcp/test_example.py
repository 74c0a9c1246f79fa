"""The bookshop example (``llamon_agent.examples.bookshop``) answers each failure the way its
reader needs it, through mcp's own in-process Client; the script form still runs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import examples.bookshop_mcp_server as script
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, TextContent

from llamon_agent.examples import bookshop
from llamon_agent.examples.bookshop import build_server

ROOT = Path(__file__).resolve().parents[2]


def text_of(content: Sequence[object]) -> str:
    return "\n".join(block.text for block in content if isinstance(block, TextContent))


async def test_tool_error_is_a_result_the_model_reads() -> None:
    async with Client(build_server()) as client:
        result = await client.call_tool("get_book", {"title": "Nothing"})
    assert result.is_error
    assert result.structured_content is None
    assert text_of(result.content) == (
        "Error executing tool get_book: No book titled 'Nothing' in the catalog. "
        "Try search_books first."
    )


async def test_mcp_error_fails_the_request_for_the_host() -> None:
    async with Client(build_server(read_only=True)) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("order_book", {"title": "Dune"})
    assert raised.value.code == INVALID_REQUEST
    assert raised.value.message == "This bookshop is read-only; ordering is switched off."


async def test_a_missing_resource_is_invalid_params_with_the_uri() -> None:
    async with Client(build_server()) as client:
        found = await client.read_resource("books://Dune")
        with pytest.raises(MCPError) as raised:
            await client.read_resource("books://Nothing")
    assert "Dune by Frank Herbert" in str(found.contents[0])
    assert raised.value.code == INVALID_PARAMS
    assert raised.value.error.data == {"uri": "books://Nothing"}


async def test_orders_change_stock_and_business_limits_are_tool_errors() -> None:
    async with Client(build_server()) as client:
        ok = await client.call_tool("order_book", {"title": "Neuromancer", "gift_wrap": True})
        sold_out = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert text_of(ok.content) == (
        "Ordered 1 gift-wrapped copy(ies) of 'Neuromancer' by William Gibson."
    )
    assert sold_out.is_error
    assert "Only 0 copies of 'Neuromancer' in stock" in text_of(sold_out.content)


def test_the_script_in_examples_is_the_packaged_server() -> None:
    assert script.build_server is bookshop.build_server
    assert script.READY_LINE == bookshop.READY_LINE


@pytest.mark.parametrize(
    "command",
    [["-m", "llamon_agent.examples.bookshop"], [str(ROOT / "examples" / "bookshop_mcp_server.py")]],
    ids=["module", "script"],
)
def test_the_server_runs_as_a_module_or_a_script(tmp_path: Path, command: list[str]) -> None:
    done = subprocess.run(  # noqa: S603 -- our own interpreter and server
        [sys.executable, *command, "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "The bookshop MCP server" in done.stdout
    assert "--read-only" in done.stdout
