"""``complete_model``: the one place the tool loop calls a model, and its fault seam.

``run_loop`` and the ReAct graph (``build_react_graph``) both call the model through
``complete_model(model, messages, tools)``. In a normal run it is ``model.complete(...)``
after one context-variable lookup. Under a Quality Lab fault plan (``core.faults``) the
plan's next model fault (each fires once, in order) replaces one model call:

========================  ==================================================================
fault ``kind``            what the loop gets instead of the model's answer
========================  ==================================================================
``model_malformed_json``  a call of the first offered tool whose arguments are
                          ``{"broken": `` (the loop's ``malformed_arguments`` observation;
                          the model answers the next round); with no tool offered, that
                          text as the answer
``model_empty_answer``    ``ModelResponse(content=None)`` (``invalid_model_response``)
``model_rate_limited``    ``httpx.HTTPStatusError`` 429 with ``Retry-After`` /
                          ``retry-after-ms`` (``RATE_LIMITED``, ``retryAfterMs``)
``model_server_error``    ``httpx.HTTPStatusError`` with the fault's 5xx status
                          (``UPSTREAM_UNAVAILABLE``)
========================  ==================================================================

For a provider adapter (``OpenAIChatModel``, ``AnthropicMessagesModel``) the two HTTP
faults fail the adapter's first attempt instead (``providers._retry.first_attempt_fails``),
so its own retry policy handles them as it would a real 429 or 5xx: a 429 whose
``Retry-After`` is within the policy's limit is waited out and the call tried again. For
any other model the error is raised where ``model.complete`` would have raised it.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Sequence
from typing import Final, assert_never

import httpx

from llamon_agent.core.faults import (
    FaultPlan,
    ModelEmptyAnswer,
    ModelMalformedJson,
    ModelRateLimited,
    ModelServerError,
    active_faults,
)
from llamon_agent.loop.model import ChatMessage, Model, ModelResponse, RawToolCall, ToolSpec
from llamon_agent.loop.providers._base import ProviderModel
from llamon_agent.loop.providers._retry import first_attempt_fails

__all__ = ["MALFORMED_ARGUMENTS", "complete_model", "injected_http_error"]

MALFORMED_ARGUMENTS: Final = '{"broken": '
"""The arguments (or answer) a ``model_malformed_json`` fault gives: JSON cut short."""

_INJECTED_URL: Final = "http://model.invalid/injected-fault"
"""The request an injected provider error names (no real host: ``.invalid`` never resolves)."""


def complete_model(
    model: Model, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
) -> Awaitable[ModelResponse]:
    """One model call, to be awaited: ``model.complete(messages, tools)``, unless the
    active fault plan has a model fault left (see the module docstring). Raises what the
    model (or the injected provider failure) raises.

    Without a plan it returns ``model.complete``'s own awaitable (no extra coroutine).
    """
    plan = active_faults()
    if plan is None:
        return model.complete(messages, tools)
    return _complete_under(plan, model, messages, tools)


async def _complete_under(
    plan: FaultPlan, model: Model, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
) -> ModelResponse:
    fault = plan.for_model()
    if fault is None:
        return await model.complete(messages, tools)
    if isinstance(fault, ModelMalformedJson):
        if not tools:
            return ModelResponse(content=MALFORMED_ARGUMENTS)
        call = RawToolCall(f"fault_{secrets.token_hex(4)}", tools[0].name, MALFORMED_ARGUMENTS)
        return ModelResponse(tool_calls=(call,))
    if isinstance(fault, ModelEmptyAnswer):
        return ModelResponse(content=None)
    if isinstance(fault, ModelRateLimited | ModelServerError):
        error = injected_http_error(fault)
        if isinstance(model, ProviderModel):
            with first_attempt_fails(error):
                return await model.complete(messages, tools)
        raise error
    assert_never(fault)


def injected_http_error(fault: ModelRateLimited | ModelServerError) -> httpx.HTTPStatusError:
    """The provider failure a fault stands for: a 429 carrying ``retry-after-ms`` and
    ``Retry-After`` (seconds), or the fault's 5xx; no real request or host in it."""
    request = httpx.Request("POST", _INJECTED_URL)
    if isinstance(fault, ModelRateLimited):
        millis = fault.retry_after_ms
        headers = {"retry-after-ms": str(millis), "retry-after": f"{millis / 1000:g}"}
        response = httpx.Response(429, headers=headers, request=request)
    else:
        response = httpx.Response(fault.status, request=request)
    phrase = f" {response.reason_phrase}" if response.reason_phrase else ""
    return httpx.HTTPStatusError(
        f"Model provider answered HTTP {response.status_code}{phrase} (injected fault)",
        request=request,
        response=response,
    )
