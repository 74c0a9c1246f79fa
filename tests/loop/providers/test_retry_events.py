"""Model calls emit model.attempt and model.retry (reason, status, wait) runner events."""

from __future__ import annotations

import json

from llamon_agent.core.events import EventBus, RunnerEvent, event_scope
from llamon_agent.loop.model import UserMessage
from tests.loop.providers.fakes import SECRET, FakeProvider, FakeSleep, Wire


async def test_a_429_then_success_is_two_attempts_and_one_retry(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    fake.script(wire.error(429, f"slow down {SECRET}", {"Retry-After": "2"}), wire.answer("ok"))
    with event_scope(bus, task_id="t-1"):
        async with wire.make(fake.url, sleep=sleeper) as model:
            response = await model.complete([UserMessage("hi")], [])
    assert response.retries == 1
    assert await bus.flush()
    assert [(e.type, e.stage, e.task_id) for e in got] == [
        ("model.attempt", "model_call", "t-1"),
        ("model.retry", "model_call", "t-1"),
        ("model.attempt", "model_call", "t-1"),
    ]
    assert [e.trace_metadata["attempt"] for e in got] == [1, 1, 2]
    retry = got[1].trace_metadata
    assert (
        retry["failure_reason"],
        retry["error_code"],
        retry["http_status"],
        retry["wait_ms"],
        retry["max_retries"],
    ) == ("rate_limited", "RATE_LIMITED", 429, 2000, 2)
    assert SECRET not in json.dumps([e.trace_metadata for e in got])
