"""Calling other agents over A2A, where every failure arrives as a typed value.

Built on a2a-sdk's client (its transports and types), so it works against any A2A 0.3
server, llamon or not. ``call_with_retry`` retries a call by the kind of its failure
(``RetryPolicy``); ``all_or_nothing``, ``best_effort`` and ``Saga`` call several agents
at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llamon_agent._lazy import lazy_exports

if TYPE_CHECKING:
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
    from llamon_agent.client.retry import RetryKind, RetryPolicy, call_with_retry

__all__ = [
    "Call",
    "CompensationFailure",
    "Outcome",
    "RetryKind",
    "RetryPolicy",
    "Saga",
    "SagaFailedError",
    "SagaStep",
    "StepContext",
    "all_or_nothing",
    "best_effort",
    "call_with_retry",
    "saga_step",
]

_HOMES: dict[str, str] = {
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
    **dict.fromkeys(("RetryKind", "RetryPolicy", "call_with_retry"), "llamon_agent.client.retry"),
}
"""Where each public name lives; it is loaded from there on first use."""

__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
