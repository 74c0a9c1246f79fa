"""Serving agents over A2A 0.3, where every failure becomes the right answer.

Start with ``create_app(agent, card)`` (a Starlette app) or ``serve_agent`` /
``llamon serve module:agent``; write agents against ``AgentContext``; build the card with
``build_agent_card``. See docs/a2a-server.md.
"""

from __future__ import annotations

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
