"""A tool-loop agent over the bookshop MCP tools, with a deterministic model.

The model (``BookshopModel``) follows fixed rules instead of calling a language model, so
the agent answers the same way every time and runs with no network or API key -- the
target of the sample Quality Lab cases in ``docs/lab-cases/bookshop.yaml``::

    llamon lab run docs/lab-cases/bookshop.yaml \\
        --target llamon_agent.examples.bookshop_agent:agent

What it does with a request (``ctx.text``):

* ``... books by <author>``       -> ``search_books(query=<author>)``, then lists them
* ``order <n> copies of <title>`` -> ``order_book(title, quantity, gift_wrap)``
* ``... "<title>"`` or a known title (``how much is``, ``in stock``, ``tell me about``)
  -> ``get_book(title)``; a title not in the catalog is searched for by its stem
  (``"Dunes"`` -> ``search_books("Dune")``), then looked up again
* a tool that is unavailable is called again (the MCP layer counts the strikes); any other
  failure the model reads ends the run with an apology.

Each request opens its own MCP session (``MCPToolLoader.session``) to an in-process
bookshop server (``build_server``), the pattern ``docs/mcp.md`` describes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Final

from llamon_agent.a2a.agent import AgentContext, AgentOutput
from llamon_agent.a2a.card import build_agent_card, skill
from llamon_agent.a2a.loop_agent import LoopAgent
from llamon_agent.examples.bookshop import CATALOG, build_server
from llamon_agent.loop.model import (
    ChatMessage,
    ModelResponse,
    RawToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from llamon_agent.loop.tools import ToolRegistry
from llamon_agent.mcp import MCPToolLoader

__all__ = ["BookshopModel", "agent", "bookshop", "card"]

_ORDER: Final = re.compile(r"order (\w+) cop(?:y|ies) of ([^,.]+)", re.IGNORECASE)
_AUTHOR: Final = re.compile(r"\bby ([A-Z][\w.]*(?: [A-Z][\w.]*)*)")
_QUOTED: Final = re.compile(r"[\"“]([^\"”]+)[\"”]")
_NUMBERS: Final = {"one": 1, "a": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_RETRIES: Final = 3


def _call(number: int, name: str, arguments: dict[str, object]) -> ModelResponse:
    call = RawToolCall(f"call_{number}", name, json.dumps(arguments))
    return ModelResponse(tool_calls=(call,))


def _first_call(text: str) -> tuple[str, dict[str, object]] | None:
    """The tool call a request asks for, or None when it asks for none."""
    order = _ORDER.search(text)
    if order is not None:
        amount = order.group(1).lower()
        quantity = int(amount) if amount.isdigit() else _NUMBERS.get(amount, 1)
        arguments: dict[str, object] = {"title": order.group(2).strip(), "quantity": quantity}
        if "gift" in text.lower():
            arguments["gift_wrap"] = True
        return "order_book", arguments
    author = _AUTHOR.search(text)
    if author is not None:
        return "search_books", {"query": author.group(1)}
    quoted = _QUOTED.search(text)
    if quoted is not None:
        return "get_book", {"title": quoted.group(1)}
    for title in CATALOG:
        if title.lower() in text.lower():
            return "get_book", {"title": title}
    return None


def _hits(content: str) -> list[dict[str, object]]:
    """The books a ``search_books`` result lists (its structured ``result``)."""
    try:
        found = json.loads(content or "{}")
    except ValueError:
        return []
    hits = found.get("result", []) if isinstance(found, dict) else found
    return [hit for hit in hits if isinstance(hit, dict)] if isinstance(hits, list) else []


class BookshopModel:
    """A rule-following stand-in for a language model (see the module docstring)."""

    name = "bookshop-rules"

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        """The next step: a tool call, or the answer."""
        start = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        results = [m for m in messages[start:] if isinstance(m, ToolMessage)]
        wanted = _first_call(messages[start].content or "")
        if not results:
            if wanted is None:
                return ModelResponse(content="I can search, look up and order books.")
            return _call(1, *wanted)
        last = results[-1]
        number = len(results) + 1
        if not last.is_error:
            if last.name == "search_books" and wanted is not None and wanted[0] == "get_book":
                hits = _hits(last.content)
                if hits and len(results) < _RETRIES:
                    return _call(number, "get_book", {"title": hits[0]["title"]})
            return ModelResponse(content=f"Here is what I found: {last.content}")
        if "temporarily unavailable" in last.content and wanted is not None:
            return _call(number, *wanted)  # the MCP layer counts the strikes
        if last.content.startswith("malformed_arguments") and wanted is not None:
            return _call(number, *wanted)
        if "No book titled" in last.content and wanted is not None and len(results) < _RETRIES:
            title = str(wanted[1].get("title", ""))
            stem = title[:-1] if title.endswith("s") else title
            return _call(number, "search_books", {"query": stem})
        return ModelResponse(content=f"Sorry, that did not work: {last.content}")


bookshop = MCPToolLoader(build_server())
"""The bookshop's tools (an in-process MCP server: one session per request)."""


async def agent(ctx: AgentContext) -> AgentOutput:
    """Answer a bookshop request with the tool loop over the bookshop's MCP tools."""
    async with bookshop.session() as tools:
        return await LoopAgent(BookshopModel(), ToolRegistry(tools), max_rounds=6).invoke(ctx)


card = build_agent_card(
    name="bookshop-agent",
    description="Finds, prices and orders books from the bookshop's catalog.",
    url="http://127.0.0.1:8000/",
    version="1.0.0",
    input_modes=("text/plain", "application/json"),
    skills=[
        skill(
            "books",
            "Find and order books",
            "Searches the catalog by author or title, looks up a book's price and stock, "
            "and orders copies.",
            tags=["books"],
            examples=["Which books by William Gibson do you have?", 'How much is "Dune"?'],
        )
    ],
)
