"""MCP tools for the tool loop, with automatic protection.

``MCPToolLoader`` connects to an MCP server (in-process, streamable HTTP or stdio) over
mcp 2.x's ``Client`` and lists its tools (``MCPToolLoader()``: the servers of an
``mcp.json``, see ``llamon_agent.mcp.config``); each tool is wrapped by
``wrap_tool_output_normalizer`` so argument mistakes, tool errors and crashes reach the
model as observations, transport failures are counted per tool per request (the 3rd
escalates), and a server's JSON-RPC refusal (``MCPError``) escalates at once.
``MCPConnectionPool`` keeps connections and tool lists across requests. See
``docs/mcp.md`` for the table and a guide for tool authors.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import TYPE_CHECKING

from llamon_agent._extras import requires_extra
from llamon_agent._lazy import lazy_exports

with requires_extra("mcp", "llamon_agent.mcp"):  # say so now, not on first use
    if find_spec("mcp") is None:
        raise ModuleNotFoundError("No module named 'mcp'", name="mcp")

if TYPE_CHECKING:
    from llamon_agent.mcp.arguments import check_arguments
    from llamon_agent.mcp.config import (
        MCP_CONFIG_FILENAME,
        MCPConfig,
        MCPConfigError,
        MCPServerConfig,
        find_mcp_config,
        load_mcp_config,
        read_mcp_config,
    )
    from llamon_agent.mcp.errors import (
        MCPLoadError,
        MCPProtocolError,
        MCPToolTimeoutError,
        MCPToolUnavailableError,
    )
    from llamon_agent.mcp.loader import (
        MCPConnectionPool,
        MCPSession,
        MCPToolLoader,
        ServerTarget,
    )
    from llamon_agent.mcp.normalizer import (
        DEFAULT_MAX_TRANSPORT_FAILURES,
        MCPTool,
        McpToolOutput,
        RequestBudget,
        ToolCaller,
        unavailable_text,
        wrap_tool_output_normalizer,
    )
    from llamon_agent.mcp.transport import (
        classify_mcp_failure,
        is_session_lost,
        is_transport_failure,
    )

__all__ = [
    "DEFAULT_MAX_TRANSPORT_FAILURES",
    "MCP_CONFIG_FILENAME",
    "MCPConfig",
    "MCPConfigError",
    "MCPConnectionPool",
    "MCPLoadError",
    "MCPProtocolError",
    "MCPServerConfig",
    "MCPSession",
    "MCPTool",
    "MCPToolLoader",
    "MCPToolTimeoutError",
    "MCPToolUnavailableError",
    "McpToolOutput",
    "RequestBudget",
    "ServerTarget",
    "ToolCaller",
    "check_arguments",
    "classify_mcp_failure",
    "find_mcp_config",
    "is_session_lost",
    "is_transport_failure",
    "load_mcp_config",
    "read_mcp_config",
    "unavailable_text",
    "wrap_tool_output_normalizer",
]

_HOMES: dict[str, str] = {
    "check_arguments": "llamon_agent.mcp.arguments",
    **dict.fromkeys(
        (
            "MCP_CONFIG_FILENAME",
            "MCPConfig",
            "MCPConfigError",
            "MCPServerConfig",
            "find_mcp_config",
            "load_mcp_config",
            "read_mcp_config",
        ),
        "llamon_agent.mcp.config",
    ),
    **dict.fromkeys(
        ("MCPLoadError", "MCPProtocolError", "MCPToolTimeoutError", "MCPToolUnavailableError"),
        "llamon_agent.mcp.errors",
    ),
    **dict.fromkeys(
        ("MCPConnectionPool", "MCPSession", "MCPToolLoader", "ServerTarget"),
        "llamon_agent.mcp.loader",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_MAX_TRANSPORT_FAILURES",
            "MCPTool",
            "McpToolOutput",
            "RequestBudget",
            "ToolCaller",
            "unavailable_text",
            "wrap_tool_output_normalizer",
        ),
        "llamon_agent.mcp.normalizer",
    ),
    **dict.fromkeys(
        ("classify_mcp_failure", "is_session_lost", "is_transport_failure"),
        "llamon_agent.mcp.transport",
    ),
}
"""Where each public name lives; it is loaded from there on first use: reading an
``mcp.json`` or an MCP error class does not load the MCP client (``MCPToolLoader`` does)."""


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
