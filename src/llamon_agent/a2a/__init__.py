"""Serving agents over A2A 0.3, where every failure becomes the right answer.

Start with ``create_app(agent, card)`` (a Starlette app) or ``serve_agent`` /
``llamon serve module:agent``; write agents against ``AgentContext``; build the card with
``build_agent_card``. See docs/a2a-server.md.

Each name loads its module on first use: ``from llamon_agent.a2a import AgentContext``
does not load the server (Starlette, the stores); ``create_app`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llamon_agent._lazy import lazy_exports

if TYPE_CHECKING:
    from llamon_agent.a2a.agent import (
        Agent,
        AgentContext,
        AgentOutput,
        Chunk,
        Completed,
        Final,
        FinalOutput,
        FlowContext,
        StreamingAgent,
        as_agent,
    )
    from llamon_agent.a2a.auth import AuthConfig
    from llamon_agent.a2a.card import (
        AuthSpec,
        build_agent_card,
        build_extended_card,
        lint_agent_card,
        skill,
    )
    from llamon_agent.a2a.console import ConsoleOptions
    from llamon_agent.a2a.executor import CustomAgentExecutor
    from llamon_agent.a2a.protocol import RequestLimits, protocol_error
    from llamon_agent.a2a.push_policy import PushPolicy
    from llamon_agent.a2a.serve import ServeOptions, serve_agent
    from llamon_agent.a2a.server import create_app
    from llamon_agent.a2a.stores import Stores, open_stores, reconcile_orphaned_tasks

__all__ = [
    "Agent",
    "AgentContext",
    "AgentOutput",
    "AuthConfig",
    "AuthSpec",
    "Chunk",
    "Completed",
    "ConsoleOptions",
    "CustomAgentExecutor",
    "Final",
    "FinalOutput",
    "FlowContext",
    "PushPolicy",
    "RequestLimits",
    "ServeOptions",
    "Stores",
    "StreamingAgent",
    "as_agent",
    "build_agent_card",
    "build_extended_card",
    "create_app",
    "lint_agent_card",
    "open_stores",
    "protocol_error",
    "reconcile_orphaned_tasks",
    "serve_agent",
    "skill",
]

_HOMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "Agent",
            "AgentContext",
            "AgentOutput",
            "Chunk",
            "Completed",
            "Final",
            "FinalOutput",
            "FlowContext",
            "StreamingAgent",
            "as_agent",
        ),
        "llamon_agent.a2a.agent",
    ),
    "AuthConfig": "llamon_agent.a2a.auth",
    **dict.fromkeys(
        ("AuthSpec", "build_agent_card", "build_extended_card", "lint_agent_card", "skill"),
        "llamon_agent.a2a.card",
    ),
    "ConsoleOptions": "llamon_agent.a2a.console",
    "CustomAgentExecutor": "llamon_agent.a2a.executor",
    **dict.fromkeys(("RequestLimits", "protocol_error"), "llamon_agent.a2a.protocol"),
    "PushPolicy": "llamon_agent.a2a.push_policy",
    **dict.fromkeys(("ServeOptions", "serve_agent"), "llamon_agent.a2a.serve"),
    "create_app": "llamon_agent.a2a.server",
    **dict.fromkeys(
        ("Stores", "open_stores", "reconcile_orphaned_tasks"), "llamon_agent.a2a.stores"
    ),
}
"""Where each public name lives; it is loaded from there on first use."""


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
