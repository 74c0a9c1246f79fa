"""A fault plan's provider failures meet a provider adapter's own retry policy.

``model_rate_limited`` and ``model_server_error`` fail the adapter's first attempt
(without a request to the provider) and the adapter handles them as it would a real 429
or 5xx: it waits ``Retry-After`` (or its backoff) and asks the (loopback) provider again.
"""

from __future__ import annotations

import pytest

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.events import EventBus, RunnerEvent, event_scope
from llamon_agent.core.faults import FaultPlan, ModelRateLimited, ModelServerError, fault_scope
from llamon_agent.loop import ToolRegistry, run_loop
from llamon_agent.loop.model import UserMessage
from tests.loop.providers.fakes import FakeProvider, FakeSleep, Wire


async def test_a_rate_limited_fault_is_waited_out_by_the_adapters_retries(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    fake.script(wire.answer("hello"))
    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    plan = FaultPlan([ModelRateLimited(kind="model_rate_limited", retry_after_ms=1500)])
    async with wire.make(fake.url, sleep=sleeper) as model:
        with event_scope(bus), fault_scope(plan):
            outcome = await run_loop(model, ToolRegistry(), "hi")

    assert (outcome.status, outcome.answer) == ("completed", "hello")
    assert outcome.model_retries == 1
    assert sleeper.waits == [pytest.approx(1.5)]
    assert len(fake.requests) == 1  # the injected 429 never reached the provider
    assert plan.fired == {"model_rate_limited": 1}
    await bus.flush()
    retry = next(e.trace_metadata for e in got if e.type == "model.retry")
    assert (retry["failure_reason"], retry["http_status"], retry["wait_ms"]) == (
        "rate_limited",
        429,
        1500,
    )


async def test_a_server_error_fault_is_retried_with_backoff(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    fake.script(wire.answer("hello"))
    plan = FaultPlan([ModelServerError(kind="model_server_error", status=502)])
    async with wire.make(fake.url, sleep=sleeper) as model:
        with fault_scope(plan):
            outcome = await run_loop(model, ToolRegistry(), "hi")
    assert (outcome.status, outcome.model_retries) == ("completed", 1)
    [wait] = sleeper.waits
    assert 0 < wait <= 1.0  # the policy's first backoff (0.5 s + up to 0.5 s jitter)
    assert len(fake.requests) == 1


@pytest.mark.reason("rate_limited")
async def test_without_retries_the_injected_429_is_the_runs_failure(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    fake.script(wire.answer("never sent"))
    plan = FaultPlan([ModelRateLimited(kind="model_rate_limited", retry_after_ms=700)])
    async with wire.make(fake.url, sleep=sleeper, max_retries=0) as model:
        with fault_scope(plan):
            outcome = await run_loop(model, ToolRegistry(), "hi")
        assert outcome.status == "model_error"
        found = outcome.classification
        assert found is not None
        assert (found.code, found.reason, found.retry_after_ms, found.retried) == (
            ErrorCode.RATE_LIMITED,
            "rate_limited",
            700,
            0,
        )
        assert fake.requests == []
        assert sleeper.waits == []
        # the next call, outside the plan, reaches the provider
        assert (await model.complete([UserMessage("hi")], [])).content == "never sent"


async def test_a_retry_after_beyond_the_policys_limit_is_raised_at_once(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    fake.script(wire.answer("never sent"))
    plan = FaultPlan([ModelRateLimited(kind="model_rate_limited", retry_after_ms=120_000)])
    async with wire.make(fake.url, sleep=sleeper) as model:
        with fault_scope(plan):
            outcome = await run_loop(model, ToolRegistry(), "hi")
    assert outcome.status == "model_error"
    assert outcome.classification is not None
    assert outcome.classification.retry_after_ms == 120_000
    assert sleeper.waits == []
    assert fake.requests == []


async def test_a_model_called_outside_the_loop_is_not_faulted(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    fake.script(wire.answer("hello"))
    plan = FaultPlan([ModelRateLimited(kind="model_rate_limited")])
    async with wire.make(fake.url, sleep=sleeper) as model:
        with fault_scope(plan):
            response = await model.complete([UserMessage("hi")], [])
    assert (response.content, response.retries) == ("hello", 0)
    assert plan.fired == {}  # the seam is the loop's model call, not the adapter
