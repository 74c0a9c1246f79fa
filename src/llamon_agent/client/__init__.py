"""Calling other agents over A2A, where every failure arrives as a typed value.

Built on a2a-sdk's client (its transports and types), so it works against any A2A 0.3
server, llamon or not.
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

__all__ = [
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
]

_HOMES: dict[str, str] = {
    "Call": "llamon_agent.client.combinators",
    "CompensationFailure": "llamon_agent.client.combinators",
    "Outcome": "llamon_agent.client.combinators",
    "Saga": "llamon_agent.client.combinators",
    "SagaFailedError": "llamon_agent.client.combinators",
    "SagaStep": "llamon_agent.client.combinators",
    "StepContext": "llamon_agent.client.combinators",
    "all_or_nothing": "llamon_agent.client.combinators",
    "best_effort": "llamon_agent.client.combinators",
    "saga_step": "llamon_agent.client.combinators",
}
"""Where each public name lives; it is loaded from there on first use."""

__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
