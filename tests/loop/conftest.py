"""Tools shared by the loop tests: handlers that count their runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from llamon_agent.exceptions import ComponentInvokeError
from llamon_agent.loop import ToolRegistry, ToolResult, tool


@dataclass
class Calls:
    """How often each handler ran, and with what."""

    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def count(self, name: str) -> int:
        return sum(1 for tool_name, _ in self.seen if tool_name == name)


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def registry(calls: Calls) -> ToolRegistry:
    """add_numbers (sync), lookup (async), explode (raises), refuse (returns a failure)."""

    @tool
    def add_numbers(a: int, b: int) -> int:
        """Add two integers."""
        calls.seen.append(("add_numbers", {"a": a, "b": b}))
        return a + b

    @tool
    async def lookup(key: str) -> dict[str, str]:
        """Look a key up."""
        calls.seen.append(("lookup", {"key": key}))
        return {"key": key, "value": key.upper()}

    @tool
    def explode(reason: str = "boom") -> str:
        """Always raises."""
        calls.seen.append(("explode", {"reason": reason}))
        raise RuntimeError(f"db password=hunter2 failed: {reason}")

    @tool
    async def refuse(customer: str) -> ToolResult:
        """Returns its own failure."""
        calls.seen.append(("refuse", {"customer": customer}))
        return ToolResult.failure(
            "customer_not_found", f"No customer {customer!r}; ask for the id."
        )

    return ToolRegistry([add_numbers, lookup, explode, refuse])


class FlakyRemote:
    """A ToolLike that escalates, as an MCP tool does on its third transport failure."""

    name = "flaky_remote"
    description = "A tool on a server that is down."
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

    async def call(self, arguments: dict[str, Any]) -> Any:
        raise ComponentInvokeError("Upstream tool 'flaky_remote' failed 3 times; giving up.")
