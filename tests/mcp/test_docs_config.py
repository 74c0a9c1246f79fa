"""docs/mcp.md, servers from mcp.json: the example file is valid and the code runs."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from llamon_agent.mcp import read_mcp_config
from tests.mcp.conftest import ROOT

DOC = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
SECTION = DOC[DOC.index("## Servers from `mcp.json`") :]
SECTION = SECTION[: SECTION.index("\n## ", 1)]
[JSON_BLOCK] = re.findall(r"```json\n(.*?)```", SECTION, flags=re.DOTALL)
[PYTHON_BLOCK] = re.findall(r"```python\n(.*?)```", SECTION, flags=re.DOTALL)


def test_the_example_file_is_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEARCH_TOKEN", "t0ken")
    monkeypatch.delenv("SHOP_MODE", raising=False)
    path = tmp_path / "mcp.json"
    path.write_text(JSON_BLOCK, encoding="utf-8")
    config = read_mcp_config(path)
    bookshop, search = config.servers
    assert (bookshop.name, bookshop.command, bookshop.env) == (
        "bookshop",
        "python",
        {"SHOP_MODE": "open"},
    )
    assert (search.name, search.url, dict(search.headers)) == (
        "search",
        "http://127.0.0.1:8765/mcp",
        {"Authorization": "Bearer t0ken"},
    )


async def test_the_code_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = json.loads(JSON_BLOCK)
    bookshop = example["mcpServers"]["bookshop"]
    bookshop["command"] = sys.executable  # "python" of the example, whichever it is here
    bookshop["args"] = [str(ROOT / arg) for arg in bookshop["args"]]
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"bookshop": bookshop}}), encoding="utf-8")
    monkeypatch.setenv("LLAMON_MCP_CONFIG", str(path))
    namespace: dict[str, Any] = {}
    code = compile(PYTHON_BLOCK, "mcp.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)  # noqa: S307 -- our own documentation
    if result is not None:
        await result
    assert {tool.name for tool in namespace["tools"]} == {"search_books", "get_book", "order_book"}
