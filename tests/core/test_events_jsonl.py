"""The JSON text of an event (``event_to_json``) and the JSON-lines subscriber's writes.

``event_to_json`` has a fast path for the usual event and the reference encoder for
anything else; both must give exactly ``json.dumps(dataclasses.asdict(event))``. The
JSON-lines subscriber writes a burst of events in one write: one line per event, in
order; an event that cannot be encoded, or a failed write, is counted and logged without
stopping the next ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamon_agent.core.events import EventBus, RunnerEvent, emit, event_scope, event_to_json

_SETTINGS = settings(
    max_examples=600,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# every code point, lone surrogates included (json.dumps escapes them; so must we)
_TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_MAPPINGS = st.dictionaries(_TEXT, _JSON, max_size=4)
_MAYBE_TEXT = st.none() | _TEXT


@st.composite
def _events(draw: st.DrawFn) -> RunnerEvent:
    return RunnerEvent(
        draw(_TEXT),
        draw(_TEXT),
        draw(_TEXT),
        draw(st.integers(min_value=-(2**70), max_value=2**70)),
        draw(_MAYBE_TEXT),
        draw(_MAYBE_TEXT),
        draw(_MAPPINGS),
        draw(_MAYBE_TEXT),
        draw(_MAYBE_TEXT),
        draw(_MAYBE_TEXT),
        draw(st.floats(allow_nan=False, allow_infinity=False)),
        extra=draw(_MAPPINGS),
    )


def _reference(event: RunnerEvent) -> str:
    return json.dumps(dataclasses.asdict(event))


@_SETTINGS
@given(_events())
def test_event_to_json_is_json_dumps_of_asdict_for_generated_events(event: RunnerEvent) -> None:
    text = event_to_json(event)
    assert text == _reference(event)
    assert json.loads(text) == json.loads(_reference(event))
    assert text.isascii()
    assert "\n" not in text


@_SETTINGS
@given(st.lists(_events(), min_size=1, max_size=8))
def test_a_burst_written_by_the_jsonl_subscriber_is_one_reference_line_per_event(
    events: list[RunnerEvent],
) -> None:
    stream = io.StringIO()

    async def publish_all() -> tuple[int, int]:
        bus = EventBus()
        sub = bus.subscribe_jsonl(stream)
        for event in events:
            bus.publish(event)
        assert await bus.flush()
        return sub.delivered, sub.failed

    assert asyncio.run(publish_all()) == (len(events), 0)
    lines = stream.getvalue().split("\n")
    assert lines[-1] == ""  # every line ends with a newline
    assert lines[:-1] == [_reference(event) for event in events]
    assert [json.loads(line) for line in lines[:-1]] == [
        json.loads(_reference(event)) for event in events
    ]


def test_the_usual_events_of_a_run_are_the_reference_text() -> None:
    cases = [
        RunnerEvent("run.started", "tool_loop", "ab12", 0, None, None, {"max_rounds": 3}),
        RunnerEvent("step.started", "tool_loop", "ab12", 2, "lookup", "call_1", {}),
        RunnerEvent("task.working", "a2a_serve", task_id="t", context_id="c", node=None),
        RunnerEvent("note", "execute", trace_metadata={"text": "Zürich ✓ 東京", "n": None}),
        RunnerEvent("deep", "execute", extra={"a": {"b": [1, 2.5, {"c": [True, None]}]}}),
        RunnerEvent("round", "execute", round=2**80, time=-0.0),
    ]
    for event in cases:
        assert event_to_json(event) == _reference(event)
    assert '"Z\\u00fcrich \\u2713 \\u6771\\u4eac"' in event_to_json(cases[3])


def test_unusual_fields_get_what_json_dumps_gives_them() -> None:
    flagged = RunnerEvent("a", "b", round=True)  # a bool is JSON true, not 1
    assert event_to_json(flagged) == _reference(flagged)
    assert json.loads(event_to_json(flagged))["round"] is True
    for when in (math.inf, -math.inf):
        event = RunnerEvent("a", "b", time=when)
        assert event_to_json(event) == _reference(event)
    odd = RunnerEvent("a", "b", time=math.nan)
    assert event_to_json(odd) == _reference(odd)
    assert '"time": NaN' in event_to_json(odd)
    whole = RunnerEvent("a", "b", time=12)  # an int time stays an int
    assert event_to_json(whole) == _reference(whole)
    keys: dict[Any, object] = {1: "one", None: "none", 2.5: "x"}  # JSON's key forms
    keyed = RunnerEvent("a", "b", trace_metadata=keys)
    assert event_to_json(keyed) == _reference(keyed)


def test_values_json_has_no_form_for_are_written_as_the_reference_encoder_does() -> None:
    event = RunnerEvent(
        "a",
        "b",
        trace_metadata={"pair": (1, 2), "where": Path("/x")},
    )
    assert json.loads(event_to_json(event))["trace_metadata"] == {"pair": [1, 2], "where": "/x"}
    proxied = RunnerEvent("a", "b", trace_metadata=_Proxy({"k": 1}))
    assert json.loads(event_to_json(proxied))["trace_metadata"] == {"k": 1}
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    with pytest.raises(ValueError, match="Circular reference"):
        event_to_json(RunnerEvent("a", "b", trace_metadata=cyclic))


class _Proxy(dict[str, object]):
    """A dict subclass (not a plain dict): the reference path."""


async def test_an_event_that_cannot_be_encoded_is_counted_and_the_rest_of_its_burst_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()
    stream = io.StringIO()
    sub = bus.subscribe_jsonl(stream)
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    good = [RunnerEvent("ok", "execute", round=n) for n in range(3)]
    with caplog.at_level(logging.WARNING, logger="llamon_agent.events"):
        bus.publish(good[0])
        bus.publish(RunnerEvent("loop.bad", "execute", trace_metadata=cyclic))
        bus.publish(good[1])
        bus.publish(good[2])
        assert await bus.flush()
    assert (sub.delivered, sub.failed, sub.dropped) == (3, 1, 0)
    assert stream.getvalue().splitlines() == [_reference(event) for event in good]
    assert [r.getMessage() for r in caplog.records] == [
        "event subscriber jsonl raised ValueError on loop.bad; ignored"
    ]
    after = RunnerEvent("ok", "execute", round=9)  # the next event is still written
    bus.publish(after)
    assert await bus.flush()
    assert stream.getvalue().splitlines()[-1] == _reference(after)
    assert (sub.delivered, sub.failed) == (4, 1)


class _FlakyStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.broken = True

    def write(self, text: str) -> int:
        if self.broken:
            raise OSError("No space left on device: /var/log/secret-host")
        return super().write(text)


async def test_a_failed_write_counts_its_burst_failed_and_the_next_burst_is_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()
    stream = _FlakyStream()
    sub = bus.subscribe_jsonl(stream)
    with caplog.at_level(logging.WARNING, logger="llamon_agent.events"):
        with event_scope(bus, task_id="t-1"):
            emit("first.mark", "execute")
            emit("second.mark", "execute")
        assert await bus.flush()
    assert (sub.delivered, sub.failed) == (0, 2)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["event subscriber jsonl raised OSError on first.mark; ignored"]
    assert "secret-host" not in caplog.text
    stream.broken = False
    with event_scope(bus, task_id="t-1"):
        emit("third.mark", "execute")
    assert await bus.flush()
    assert (sub.delivered, sub.failed) == (1, 2)
    [row] = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert (row["type"], row["task_id"]) == ("third.mark", "t-1")


async def test_a_burst_is_one_write_and_a_full_queue_still_drops(tmp_path: Path) -> None:
    bus = EventBus()
    stream = _CountingStream()
    sub = bus.subscribe_jsonl(stream, maxsize=5)
    for n in range(8):  # no await between: one burst, 3 past the queue's room
        bus.publish(RunnerEvent("burst", "execute", round=n))
    assert await bus.flush()
    assert stream.writes == 1
    assert (sub.delivered, sub.dropped, sub.failed) == (5, 3, 0)
    assert [json.loads(line)["round"] for line in stream.getvalue().splitlines()] == [
        0,
        1,
        2,
        3,
        4,
    ]


class _CountingStream(io.StringIO):
    writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def test_an_event_is_read_back_by_from_dict_from_its_json_line() -> None:
    event = RunnerEvent(
        "step.failed",
        "tool_loop",
        "r1",
        3,
        "lookup",
        "c1",
        {"failure_reason": "timeout", "error_code": "TIMEOUT", "retryable": True},
        "t1",
        "c1",
        None,
        1700000000.25,
        {"origin": "ünïcode"},
    )
    again = RunnerEvent.from_dict(json.loads(event_to_json(event)))
    assert again == event
