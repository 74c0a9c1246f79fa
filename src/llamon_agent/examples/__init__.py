"""Example agents and servers that ship with llamon-agent, importable anywhere.

* ``llamon_agent.examples.demo_agent`` -- the agent ``llamon demo`` serves: one command per
  kind of answer (success, failures, partial results, a failing stream, input-required).
* ``llamon_agent.examples.bookshop`` -- an MCP server whose tools fail the way each reader
  needs (``ToolError`` for the model, ``MCPError`` for the host); needs
  ``llamon-agent[mcp]``. ``python -m llamon_agent.examples.bookshop --help``.

Nothing is imported here: each module loads only what it needs.
"""

__all__: list[str] = []
