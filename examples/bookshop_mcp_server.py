"""The bookshop MCP server, as a script: ``python examples/bookshop_mcp_server.py --http``.

The server lives in the package (``llamon_agent.examples.bookshop``), so it also runs as
``python -m llamon_agent.examples.bookshop`` outside this repository.
"""

from llamon_agent.examples.bookshop import (
    CATALOG,
    READY_LINE,
    Book,
    build_server,
    main,
    serve_http,
)

__all__ = ["CATALOG", "READY_LINE", "Book", "build_server", "main", "serve_http"]

if __name__ == "__main__":
    main()
