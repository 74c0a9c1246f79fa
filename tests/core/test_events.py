"""RunnerEvent, failure_metadata, and what is kept (and scrubbed) of upstream fields."""

from __future__ import annotations

import dataclasses
import json

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.events import RunnerEvent, event_to_json, failure_metadata
from llamon_agent.core.failures import FailureRecord
from llamon_agent.loop import LoopEvent

SECRET = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"


def test_a_loop_event_is_a_runner_event_with_the_same_positional_fields() -> None:
    event = LoopEvent("step.started", "tool_loop", "run-1", 2, "lookup", "c1", {"k": 1})
    assert isinstance(event, RunnerEvent)
    assert (event.type, event.stage, event.run_id, event.round, event.tool, event.step_id) == (
        "step.started",
        "tool_loop",
        "run-1",
        2,
        "lookup",
        "c1",
    )
    assert (event.task_id, event.context_id, event.node, event.extra) == (None, None, None, {})


def test_asdict_is_json_ready_and_names_every_field() -> None:
    event = RunnerEvent(
        "task.failed", "a2a_serve", task_id="t1", context_id="c1", node="n", extra={"a": 1}
    )
    data = json.loads(json.dumps(dataclasses.asdict(event)))
    assert sorted(data) == sorted(
        [
            "type",
            "stage",
            "run_id",
            "round",
            "tool",
            "step_id",
            "trace_metadata",
            "task_id",
            "context_id",
            "node",
            "time",
            "extra",
        ]
    )
    assert json.loads(event_to_json(event)) == data


def test_failure_metadata_carries_reason_code_retryable_and_http_status() -> None:
    record = FailureRecord.of("http_5xx", "Bad gateway", evidence={"http_status": 502})
    meta = failure_metadata(record)
    assert (
        meta["failure_reason"],
        meta["error_code"],
        meta["retryable"],
        meta["http_status"],
    ) == ("http_5xx", ErrorCode.UPSTREAM_UNAVAILABLE.value, True, 502)


def test_unknown_upstream_fields_are_kept_and_scrubbed_by_value() -> None:
    upstream = {
        "type": "vendor.span",
        "stage": "execute",
        "task_id": "t-9",
        "span_kind": "retriever",  # unknown: kept as is
        "note": f"called https://db.internal:5432/x with {SECRET}",  # kept, scrubbed
        "api_key": SECRET,  # a credential key: kept, value redacted
        "user_id": "kim@example.com",  # identity: kept, hashed
        "nested": {"depth": 2, "hint": "ok"},
        "trace_metadata": {
            "failure_reason": "http_5xx",
            "http_status": 503,
            "favourite_colour": "red",
        },
    }
    event = RunnerEvent.from_dict(upstream)
    assert (event.type, event.stage, event.task_id) == ("vendor.span", "execute", "t-9")
    assert set(event.extra) == {"span_kind", "note", "api_key", "user_id", "nested"}
    assert event.extra["span_kind"] == "retriever"
    assert event.extra["nested"] == {"depth": 2, "hint": "ok"}
    assert event.extra["api_key"] == "[REDACTED]"
    assert isinstance(event.extra["user_id"], str)
    assert "kim" not in event.extra["user_id"]
    text = event_to_json(event)
    assert SECRET not in text
    assert "db.internal" not in text
    assert "kim@example.com" not in text
    # inside trace_metadata the evidence allow-list still applies
    assert event.trace_metadata["failure_reason"] == "http_5xx"
    assert event.trace_metadata["http_status"] == 503
    assert "favourite_colour" not in event.trace_metadata
    assert event.trace_metadata["dropped_keys"] == ["favourite_colour"]


def test_forwarding_an_event_again_keeps_its_extra_fields() -> None:
    first = RunnerEvent.from_dict({"type": "x", "stage": "execute", "span_kind": "tool"})
    again = RunnerEvent.from_dict(json.loads(event_to_json(first)))
    assert again.extra == {"span_kind": "tool"}
    assert again.time == first.time


def test_extra_given_directly_is_scrubbed_on_construction() -> None:
    event = RunnerEvent("x", "execute", extra={"authorization": f"Bearer {SECRET}", "n": 3})
    assert event.extra == {"authorization": "[REDACTED]", "n": 3}
