"""The bookshop MCP server: each failure raised the way its reader needs it.

Three ways a tool can fail, and who reads each (mcp 2.x ``MCPServer``):

* ``raise ToolError("...")`` -- a failure a smarter model could have avoided (a misspelt
  title, a quantity above the stock). The call *returns* ``is_error=True`` with
  ``Error executing tool <name>: <your text>``; the model reads it and tries again.
* ``raise MCPError(code=..., message=...)`` -- the request itself must be refused and no
  model can fix it (here: the shop was started read-only, so ordering is switched off).
  The whole ``tools/call`` fails with a JSON-RPC error for the host application.
* anything else is a crash: the model sees only ``Error executing tool <name>``, the
  traceback goes to this server's log at ERROR.

A resource that does not exist raises ``ResourceNotFoundError`` (JSON-RPC -32602 with the
URI in ``data``); resources have no ``is_error`` half-result.

``search_books`` and ``get_book`` are annotated ``readOnlyHint: true`` (a loaded tool's
``MCPTool.mutating`` is False); ``order_book`` changes the stock (``readOnlyHint: false``,
``destructiveHint: true``): a plan-mode run does not call it.

Run it (``pip install 'llamon-agent[mcp]'``)::

    python -m llamon_agent.examples.bookshop                      # stdio
    python -m llamon_agent.examples.bookshop --http --port 8765   # streamable HTTP at /mcp
    python -m llamon_agent.examples.bookshop --read-only          # orders refused (MCPError)

and load its tools with ``llamon_agent.mcp.MCPToolLoader`` (see ``docs/mcp.md``), or in
process: ``MCPToolLoader(build_server())``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from llamon_agent._extras import requires_extra

with requires_extra("mcp", "llamon_agent.examples.bookshop"):
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_REQUEST, ToolAnnotations

__all__ = ["CATALOG", "READY_LINE", "Book", "build_server", "main", "serve_http"]


@dataclass(frozen=True, slots=True)
class Book:
    title: str
    author: str
    price: float
    stock: int


CATALOG: dict[str, Book] = {
    book.title: book
    for book in (
        Book("Dune", "Frank Herbert", 9.99, 3),
        Book("Neuromancer", "William Gibson", 8.50, 1),
        Book("The Left Hand of Darkness", "Ursula K. Le Guin", 10.25, 0),
        Book("Snow Crash", "Neal Stephenson", 7.75, 5),
    )
}

READY_LINE = "bookshop MCP server ready"
"""Printed (to stderr) once the HTTP server listens; tests wait for it."""


def _find(title: str) -> Book:
    book = CATALOG.get(title)
    if book is None:
        # The model guessed the title: it can read this and try a better one.
        raise ToolError(f"No book titled {title!r} in the catalog. Try search_books first.")
    return book


def build_server(*, read_only: bool = False, name: str = "Bookshop") -> MCPServer:
    """A fresh bookshop server; ``read_only`` switches ordering off (an ``MCPError``)."""
    server = MCPServer(name, instructions="Search, look up and order books.")
    stock = {title: book.stock for title, book in CATALOG.items()}

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def search_books(
        query: str, limit: Annotated[int, Field(ge=1, le=20)] = 5
    ) -> list[dict[str, str]]:
        """Find books whose title or author contains the query (case-insensitive)."""
        needle = query.strip().lower()
        if not needle:
            raise ToolError("The query is empty; give a word from a title or an author.")
        hits = [
            {"title": book.title, "author": book.author}
            for book in CATALOG.values()
            if needle in book.title.lower() or needle in book.author.lower()
        ]
        return hits[:limit]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def get_book(title: str) -> dict[str, str | float | int]:
        """The catalog entry of one book, by its exact title."""
        book = _find(title)
        return {
            "title": book.title,
            "author": book.author,
            "price": book.price,
            "stock": stock[book.title],
        }

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def order_book(title: str, quantity: int = 1, gift_wrap: bool = False) -> str:
        """Order copies of a book by its exact title."""
        if read_only:
            # No model can fix this: the server is not serving orders to anyone.
            raise MCPError(
                code=INVALID_REQUEST,
                message="This bookshop is read-only; ordering is switched off.",
            )
        book = _find(title)
        if quantity < 1:
            raise ToolError("quantity must be at least 1.")
        if stock[book.title] < quantity:
            raise ToolError(
                f"Only {stock[book.title]} copies of {book.title!r} in stock; "
                "order fewer or pick another book."
            )
        stock[book.title] -= quantity
        wrap = " gift-wrapped" if gift_wrap else ""
        return f"Ordered {quantity}{wrap} copy(ies) of {book.title!r} by {book.author}."

    @server.resource("books://{title}")
    def book(title: str) -> str:
        """The catalog entry for one book."""
        found = CATALOG.get(title)
        if found is None:
            raise ResourceNotFoundError(f"No book titled {title!r} in the catalog.")
        return f"{found.title} by {found.author}"

    return server


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--read-only", action="store_true", help="refuse orders (MCPError)")
    args = parser.parse_args(argv)
    server = build_server(read_only=args.read_only)
    if args.http:
        serve_http(server, host=args.host, port=args.port)
    else:
        server.run("stdio")


def serve_http(server: MCPServer, *, host: str, port: int) -> None:
    """Serve ``server`` over streamable HTTP at ``/mcp``.

    The socket is bound before anything else, then ``READY_LINE`` and the URL are printed
    to stderr (``--port 0`` picks a free port; the printed URL names it). Connections made
    after that line wait in the listen backlog until uvicorn accepts them.
    """
    import socket
    import sys

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    bound_port = sock.getsockname()[1]
    app = server.streamable_http_app(host=host)
    http = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"{READY_LINE} on http://{host}:{bound_port}/mcp", file=sys.stderr, flush=True)
    http.run(sockets=[sock])


if __name__ == "__main__":
    main()
