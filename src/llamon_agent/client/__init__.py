"""Calling other agents over A2A, where every failure arrives as a typed value.

Built on a2a-sdk's client (its transports and types), so it works against any A2A 0.3
server, llamon or not. ``AgentClient`` sends and returns a ``RemoteResult``; every
failure raises the ``RemoteAgentError`` family (see ``docs/client.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llamon_agent._lazy import lazy_exports

if TYPE_CHECKING:
    from llamon_agent.client.agent_client import AgentClient, CardMismatchError
    from llamon_agent.client.auth import ApiKey, Bearer, Credential
    from llamon_agent.client.card import clear_card_cache
    from llamon_agent.client.errors import (
        RemoteAgentError,
        RemoteApplicationErrorData,
        RemoteAuthRequiredError,
        RemoteGuardrailBlockedError,
        RemoteInternalError,
        RemoteInvalidInputError,
        RemoteNotFoundError,
        RemoteProtocolErrorData,
        RemoteRateLimitedError,
        RemoteTimeoutError,
        RemoteUnavailableError,
        remote_error_from_exception,
        remote_error_from_http,
        remote_error_from_jsonrpc,
        remote_error_from_task,
        remote_error_from_transport,
    )
    from llamon_agent.client.result import RemoteResult

_HOMES: dict[str, str] = {
    "AgentClient": "llamon_agent.client.agent_client",
    "CardMismatchError": "llamon_agent.client.agent_client",
    "ApiKey": "llamon_agent.client.auth",
    "Bearer": "llamon_agent.client.auth",
    "Credential": "llamon_agent.client.auth",
    "clear_card_cache": "llamon_agent.client.card",
    "RemoteAgentError": "llamon_agent.client.errors",
    "RemoteApplicationErrorData": "llamon_agent.client.errors",
    "RemoteAuthRequiredError": "llamon_agent.client.errors",
    "RemoteGuardrailBlockedError": "llamon_agent.client.errors",
    "RemoteInternalError": "llamon_agent.client.errors",
    "RemoteInvalidInputError": "llamon_agent.client.errors",
    "RemoteNotFoundError": "llamon_agent.client.errors",
    "RemoteProtocolErrorData": "llamon_agent.client.errors",
    "RemoteRateLimitedError": "llamon_agent.client.errors",
    "RemoteTimeoutError": "llamon_agent.client.errors",
    "RemoteUnavailableError": "llamon_agent.client.errors",
    "remote_error_from_exception": "llamon_agent.client.errors",
    "remote_error_from_http": "llamon_agent.client.errors",
    "remote_error_from_jsonrpc": "llamon_agent.client.errors",
    "remote_error_from_task": "llamon_agent.client.errors",
    "remote_error_from_transport": "llamon_agent.client.errors",
    "RemoteResult": "llamon_agent.client.result",
}
"""Where each public name lives; it is loaded from there on first use."""

__all__ = [
    "AgentClient",
    "ApiKey",
    "Bearer",
    "CardMismatchError",
    "Credential",
    "RemoteAgentError",
    "RemoteApplicationErrorData",
    "RemoteAuthRequiredError",
    "RemoteGuardrailBlockedError",
    "RemoteInternalError",
    "RemoteInvalidInputError",
    "RemoteNotFoundError",
    "RemoteProtocolErrorData",
    "RemoteRateLimitedError",
    "RemoteResult",
    "RemoteTimeoutError",
    "RemoteUnavailableError",
    "clear_card_cache",
    "remote_error_from_exception",
    "remote_error_from_http",
    "remote_error_from_jsonrpc",
    "remote_error_from_task",
    "remote_error_from_transport",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
