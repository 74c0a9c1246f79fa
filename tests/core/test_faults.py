"""FaultPlan: what each seam's question answers, how often a fault fires, the plan over
the wire, the scope that makes it active, and the event each fired fault emits."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from llamon_agent.core.events import EventBus, RunnerEvent, event_scope
from llamon_agent.core.faults import (
    FAULTS_METADATA_KEY,
    DownstreamFailed,
    DownstreamUnavailable,
    FaultPlan,
    McpConnectionDrop,
    ModelEmptyAnswer,
    ModelMalformedJson,
    ModelRateLimited,
    ModelServerError,
    TaskStoreFailsOnce,
    ToolRaises,
    ToolSlow,
    ToolTimeout,
    active_faults,
    fault_scope,
)


def timeout(tool: str) -> ToolTimeout:
    return ToolTimeout(kind="tool_timeout", tool=tool)


# --------------------------------------------------------------------------- the seams' questions


def test_for_tool_answers_every_call_of_the_named_tool_and_counts_each() -> None:
    plan = FaultPlan([timeout("get_book"), ToolSlow(kind="tool_slow", tool="search", delay_ms=5)])
    assert plan.for_tool("get_book") == timeout("get_book")
    assert plan.for_tool("get_book") == timeout("get_book")
    assert plan.for_tool("search") == ToolSlow(kind="tool_slow", tool="search", delay_ms=5)
    assert plan.for_tool("order_book") is None
    assert plan.fired == {"tool_timeout:get_book": 2, "tool_slow:search": 1}


def test_for_tool_takes_the_first_fault_naming_the_tool() -> None:
    raises = ToolRaises(kind="tool_raises", tool="get_book", message="disk on fire")
    plan = FaultPlan([raises, timeout("get_book")])
    assert plan.for_tool("get_book") is raises
    assert plan.fired == {"tool_raises:get_book": 1}


def test_for_model_fires_each_model_fault_once_in_order_skipping_the_others() -> None:
    empty = ModelEmptyAnswer(kind="model_empty_answer")
    limited = ModelRateLimited(kind="model_rate_limited", retry_after_ms=250)
    plan = FaultPlan(
        [empty, timeout("get_book"), limited, TaskStoreFailsOnce(kind="task_store_fails_once")]
    )
    assert plan.for_model() is empty
    assert plan.for_model() is limited
    assert plan.for_model() is None
    assert plan.for_model() is None
    assert plan.fired == {"model_empty_answer": 1, "model_rate_limited": 1}


def test_two_faults_of_one_kind_fire_once_each() -> None:
    first = ModelServerError(kind="model_server_error", status=502)
    second = ModelServerError(kind="model_server_error", status=503)
    plan = FaultPlan([first, second])
    assert [plan.for_model(), plan.for_model(), plan.for_model()] == [first, second, None]
    assert plan.fired == {"model_server_error": 2}


def test_mcp_dropped_counts_the_servers_calls_and_drops_after_after_calls() -> None:
    plan = FaultPlan([McpConnectionDrop(kind="mcp_connection_drop", server="books", after_calls=2)])
    assert [plan.mcp_dropped("books") for _ in range(4)] == [False, False, True, True]
    assert plan.mcp_dropped("weather") is False
    assert plan.fired == {"mcp_connection_drop:books": 2}


def test_mcp_dropped_after_zero_calls_drops_the_first() -> None:
    plan = FaultPlan([McpConnectionDrop(kind="mcp_connection_drop", server="books", after_calls=0)])
    assert plan.mcp_dropped("books") is True


def test_store_fails_once_then_never() -> None:
    plan = FaultPlan([TaskStoreFailsOnce(kind="task_store_fails_once")])
    assert [plan.store_fails(), plan.store_fails(), plan.store_fails()] == [True, False, False]
    assert plan.fired == {"task_store_fails_once": 1}
    assert FaultPlan([timeout("x")]).store_fails() is False


def test_store_fails_and_model_faults_do_not_spend_each_other() -> None:
    plan = FaultPlan(
        [
            TaskStoreFailsOnce(kind="task_store_fails_once"),
            ModelEmptyAnswer(kind="model_empty_answer"),
        ]
    )
    assert plan.for_model() == ModelEmptyAnswer(kind="model_empty_answer")
    assert plan.store_fails() is True


def test_for_downstream_matches_the_card_name_or_the_url() -> None:
    failed = DownstreamFailed(kind="downstream_failed", agent="http://127.0.0.1:9000/")
    down = DownstreamUnavailable(kind="downstream_unavailable", agent="inventory")
    plan = FaultPlan([failed, down])
    assert plan.for_downstream(None, "http://127.0.0.1:9000") is failed
    assert plan.for_downstream("inventory", "http://127.0.0.1:9001") is down
    assert plan.for_downstream("billing", None) is None


# --------------------------------------------------------------------------- the plan itself


def test_a_plan_is_true_with_faults_or_a_guard() -> None:
    assert not FaultPlan()
    assert FaultPlan(guard="plan")
    assert FaultPlan([timeout("x")])
    assert repr(FaultPlan([timeout("x")], guard="no_cleanup")) == (
        "FaultPlan(['tool_timeout'], guard='no_cleanup')"
    )


def test_an_unknown_guard_is_refused() -> None:
    with pytest.raises(ValueError, match=r"guard must be one of \('plan', 'no_cleanup'\), got 'x'"):
        FaultPlan(guard="x")  # type: ignore[arg-type]


def test_metadata_round_trip_keeps_every_fault_and_the_guard() -> None:
    plan = FaultPlan(
        [
            timeout("get_book"),
            ToolSlow(kind="tool_slow", tool="search", delay_ms=40),
            ModelMalformedJson(kind="model_malformed_json"),
            ModelRateLimited(kind="model_rate_limited"),
            McpConnectionDrop(kind="mcp_connection_drop", server="books", after_calls=1),
        ],
        guard="plan",
    )
    wire = json.loads(json.dumps(plan.to_metadata()))
    assert wire == {
        "faults": [
            {"kind": "tool_timeout", "tool": "get_book"},
            {"kind": "tool_slow", "tool": "search", "delay_ms": 40},
            {"kind": "model_malformed_json"},
            {"kind": "model_rate_limited", "retry_after_ms": 1000},
            {"kind": "mcp_connection_drop", "server": "books", "after_calls": 1},
        ],
        "guard": "plan",
    }
    back = FaultPlan.from_metadata(wire)
    assert back.faults == plan.faults
    assert back.guard == "plan"
    assert back.fired == {}


def test_metadata_without_guard_or_faults() -> None:
    assert FaultPlan().to_metadata() == {"faults": []}
    empty = FaultPlan.from_metadata({})
    assert (empty.faults, empty.guard) == ((), None)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], f"{FAULTS_METADATA_KEY} must be an object"),
        ({"faults": [], "x": 1}, f"{FAULTS_METADATA_KEY}: unknown field 'x'"),
        ({"guard": "maybe"}, f"{FAULTS_METADATA_KEY}.guard must be 'plan' or 'no_cleanup'"),
        ({"faults": "x"}, f"{FAULTS_METADATA_KEY}.faults: Input should be a valid list"),
        (
            {"faults": [{}]},
            f"{FAULTS_METADATA_KEY}.faults[0]: Unable to extract tag using discriminator 'kind'",
        ),
        (
            {"faults": [{"kind": "tool_timeout"}]},
            f"{FAULTS_METADATA_KEY}.faults[0].tool_timeout.tool: Field required",
        ),
        (
            {"faults": [{"kind": "tool_timeout", "tool": ""}]},
            f"{FAULTS_METADATA_KEY}.faults[0].tool_timeout.tool: "
            "String should have at least 1 character",
        ),
        (
            {"faults": [{"kind": "tool_slow", "tool": "a", "delay_ms": 0}]},
            f"{FAULTS_METADATA_KEY}.faults[0].tool_slow.delay_ms: "
            "Input should be greater than or equal to 1",
        ),
        (
            {"faults": [{"kind": "tool_timeout", "tool": "a", "extra": 1}]},
            f"{FAULTS_METADATA_KEY}.faults[0].tool_timeout.extra: Extra inputs are not permitted",
        ),
        (
            {"faults": [{"kind": "model_server_error", "status": 404}]},
            f"{FAULTS_METADATA_KEY}.faults[0].model_server_error.status: "
            "Input should be greater than or equal to 500",
        ),
    ],
)
def test_from_metadata_names_what_is_wrong(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=FAULTS_METADATA_KEY) as caught:
        FaultPlan.from_metadata(value)
    assert str(caught.value) == message


def test_from_metadata_names_an_unknown_kind_and_the_known_ones() -> None:
    with pytest.raises(ValueError, match="Input tag 'nope'") as caught:
        FaultPlan.from_metadata({"faults": [{"kind": "nope"}]})
    text = str(caught.value)
    assert text.startswith(
        f"{FAULTS_METADATA_KEY}.faults[0]: Input tag 'nope' found using 'kind' does not match"
    )
    assert "'tool_timeout'" in text
    assert "'task_store_fails_once'" in text


# --------------------------------------------------------------------------- the scope


def test_no_plan_is_active_outside_a_scope() -> None:
    assert active_faults() is None


def test_scopes_nest_and_reset() -> None:
    outer, inner = FaultPlan([timeout("a")]), FaultPlan([timeout("b")])
    with fault_scope(outer) as given:
        assert given is outer
        assert active_faults() is outer
        with fault_scope(inner):
            assert active_faults() is inner
        assert active_faults() is outer
        with fault_scope(None):
            assert active_faults() is None
        assert active_faults() is outer
    assert active_faults() is None


def test_an_empty_plan_is_no_plan() -> None:
    with fault_scope(FaultPlan()):
        assert active_faults() is None


def test_a_scope_resets_when_its_block_raises() -> None:
    plan = FaultPlan([timeout("a")])
    with pytest.raises(KeyError), fault_scope(plan):
        raise KeyError("x")
    assert active_faults() is None


async def test_tasks_started_inside_a_scope_see_its_plan() -> None:
    plan = FaultPlan([timeout("a")])

    async def seen() -> FaultPlan | None:
        return active_faults()

    with fault_scope(plan):
        task = asyncio.create_task(seen())
    assert await task is plan
    assert await asyncio.create_task(seen()) is None


# --------------------------------------------------------------------------- the event


async def test_each_fired_fault_emits_lab_fault_injected_naming_kind_and_target() -> None:
    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    plan = FaultPlan([timeout("get_book"), ModelEmptyAnswer(kind="model_empty_answer")])
    with event_scope(bus, task_id="task-1"):
        plan.for_tool("get_book")
        plan.for_tool("search")  # not named: no event
        plan.for_model()
        plan.for_model()  # spent: no event
    await bus.flush()
    assert [(e.type, e.stage, e.task_id, dict(e.trace_metadata)) for e in got] == [
        ("lab.fault_injected", "lab", "task-1", {"fault": "tool_timeout", "target": "get_book"}),
        ("lab.fault_injected", "lab", "task-1", {"fault": "model_empty_answer"}),
    ]


def test_without_a_bus_a_fired_fault_is_only_counted() -> None:
    plan = FaultPlan([timeout("get_book")])
    assert plan.for_tool("get_book") is not None
    assert plan.fired == {"tool_timeout:get_book": 1}
