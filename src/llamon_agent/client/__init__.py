"""Calling other agents over A2A, where every failure arrives as a typed value.

Built on a2a-sdk's client (its transports and types), so it works against any A2A 0.3
server, llamon or not. ``AgentClient(url).send(...)`` gives a ``RemoteResult`` or raises
one of the ``RemoteAgentError`` family (one class per errorCode, the remote error data
parsed). ``call_with_retry`` retries a call by the kind of its failure
(``RetryPolicy``); ``all_or_nothing``, ``best_effort`` and ``Saga`` call several agents
at once; ``chain`` hands each agent's answer to the next (large artifacts by reference,
through an ``ArtifactShelf``). ``AgentClient.stream`` yields typed events and survives a
dropped connection; ``call_agent_stream`` / ``build_agent_context`` call an agent from a
flow node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llamon_agent._lazy import lazy_exports

if TYPE_CHECKING:
    from llamon_agent.client.agent_client import (
        AgentClient,
        CardMismatchError,
        RemoteTaskNotCancelableError,
    )
    from llamon_agent.client.auth import ApiKey, Bearer, Credential
    from llamon_agent.client.card import clear_card_cache
    from llamon_agent.client.catalog import CatalogClient, CatalogEntry, PublishResult, SearchPage
    from llamon_agent.client.chaining import (
        DEFAULT_BY_REFERENCE_ABOVE,
        ChainFailedError,
        ChainResult,
        ChainStep,
        chain,
    )
    from llamon_agent.client.combinators import (
        Call,
        CompensationFailure,
        Outcome,
        Saga,
        SagaFailedError,
        SagaStep,
        StepContext,
        all_or_nothing,
        best_effort,
        saga_step,
    )
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
    from llamon_agent.client.extensions import IDEMPOTENT_SEND_EXTENSION
    from llamon_agent.client.flow_helpers import (
        AgentCallContext,
        build_agent_context,
        call_agent_stream,
    )
    from llamon_agent.client.push import PushReceiver, PushReceiverFullError, push_receiver
    from llamon_agent.client.result import RemoteResult
    from llamon_agent.client.retry import RetryClock, RetryKind, RetryPolicy, call_with_retry
    from llamon_agent.client.shelf import ArtifactShelf, ArtifactTooLargeError, ShelfFullError
    from llamon_agent.client.stream import ArtifactChunk, FinalEvent, StatusEvent, StreamEvent

__all__ = [
    "DEFAULT_BY_REFERENCE_ABOVE",
    "IDEMPOTENT_SEND_EXTENSION",
    "AgentCallContext",
    "AgentClient",
    "ApiKey",
    "ArtifactChunk",
    "ArtifactShelf",
    "ArtifactTooLargeError",
    "Bearer",
    "Call",
    "CardMismatchError",
    "CatalogClient",
    "CatalogEntry",
    "ChainFailedError",
    "ChainResult",
    "ChainStep",
    "CompensationFailure",
    "Credential",
    "FinalEvent",
    "Outcome",
    "PublishResult",
    "PushReceiver",
    "PushReceiverFullError",
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
    "RemoteTaskNotCancelableError",
    "RemoteTimeoutError",
    "RemoteUnavailableError",
    "RetryClock",
    "RetryKind",
    "RetryPolicy",
    "Saga",
    "SagaFailedError",
    "SagaStep",
    "SearchPage",
    "ShelfFullError",
    "StatusEvent",
    "StepContext",
    "StreamEvent",
    "all_or_nothing",
    "best_effort",
    "build_agent_context",
    "call_agent_stream",
    "call_with_retry",
    "chain",
    "clear_card_cache",
    "push_receiver",
    "remote_error_from_exception",
    "remote_error_from_http",
    "remote_error_from_jsonrpc",
    "remote_error_from_task",
    "remote_error_from_transport",
    "saga_step",
]

_HOMES: dict[str, str] = {
    **dict.fromkeys(("IDEMPOTENT_SEND_EXTENSION",), "llamon_agent.client.extensions"),
    **dict.fromkeys(
        (
            "AgentClient",
            "CardMismatchError",
            "RemoteTaskNotCancelableError",
        ),
        "llamon_agent.client.agent_client",
    ),
    **dict.fromkeys(("ApiKey", "Bearer", "Credential"), "llamon_agent.client.auth"),
    **dict.fromkeys(("clear_card_cache",), "llamon_agent.client.card"),
    **dict.fromkeys(
        ("CatalogClient", "CatalogEntry", "PublishResult", "SearchPage"),
        "llamon_agent.client.catalog",
    ),
    **dict.fromkeys(
        ("DEFAULT_BY_REFERENCE_ABOVE", "ChainFailedError", "ChainResult", "ChainStep", "chain"),
        "llamon_agent.client.chaining",
    ),
    **dict.fromkeys(
        (
            "Call",
            "CompensationFailure",
            "Outcome",
            "Saga",
            "SagaFailedError",
            "SagaStep",
            "StepContext",
            "all_or_nothing",
            "best_effort",
            "saga_step",
        ),
        "llamon_agent.client.combinators",
    ),
    **dict.fromkeys(
        (
            "RemoteAgentError",
            "RemoteApplicationErrorData",
            "RemoteAuthRequiredError",
            "RemoteGuardrailBlockedError",
            "RemoteInternalError",
            "RemoteInvalidInputError",
            "RemoteNotFoundError",
            "RemoteProtocolErrorData",
            "RemoteRateLimitedError",
            "RemoteTimeoutError",
            "RemoteUnavailableError",
            "remote_error_from_exception",
            "remote_error_from_http",
            "remote_error_from_jsonrpc",
            "remote_error_from_task",
            "remote_error_from_transport",
        ),
        "llamon_agent.client.errors",
    ),
    **dict.fromkeys(
        ("PushReceiver", "PushReceiverFullError", "push_receiver"), "llamon_agent.client.push"
    ),
    **dict.fromkeys(
        ("AgentCallContext", "build_agent_context", "call_agent_stream"),
        "llamon_agent.client.flow_helpers",
    ),
    **dict.fromkeys(("RemoteResult",), "llamon_agent.client.result"),
    **dict.fromkeys(
        ("ArtifactChunk", "FinalEvent", "StatusEvent", "StreamEvent"), "llamon_agent.client.stream"
    ),
    **dict.fromkeys(
        ("RetryClock", "RetryKind", "RetryPolicy", "call_with_retry"), "llamon_agent.client.retry"
    ),
    **dict.fromkeys(
        ("ArtifactShelf", "ArtifactTooLargeError", "ShelfFullError"), "llamon_agent.client.shelf"
    ),
}
"""Where each public name lives; it is loaded from there on first use."""

__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
