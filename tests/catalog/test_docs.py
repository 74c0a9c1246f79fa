"""docs/catalog.md: every python block compiles, and the examples run against a real
catalog and a real agent on 127.0.0.1: an in-process catalog, publishing (accepted and
refused), resolving and searching, and calling an agent through ``catalog://``."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from tests._support.a2a_server import running_server
from tests.e2e.catalog.test_catalog_e2e import _start_agent, _with

DOC = (Path(__file__).parents[2] / "docs" / "catalog.md").read_text(encoding="utf-8")
BLOCKS: list[str] = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)


def _namespace(marker: str) -> dict[str, Any]:
    (block,) = [b for b in BLOCKS if marker in b]
    namespace: dict[str, Any] = {}
    exec(compile(block, "catalog.md", "exec"), namespace)  # noqa: S102 -- our own docs
    return namespace


def test_every_block_compiles() -> None:
    assert len(BLOCKS) == 4
    for block in BLOCKS:
        compile(block, "catalog.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


async def test_the_examples_publish_resolve_search_and_call_through_the_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llamon_agent.client import CatalogClient

    monkeypatch.setenv("LLAMON_HOME", str(tmp_path / "client"))
    app, key = await _namespace("async def catalog_app")["catalog_app"](tmp_path)
    publish_card = _namespace("async def publish_card")["publish_card"]
    find_orders = _namespace("async def find_orders")["find_orders"]
    ask_orders = _namespace("async def ask_orders")["ask_orders"]
    agent = await _start_agent("Orders", "1.0.0", "search", "status")
    try:
        async with running_server(app) as url:
            assert await publish_card(url, key, agent.card) == "orders@1.0.0 (initial)"
            minor = _with(agent.card, "1.1.0", "search", "status", "refund")
            assert await publish_card(url, key, minor) == "orders@1.1.0 (minor)"
            removed = _with(agent.card, "1.2.0", "search", "refund")
            assert await publish_card(url, key, removed) == "refused: version_understates_change"
            assert await find_orders(url, key) == (
                f"Orders 1.1.0 at {agent.url}; refunds: ['orders']"
            )
            async with CatalogClient(url, auth=key) as catalog:
                assert await ask_orders(catalog, "where is 42?") == "done: where is 42?"
    finally:
        await agent.stop()
