"""Tools from typed functions, the registry, and views."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from llamon_agent.loop import Tool, ToolLike, ToolRegistry, ToolResult, ToolView, tool


class Address(BaseModel):
    city: str
    zip_code: str | None = None


def search_orders(
    customer: Annotated[str, Field(description="Customer id, e.g. C-17")],
    status: Literal["open", "closed"] = "open",
    limit: int = 10,
    tags: list[str] | None = None,
    ship_to: Address | None = None,
) -> list[str]:
    """Find a customer's orders.

    Returns order ids, newest first.
    """
    return []


def test_schema_comes_from_the_signature() -> None:
    made = Tool.from_function(search_orders)
    assert made.name == "search_orders"
    assert made.description == "Find a customer's orders.\n\nReturns order ids, newest first."
    schema = made.parameters
    assert schema["type"] == "object"
    assert schema["required"] == ["customer"]
    assert schema["additionalProperties"] is False
    assert "title" not in schema
    props = schema["properties"]
    assert props["customer"] == {"type": "string", "description": "Customer id, e.g. C-17"}
    assert props["status"] == {"enum": ["open", "closed"], "type": "string", "default": "open"}
    assert props["limit"] == {"type": "integer", "default": 10}
    assert props["tags"]["anyOf"] == [
        {"type": "array", "items": {"type": "string"}},
        {"type": "null"},
    ]
    assert props["ship_to"]["anyOf"][0] == {"$ref": "#/$defs/Address"}
    assert set(schema["$defs"]["Address"]["properties"]) == {"city", "zip_code"}


def test_name_and_description_can_be_given() -> None:
    made = tool(name="orders", description="Orders of a customer.")(search_orders)
    assert (made.name, made.description) == ("orders", "Orders of a customer.")
    assert made.spec().name == "orders"


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda *args: None, "args"),
        (lambda **kwargs: None, "kwargs"),
        (lambda a, /: None, "positional-only"),
    ],
)
def test_functions_the_model_cannot_call_are_refused(fn: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        Tool.from_function(fn, name="f")


def test_a_lambda_needs_a_name() -> None:
    with pytest.raises(ValueError, match="tool name"):
        Tool.from_function(lambda x: x)


def test_private_parameters_are_refused() -> None:
    def f(_hidden: int) -> int:
        return _hidden

    with pytest.raises(TypeError, match="_hidden"):
        Tool.from_function(f)


async def test_sync_tools_run_in_a_worker_thread() -> None:
    @tool
    def where() -> int:
        """Which thread am I on."""
        return threading.get_ident()

    assert await where.call({}) != threading.get_ident()


async def test_async_tools_run_on_the_event_loop() -> None:
    @tool
    async def where() -> int:
        """Which thread am I on."""
        return threading.get_ident()

    assert await where.call({}) == threading.get_ident()


async def test_call_validates_and_converts_the_arguments() -> None:
    @tool
    def double(n: int, address: Address) -> str:
        """Double n."""
        return f"{n * 2} {type(address).__name__}"

    assert await double.call({"n": "21", "address": {"city": "Seoul"}}) == "42 Address"
    failed = await double.call({"n": "x", "address": {}})
    assert isinstance(failed, ToolResult)
    assert failed.to_model_text() == (
        "invalid_arguments: field 'n': Input should be a valid integer, unable to parse string "
        "as an integer; field 'address.city': Field required"
    )


class EchoTool:
    """A ToolLike that is not a Tool (the shape the MCP loader produces)."""

    name = "echo"
    description = "Echo the text."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult.ok(arguments["text"])


def test_registry_takes_tools_functions_and_tool_likes() -> None:
    registry = ToolRegistry()
    made = registry.register(search_orders)
    echo = registry.register(EchoTool())
    assert isinstance(made, Tool)
    assert isinstance(echo, ToolLike)
    assert registry.names == ("search_orders", "echo")
    assert registry.get("echo") is echo
    assert registry.get("missing") is None
    assert "echo" in registry
    assert len(registry) == 2
    assert [spec.name for spec in registry.specs()] == ["search_orders", "echo"]


def test_register_works_as_a_decorator() -> None:
    registry = ToolRegistry()

    @registry.register
    def ping() -> str:
        """Answer pong."""
        return "pong"

    assert registry.get("ping") is ping


def test_names_are_unique_and_checked() -> None:
    registry = ToolRegistry([search_orders])
    with pytest.raises(ValueError, match="already registered"):
        registry.register(search_orders)
    with pytest.raises(TypeError, match="cannot register"):
        registry.register(42)  # type: ignore[arg-type]

    class BadName(EchoTool):
        name = "has space"

    with pytest.raises(ValueError, match="tool name"):
        registry.register(BadName())


def test_views_expose_only_what_a_run_needs() -> None:
    registry = ToolRegistry([search_orders, EchoTool()])
    by_name = registry.view("echo")
    assert isinstance(by_name, ToolView)
    assert by_name.names == ("echo",)
    assert by_name.get("search_orders") is None
    assert registry.view(lambda t: t.name.startswith("search")).names == ("search_orders",)
    assert registry.view().names == ("search_orders", "echo")
    assert registry.view("echo", "search_orders").names == ("search_orders", "echo")
    assert by_name.view("echo").names == ("echo",)


def test_a_view_names_only_existing_tools() -> None:
    registry = ToolRegistry([search_orders])
    with pytest.raises(KeyError, match="echo"):
        registry.view("echo")
    with pytest.raises(TypeError, match="names"):
        registry.view("search_orders", lambda t: True)


def test_a_view_is_a_snapshot() -> None:
    registry = ToolRegistry([search_orders])
    view = registry.view()
    registry.register(EchoTool())
    assert view.names == ("search_orders",)
    assert list(view) == [registry.get("search_orders")]
